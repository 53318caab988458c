"""The corpus of programs measured on a real TPU (issue "Time checked against the chip").

    python tests/bench/chip_corpus.py measure OUT.json [--only LABEL,...]   # on a TPU VM: device time per kernel
    python tests/bench/chip_corpus.py estimate OUT.json [--workers N]       # anywhere: the inspector's figures
    python tests/bench/chip_corpus.py merge --measured M.json --estimated E.json  # into tests/data/chip/v5e_corpus.json
    python tests/bench/chip_corpus.py table [CORPUS.json]                 # BENCHMARKS.md's table
    python tests/bench/chip_corpus.py score [CORPUS.json] --only heldout4 # a round against the time issue's done-when

``measure`` runs each entry on the attached chip under jax's profiler (inspector.measure.on_chip,
the code --measure runs); ``estimate`` computes, deviceless, what the inspector shows for the same
entry on that chip (each kernel's roofline and libtpu's estimate, as `show --time --json`).
tests/test_tpu_vm.py reads the merged file (tests/data/chip/v5e_corpus.json) without a TPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests/data/chip/v5e_corpus.json")


@dataclasses.dataclass(frozen=True)
class Entry:
    label: str
    spec: str
    args: str | None = None  # shape specs; None: INSPECT's
    sets: tuple[tuple[str, object], ...] = ()
    sweep: str | None = None  # the block-size sweep it belongs to

    @property
    def set_list(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.sets]


def _sweep(name: str, spec: str, args: str | None, grid: dict[str, list]) -> list[Entry]:
    import itertools

    keys = list(grid)
    return [Entry(f"{name}:" + ",".join(f"{k}={v}" for k, v in zip(keys, values)), spec, args,
                  tuple(zip(keys, values)), sweep=name) for values in itertools.product(*(grid[k] for k in keys))]


QKV = "bf16[4,4096,128] bf16[4,4096,128] bf16[4,4096,128]"
J = "samples/jax_kernels.py"
P = "tests/bench/chip_probes.py"
H = "tests/bench/chip_heldout.py"

ENTRIES: list[Entry] = [
    # the samples, as INSPECT gives them
    Entry("attention.naive", "samples/attention.py:naive"),
    Entry("attention.flash", "samples/attention.py:flash"),
    Entry("attention.reference", "samples/attention.py:reference", QKV),
    Entry("attention.block_sparse", "samples/attention.py:block_sparse"),
    Entry("matmul.tiled", "samples/matmul.py:tiled"),
    Entry("matmul.xla", "samples/matmul.py:xla"),
    Entry("moe.experts", "samples/moe.py:experts"),
    Entry("moe.experts_xla", "samples/moe.py:experts_xla"),
    Entry("transformer.loss_fn", "samples/transformer.py:loss_fn"),
    Entry("transformer.train_step", "samples/transformer.py:train_step"),
    # every Pallas TPU kernel JAX ships (samples/jax_kernels.py), at working sizes
    Entry("jax.flash_attention", f"{J}:flash_attention", "bf16[2,8,2048,128] bf16[2,8,2048,128] bf16[2,8,2048,128]",
          (("block_q", 512), ("block_k_major", 512), ("block_k", 256))),
    Entry("jax.flash_attention_ref", f"{J}:flash_attention_ref", "bf16[2,8,2048,128] bf16[2,8,2048,128] bf16[2,8,2048,128]"),
    Entry("jax.splash_mha_causal", f"{J}:splash_mha_causal", "bf16[8,2048,128] bf16[8,2048,128] bf16[8,2048,128]",
          (("block_q", 512), ("block_kv", 512), ("block_kv_compute", 256))),
    Entry("jax.splash_mha_local", f"{J}:splash_mha_local", "bf16[8,2048,128] bf16[8,2048,128] bf16[8,2048,128]",
          (("window", 256), ("block_q", 256), ("block_kv", 256), ("block_kv_compute", 128))),
    Entry("jax.splash_mqa", f"{J}:splash_mqa", "bf16[8,2048,128] bf16[2048,128] bf16[2048,128]",
          (("block_q", 512), ("block_kv", 512), ("block_kv_compute", 256))),
    Entry("jax.gmm", f"{J}:gmm"),
    Entry("jax.tgmm", f"{J}:tgmm"),
    Entry("jax.paged_attention", f"{J}:paged_attention"),
    Entry("jax.ragged_paged_attention", f"{J}:ragged_paged_attention"),
    Entry("jax.matmul", f"{J}:matmul", "f32[2048,2048] f32[2048,2048]", (("bm", 512), ("bn", 512), ("bk", 256))),
    Entry("jax.matmul_ref", f"{J}:matmul_ref", "f32[2048,2048] f32[2048,2048]"),
    Entry("jax.threefry_bits", f"{J}:threefry_bits"),
    Entry("jax.philox_bits", f"{J}:philox_bits"),
    Entry("jax.double", f"{J}:double", "f32[1024,1024]"),
    # block-size sweeps: a matmul, flash attention, a grouped matmul
    *_sweep("sweep.matmul", "samples/matmul.py:tiled", "bf16[4096,4096] bf16[4096,4096]",
            {"bm": [128, 256, 512, 1024], "bk": [256, 1024], "bn": [256, 512, 1024]}),
    *_sweep("sweep.flash", "samples/attention.py:flash", QKV, {"block_q": [128, 256, 512, 1024], "block_k": [128, 256, 512]}),
    # the same kernel with no causal mask: every grid step runs the body its pl.when guards when causal
    *_sweep("sweep.flash_full", "samples/attention.py:flash", QKV, {"causal": [False], "block_q": [128, 256, 512, 1024],
                                                                   "block_k": [128, 512]}),
    *_sweep("sweep.experts", "samples/moe.py:experts", None, {"bm": [128, 256, 512], "bk": [128, 512], "bn": [128, 256, 512]}),
    # what a grid step costs beside its work (tests/bench/chip_probes.py)
    Entry("probe.idle", f"{P}:idle"),
    *_sweep("probe.copy", f"{P}:copy", None, {"rows": [8, 128, 512], "cols": [128, 1024]}),
    *_sweep("probe.read", f"{P}:read", None, {"rows": [8, 128, 512], "cols": [1024]}),
    *_sweep("probe.read4", f"{P}:read4", None, {"rows": [8, 512], "cols": [1024]}),
    # measured to check the estimate, never to set it (tests/bench/chip_heldout.py)
    *_sweep("heldout.gmm", f"{H}:gmm", None, {"tm": [128, 256, 512], "tk": [128, 512], "tn": [512]}),
    *_sweep("heldout.tgmm", f"{H}:tgmm", None, {"tm": [128, 512], "tk": [512], "tn": [512]}),
    *_sweep("heldout.paged", f"{H}:paged_attention", None, {"pages_per_compute_block": [4, 8, 16]}),
    Entry("heldout.gather", f"{H}:gather"),
    Entry("heldout.gather_wide", f"{H}:gather_wide"),
    *_sweep("heldout.layer_norm", f"{H}:layer_norm", None, {"rows": [8, 64, 512]}),
    Entry("heldout.splash_mha_causal", f"{J}:splash_mha_causal", "bf16[16,2048,128] bf16[16,2048,128] bf16[16,2048,128]",
          (("block_q", 256), ("block_kv", 256), ("block_kv_compute", 128))),
    Entry("heldout.splash_mha_local", f"{J}:splash_mha_local", "bf16[16,2048,128] bf16[16,2048,128] bf16[16,2048,128]",
          (("window", 256), ("block_q", 512), ("block_kv", 512), ("block_kv_compute", 256))),
    Entry("heldout.flash_attention", f"{J}:flash_attention", "bf16[4,8,2048,128] bf16[4,8,2048,128] bf16[4,8,2048,128]",
          (("block_q", 256), ("block_k_major", 256), ("block_k", 128))),
    Entry("heldout.matmul", f"{J}:matmul", "bf16[4096,4096] bf16[4096,4096]", (("bm", 256), ("bn", 512), ("bk", 512))),
    # a second held-out round (2026-12-06): third-party kernels of tests/data/heldout*/ at working sizes,
    # their estimates committed before the chip ran them
    Entry("heldout2.sglang_fused_mlp", "tests/data/heldout3/sglang_fused_mlp.py:fused_mlp",
          "bf16[2048,1024] bf16[1024,16384] bf16[8192,1024]", (("b_seq", 256), ("b_inter", 256))),
    Entry("heldout2.amleng_softmax", "tests/data/heldout8/amleng_softmax.py:amleng_softmax", "bf16[32768,4096]",
          (("bm", 128),)),
    Entry("heldout2.flax_layer_norm", "tests/data/heldout8/flax_layer_norm.py:flax_layer_norm",
          "f32[65536,1024] f32[1024] f32[1024]", (("block_size", 256),)),
    Entry("heldout2.pallasbench_mha", "tests/data/heldout4/pallasbench_mha.py:pallas_multi_head_attention",
          "f32[32,1024,64] f32[32,1024,64] f32[32,1024,64]"),
    Entry("heldout2.unbound_flash_decoding", "tests/data/heldout9/unbound_flash_decoding.py:unbound_flash_decoding",
          "bf16[16,8,1,128] bf16[16,8,8192,128] bf16[16,8,8192,128]", (("block_kv", 256),)),
    Entry("heldout2.maxkernel_gemm_swish", "tests/data/heldout10/maxkernel_gemm_swish.py:maxkernel_gemm_swish",
          "f32[8192,1024] f32[1024,1024] f32[1024]", (("b_batch", 128),)),
    Entry("heldout2.pallas_forge_geglu", "tests/data/heldout11/pallas_forge_glu.py:pallas_forge_geglu",
          "bf16[2048,4096] bf16[4096,4096] bf16[4096,4096]", (("block_m", 256), ("block_n", 256))),
    Entry("heldout2.recurrentgemma_lru", "tests/data/heldout3/recurrentgemma_lru.py:lru_pallas_scan",
          "f32[8,4096,1024] f32[8,4096,1024] f32[8,1024]", (("max_seq_block_size", 256),)),
    # held out, round 3 (2026-12-06): XLA programs too costly to simulate whole, their ops simulated
    # alone; estimated and committed before the chip ran them
    Entry("heldout3.gpt2_train_step", "tests/data/heldout12/gpt2_working_size.py:train_step"),
    Entry("heldout3.gpt2_loss", "tests/data/heldout12/gpt2_working_size.py:loss_fn"),
    # a fourth held-out round (2026-12-06), 23 programs from 9 sources (tests/data/heldout13/: t5x,
    # optax, praxis, neuralgcm/dinosaur, NPBench, PyTorch/XLA, tokamax, AxLearn, RLax), at INSPECT's
    # shapes and first block sizes; estimates committed before the chip ran them
    *(Entry(f"heldout4.{name}", f"tests/data/heldout13/{spec}") for name, spec in (
        ("t5x_topk_mask", "t5x_binary_search.py:t5x_topk_mask"),
        ("t5x_topp_mask", "t5x_binary_search.py:t5x_topp_mask"),
        ("optax_newton_schulz", "optax_muon.py:newton_schulz"),
        ("optax_muon_update", "optax_muon.py:muon_update"),
        ("praxis_top2_gating", "praxis_moe_gating.py:gshard_top2_gating"),
        ("praxis_expert_choice", "praxis_moe_gating.py:expert_choice_gating"),
        ("dinosaur_sh_transform", "dinosaur_transforms.py:sh_transform"),
        ("dinosaur_sh_inverse", "dinosaur_transforms.py:sh_inverse_transform"),
        ("dinosaur_linearized_take", "dinosaur_transforms.py:linearized_take"),
        ("dinosaur_advanced_indexing", "dinosaur_transforms.py:advanced_indexing"),
        ("npbench_lenet5", "npbench_jax.py:npbench_lenet5"),
        ("npbench_resnet_block", "npbench_jax.py:npbench_resnet_block"),
        ("npbench_spmv", "npbench_jax.py:npbench_spmv"),
        ("torchxla_w8a8_matmul", "torchxla_quantized_matmul.py:w8a8_matmul"),
        ("tokamax_lce_forward", "tokamax_linear_ce.py:tokamax_lce_forward"),
        ("tokamax_lce_backward", "tokamax_linear_ce.py:tokamax_lce_backward"),
        ("tokamax_gmm_int8", "tokamax_gmm_v2.py:gmm_int8_blockwise"),
        ("tokamax_gmm_bf16", "tokamax_gmm_v2.py:gmm_bf16"),
        ("axlearn_mamba_scan", "axlearn_mamba_scan.py:mamba_scan"),
        ("axlearn_mamba_scan_grad", "axlearn_mamba_scan.py:mamba_scan_grad"),
        ("axlearn_tpu_decoding", "axlearn_tpu_decoding.py:axlearn_tpu_decoding"),
        ("rlax_vtrace", "rlax_returns.py:impala_vtrace"),
        ("rlax_retrace", "rlax_returns.py:retrace_returns"),
    )),
]


def _entries(only: str | None) -> list[Entry]:
    if not only:
        return ENTRIES
    def names(e: Entry, word: str) -> bool:  # the label, its variants (label:...), its group (label.) or its sweep
        return e.label == word or e.label.startswith((word + ":", word + ".")) or (e.sweep or "") == word

    wanted = only.split(",")
    unknown = [w for w in wanted if not any(names(e, w) for e in ENTRIES)]
    if unknown:  # a misspelt word would measure nothing and say nothing
        raise SystemExit(f"--only {','.join(unknown)}: no corpus entry has that label, group or sweep "
                         "(`chip_corpus.py list` shows them)")
    return [e for e in ENTRIES if any(names(e, w) for w in wanted)]


def _write(path: str, data) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def measure(out: str, only: str | None) -> None:
    """On the chip: each entry's device time per kernel; written after every entry (a run cut short keeps what it did)."""
    import inspector.base.environment as environment

    os.environ[environment.ON_CHIP_MARK] = "1"  # this process is the one that opens the chip
    environment.prepare()
    from inspector.compilation.backends import attached_chip
    from inspector.measure.on_chip import measure_target, tpu_devices, versions
    from inspector.compilation.target import load_target

    chip = attached_chip()
    devices = tpu_devices()
    data = {"chip": chip.name if chip else None, "device_kind": devices[0].device_kind, "versions": versions(),
            "date": datetime.date.today().isoformat(), "method": None, "entries": {}}
    for e in _entries(only):
        start = time.perf_counter()
        try:
            target = load_target(e.spec, args=e.args, sets=e.set_list)
            m = measure_target(target, chip_name=data["chip"] or "tpu")
            data["method"] = m.method.split(";")[0].replace(f"{m.runs} runs", "N runs")
            data["entries"][e.label] = {"seconds": m.seconds, "seconds_min": m.seconds_min, "seconds_max": m.seconds_max,
                                        "runs": m.runs, "kernels": [dataclasses.asdict(k) for k in m.kernels]}
        except Exception as err:  # one entry failing is that entry's record
            data["entries"][e.label] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
        print(f"{e.label}: {time.perf_counter() - start:.1f}s "
              + (f"{data['entries'][e.label]['seconds'] * 1e6:.1f} us" if "seconds" in data["entries"][e.label] else data["entries"][e.label]["error"]),
              flush=True)
        _write(out, data)


def _estimate_one(payload):
    label, spec, args, sets, chip_name, budget = payload
    import inspector.base.environment as environment

    environment.prepare()
    from inspector.base.chips import get_chip
    from inspector.libtpu import Budget
    from inspector.results.report import make_report
    from inspector.results.view_table import Needs
    from inspector.compilation.target import load_target

    start = time.perf_counter()
    try:
        target = load_target(spec, args=args, sets=list(sets))
        report = make_report(target, get_chip(chip_name), Needs(compile=True, fusions=True, pallas=True, time=True),
                             time_budget=Budget(seconds=budget))
        a = report.fusions
        kernels = [{"name": k.name, "kind": k.kind, "repeat": k.repeat, "roofline_s": k.roofline_s,
                    "estimated_seconds": k.estimated_seconds, "estimate_source": k.estimate_source,
                    "estimate_kind": k.estimate_kind, "high_seconds": k.high_seconds,
                    "flops": k.flops, "reduce_window_flops": k.reduce_window_flops, "transcendentals": k.transcendentals,
                    "hbm_bytes": k.hbm_bytes}
                   for k in (a.kernels if a else [])]
        below = {f.kernel: f.data["libtpu_seconds"] for f in report.findings if f.code == "libtpu-below-roofline"}
        for k in kernels:
            k["libtpu_seconds"] = below.get(k["name"], k["estimated_seconds"] if k["estimate_source"] not in ("roofline", "bundles")
                                            else None)
        bundles = [{"kernel": b.kernel, "bundles": b.bundles, "bundles_per_step": b.bundles_per_step,
                    "cycles_per_step": b.cycles_per_step} for b in (report.time.bundles if report.time else [])]
        found = {"kernels": kernels, "bundles": bundles, "roofline_s": a.totals.get("roofline_s") if a else None,
                 "estimated_seconds": a.totals.get("estimated_seconds") if a else None,
                 "estimate_kind": a.totals.get("estimate_kind") if a else None,
                 "method": report.time.method if report.time else None,
                 # compiles the machine's speed stopped (then figures depend on it; none where all is well)
                 "stopped": [j.label for j in (report.time.jobs if report.time else []) if j.status in ("time-limit", "no-answer")],
                 "findings": sorted({f.code for f in report.findings})}
    except Exception as err:
        found = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
    found["wall_seconds"] = round(time.perf_counter() - start, 2)
    return label, found


def estimate(out: str, only: str | None, workers: int, chip: str, budget: float) -> None:
    """Deviceless: the inspector's roofline and libtpu estimate per kernel of each entry."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    import multiprocessing

    data = {"chip": chip, "date": datetime.date.today().isoformat(), "entries": {}}
    jobs = [(e.label, e.spec, e.args, tuple(e.set_list), chip, budget) for e in _entries(only)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        # written as each ends, so that a run stopped early keeps all it finished
        for done in as_completed([pool.submit(_estimate_one, job) for job in jobs]):
            label, found = done.result()
            data["entries"][label] = found
            print(f"{label}: {found.get('wall_seconds')}s {found.get('error', '')}", flush=True)
            _write(out, data)


def merge(out: str, measured: list[str], estimated: list[str]) -> None:
    """Measurements and estimates into the corpus ``out``: an entry found in none of the files
    keeps what ``out`` has (a re-estimate needs no chip; new entries need not re-measure the old);
    of several files that have an entry, the last given wins."""
    def load(path):
        with open(path) as f:
            return json.load(f)

    old = load(out) if os.path.exists(out) else {"entries": {}}
    ms, es = [load(p) for p in measured], [load(p) for p in estimated]
    entries = {}
    for e_ in ENTRIES:
        before = old["entries"].get(e_.label, {})
        m = next((f["entries"][e_.label] for f in reversed(ms) if e_.label in f["entries"]), before.get("measured"))
        i = next((f["entries"][e_.label] for f in reversed(es) if e_.label in f["entries"]), before.get("inspector"))
        entries[e_.label] = {"spec": e_.spec, "args": e_.args, "sets": dict(e_.sets), "sweep": e_.sweep,
                             "measured": m, "inspector": i}
    data = {k: (ms[-1] if ms else old)[k] for k in ("chip", "device_kind", "versions", "date", "method")}
    data["inspector_date"] = es[-1]["date"] if es else old["inspector_date"]
    data["entries"] = entries
    _write(out, data)


# the findings that say a kernel's figure is unsure
UNSURE = ("libtpu-guard-unknown", "libtpu-loop-unknown", "libtpu-aborted", "libtpu-below-roofline", "time-budget",
          "xla-cost-unknown")


def kernel_rows(data: dict, floor: float, only: str | None = None) -> list[tuple]:
    """(label, kernel, measured per launch, estimate, source, roofline, findings, kind) for every
    kernel of ``floor`` seconds or more on the chip that the inspector's figures name (of the
    entries ``only`` names)."""
    rows = []
    labels = {e.label for e in _entries(only)}
    for label, e in data["entries"].items():
        if label not in labels:
            continue
        m, i = e["measured"], e["inspector"]
        if not m or "error" in m or not i or "error" in i:
            continue
        mine = {k["name"]: k for k in i["kernels"]}
        for k in m["kernels"]:
            seconds = k["seconds"] / k["launches"] if k["launches"] else k["seconds"]
            if seconds >= floor and k["name"] in mine:
                x = mine[k["name"]]
                rows.append((label, k["name"], seconds, x["estimated_seconds"], x["estimate_source"], x["roofline_s"],
                             i.get("findings", []), x.get("estimate_kind") or "estimate"))
    return rows


def score(path: str, only: str | None) -> None:
    """The time issue's done-when on the entries ``only`` names: of the kernels of 0.1 ms or more,
    how many within 25% and 2x of the chip, and whether every figure more than 2x off says it is a
    floor or a range."""
    with open(path) as f:
        data = json.load(f)
    rows = kernel_rows(data, 1e-4, only)
    ratio = lambda r: (r[3] or 0) / r[2]
    kernels, within, twice, off, labelled = round_figures(data, only)
    print(f"{kernels} kernels of 0.1 ms or more: {within} within 25% of the chip ({within / max(kernels, 1):.0%}), "
          f"{twice} within 2x; {off} more than 2x off, {labelled} of them labelled floor or range")
    for r in sorted(rows, key=ratio):
        print(f"  {r[0]:<40} {r[1][:40]:<40} {r[2] * 1e6:10,.1f} us  {ratio(r):6.2f}x  {r[7]:<8} {r[4]}")


def round_figures(data: dict, only: str | None) -> tuple[int, int, int, int, int]:
    """A round's kernels of 0.1 ms or more (the entries ``only`` names): how many, how many within
    25% of the chip, within 2x, more than 2x off, and of those how many labelled floor or range."""
    rows = kernel_rows(data, 1e-4, only)
    ratio = lambda r: (r[3] or 0) / r[2]
    off = [r for r in rows if not 0.5 <= ratio(r) <= 2]
    return (len(rows), sum(1 for r in rows if 0.75 <= ratio(r) <= 1.25), sum(1 for r in rows if 0.5 <= ratio(r) <= 2),
            len(off), sum(1 for r in off if r[7] != "estimate"))


def corpus_figures(data: dict) -> tuple[int, int, int]:
    """The corpus's kernels of 0.1 ms or more (not the held-out ones, not the probes): how many, how
    many within 25% of the chip, how many within 2x (README and BENCHMARKS.md quote them)."""
    rows = [r for r in kernel_rows(data, 1e-4) if not r[0].startswith(("heldout", "probe."))]
    return (len(rows), sum(1 for r in rows if r[3] and 0.75 <= r[3] / r[2] <= 1.25),
            sum(1 for r in rows if r[3] and 0.5 <= r[3] / r[2] <= 2))


def spearman(a: list[float], b: list[float]) -> float:
    import numpy as np

    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def table(path: str) -> None:
    """The markdown table of BENCHMARKS.md: every kernel of 0.1 ms or more, then each sweep."""
    with open(path) as f:
        data = json.load(f)
    rows = kernel_rows(data, 1e-4)
    print(f"Measured on {data['device_kind']} ({data['chip']}), jax {data['versions'].get('jax')}, libtpu "
          f"{data['versions'].get('libtpu')}, {data['date']}: {data['method']}. The inspector's figures "
          f"(`show --time`, deviceless) of {data['inspector_date']}.\n")
    print("| program | kernel | measured | estimate | est./meas. | source | roofline/meas. |")
    print("|---|---|---:|---:|---:|---|---:|")
    for label, name, seconds, est, source, roof, findings, _ in sorted(rows, key=lambda r: (r[3] or 0) / r[2]):
        unsure = [f for f in findings if f in UNSURE]
        print(f"| {label} | {name} | {seconds * 1e6:,.1f} us | {(est or 0) * 1e6:,.1f} us | {(est or 0) / seconds:.2f} | "
              f"{source}{' (' + ', '.join(unsure) + ')' if unsure else ''} | {(roof or 0) / seconds:.2f} |")
    within = sum(1 for r in rows if r[3] and 0.75 <= r[3] / r[2] <= 1.25)
    twice = sum(1 for r in rows if r[3] and 0.5 <= r[3] / r[2] <= 2)
    print(f"\n{len(rows)} kernels: {within} within 25% of the chip, {twice} within 2x.\n")
    print("| sweep | candidates | est./meas. | Spearman | tune's pick against the fastest |")
    print("|---|---:|---:|---:|---:|")
    # the probes' rows say what a grid step costs: no tuning sweep
    for sweep in sorted({e["sweep"] for e in data["entries"].values() if e["sweep"] and not e["sweep"].startswith("probe.")}):
        rows = sweep_rows(data, sweep)
        if any("libtpu-loop-unknown" in (data["entries"][label]["inspector"].get("findings") or []) for label, *_ in rows):
            print(f"| {sweep} | {len(rows)} | not ranked: `libtpu-loop-unknown` (tune leaves them untimed) | | |")
            continue
        found = [(measured, est) for _, measured, est, _ in rows if est]
        ratios = [e / m for m, e in found]
        pick = min(found, key=lambda r: r[1])[0] / min(m for m, _ in found)
        print(f"| {sweep} | {len(found)} | {min(ratios):.2f}-{max(ratios):.2f} | "
              f"{spearman([m for m, _ in found], [e for _, e in found]):.2f} | {pick:.3f}x |")


def sweep_rows(data: dict, sweep: str) -> list[tuple]:
    """(label, measured, estimate, roofline) of each candidate of ``sweep``: its slowest kernel on the chip."""
    rows = []
    for label, e in data["entries"].items():
        m, i = e["measured"], e["inspector"]
        if e["sweep"] != sweep or not m or "error" in m or not i or "error" in i:
            continue
        kernel = max(m["kernels"], key=lambda k: k["seconds"])
        est = next((k for k in i["kernels"] if k["name"] == kernel["name"]), None)
        if est is not None:
            rows.append((label, kernel["seconds"], est["estimated_seconds"], est["roofline_s"]))
    return rows


def main(argv=None) -> None:
    os.chdir(ROOT)  # the entries name files from the repository's root; the inspector is the installed one
    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("mode", choices=("measure", "estimate", "merge", "table", "score", "list"))
    p.add_argument("paths", nargs="*")
    p.add_argument("--only")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--chip", default="tpu-v5e")
    p.add_argument("--budget", type=float, default=60.0)
    p.add_argument("--measured", action="append", help="merge: a file `measure` wrote (repeatable)")
    p.add_argument("--estimated", action="append", help="merge: a file `estimate` wrote (repeatable)")
    p.add_argument("--out", default=CORPUS, help="merge: the corpus to update")
    a = p.parse_args(argv)
    if a.mode == "measure":
        measure(a.paths[0], a.only)
    elif a.mode == "estimate":
        estimate(a.paths[0], a.only, a.workers, a.chip, a.budget)
    elif a.mode == "table":
        table(a.paths[0] if a.paths else CORPUS)
    elif a.mode == "score":
        score(a.paths[0] if a.paths else CORPUS, a.only)
    elif a.mode == "merge":
        merge(a.out, a.measured or [], a.estimated or [])
    else:
        for e in _entries(a.only):
            print(e.label, e.spec, e.args or "", " ".join(e.set_list))


if __name__ == "__main__":
    main()
