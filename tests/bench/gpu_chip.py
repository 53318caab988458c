"""For a session lent an NVIDIA GPU (an H200): in one call, every verb on the attached GPU, the
kernels of 20+ programs measured against the inspector's deviceless estimate, and the deviceless
compile's launches (shared memory, registers, spills, PTX target) against the attached GPU's own
compile of the same program. Writes one JSON file, $OUT/gpu_chip.json (``SCHEMA`` keys).

    OUT=dir python tests/bench/gpu_chip.py [--chip h200] [--only LABEL,...] [--iterations 20]
    python tests/bench/gpu_chip.py --fake --out DIR --only LABEL      # the plumbing, no GPU (tests/test_gpu_chip_script.py)

Each part is recorded even when another fails (its ``error``), and the file is rewritten as each
part ends (a run stopped at its limit leaves what it had): one call on a lent machine gives
everything it can; ``--limit`` (540 s, under the device tool's 10 minutes) skips what it leaves no
time for. The estimate is ``inspector show --target CHIP --time --json`` of each entry,
deviceless, in this process (what a user without the GPU sees); the measurement is CUPTI's time of
each kernel launch (jax.experimental.mosaic.gpu.profiler.measure), the median over ``--iterations``
runs after a warm-up run. Kernels are matched by their launch name (the thunk sequence's, which
CUPTI reports), the estimate's kernels by their schedule order beside the launches.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = ("schema", "fake", "started", "seconds", "versions", "device", "verbs", "kernels", "compiles", "summary")
VERSION = 1
SKIPPED = "skipped: the run's --limit left no time"
OPS = "tests/bench/gpu_ops.py"
MATMUL = "samples/gpu_matmul.py:matmul"

# (label, spec, args or None for INSPECT's, --set values): the samples that run on a GPU, then jax's GPU kernels
ENTRIES: list[tuple[str, str, str | None, tuple[str, ...]]] = [
    ("gpu_matmul.bm128", MATMUL, "bf16[4096,4096] bf16[4096,4096]", ()),
    ("gpu_matmul.bm64", MATMUL, "bf16[4096,4096] bf16[4096,4096]", ("bm=64",)),
    ("gpu_matmul.bm128.stages2", MATMUL, "bf16[4096,4096] bf16[4096,4096]", ("stages=2",)),
    ("gpu_matmul.bm128.stages4", MATMUL, "bf16[4096,4096] bf16[4096,4096]", ("stages=4",)),
    ("gpu_matmul.bm64.warps4", MATMUL, "bf16[4096,4096] bf16[4096,4096]", ("bm=64", "warps=4")),
    ("gpu_matmul.small", MATMUL, None, ()),
    ("gpu_matmul.reference", "samples/gpu_matmul.py:reference", "bf16[4096,4096] bf16[4096,4096]", ()),
    ("attention.naive", "samples/attention.py:naive", None, ()),
    ("attention.reference", "samples/attention.py:reference", "bf16[4,4096,128] bf16[4,4096,128] bf16[4,4096,128]", ()),
    ("matmul.xla", "samples/matmul.py:xla", None, ()),
    ("moe.experts_xla", "samples/moe.py:experts_xla", None, ()),
    ("transformer.loss_fn", "samples/transformer.py:loss_fn", None, ()),
    ("transformer.train_step", "samples/transformer.py:train_step", None, ()),
    *((f"jax.{name}", f"{OPS}:{name}", None, ()) for name in (
        "mha", "mha_reference", "mha_backward", "layer_norm", "layer_norm_backward", "rms_norm", "softmax",
        "decode_mqa", "decode_gqa", "paged")),
    ("jax.mha.causal", f"{OPS}:mha", None, ("causal=True",)),
]
# the Pallas entries whose deviceless launches are compared with the attached GPU's compile
COMPILED = ("gpu_matmul.bm128", "gpu_matmul.bm64", "gpu_matmul.bm128.stages4", "jax.mha", "jax.layer_norm",
            "jax.softmax", "jax.decode_mqa", "jax.paged", "jax.mha_backward")


def _tail(text: str, n: int = 3000) -> str:
    return text[-n:]


# ----------------------------------------------------------------------------- the device

class AttachedGpu:
    """The GPU jax sees here: it runs and measures programs, and compiles them with XLA's dumps."""

    fake = False

    def __init__(self) -> None:
        import jax

        self.device = jax.devices("gpu")[0]

    def describe(self) -> dict:
        import jax

        from inspector.base.chips import CHIPS

        kind = self.device.device_kind
        row = next((c.name for c in CHIPS if c.device_kind == kind), None)
        return {"device_kind": kind, "chip": row, "count": len(jax.devices("gpu")),
                "compute_capability": getattr(self.device, "compute_capability", None)}

    def measure(self, fn: Callable, args: list, iterations: int) -> tuple[str, list[list[tuple[str, float]]]]:
        """How it was timed, and per run each kernel launch as CUPTI timed it: (name, milliseconds),
        as `inspector show --measure` times them (the GPU family's launch_times)."""
        from inspector.families.gpu.measure import launch_times

        return launch_times(fn, args, {}, iterations)

    def compile_dumps(self, fn: Callable, args: list) -> dict[str, str]:
        """The thunk sequence and PTX of this GPU's own compile of ``fn`` (the deviceless one's twin)."""
        from inspector.families.gpu.jax.compile_dumps import read_dumps

        with tempfile.TemporaryDirectory(prefix="gpu-chip-") as folder:
            fn.lower(*args).compile(compiler_options={"xla_dump_to": folder, "xla_dump_hlo_as_text": True})
            return read_dumps(folder)


class FakeGpu:
    """A stand-in for the attached GPU on a machine without one: the deviceless compile for
    ``chip`` is its "own" compile, and each launch takes a made-up time; only the plumbing is real."""

    fake = True

    def __init__(self, chip: str):
        from inspector.base.chips import get_chip

        self.chip = get_chip(chip)

    def describe(self) -> dict:
        return {"device_kind": self.chip.device_kind, "chip": self.chip.name, "count": 1,
                "compute_capability": self.chip.compute_capability}

    def _compile(self, fn: Callable, args: list):
        import jax

        from inspector.families.gpu.compile.deviceless import compile_deviceless
        from inspector.families.gpu.jax.target_configs import spec_text

        abstract = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
        return compile_deviceless(fn, abstract, spec_text(self.chip.target_config))

    def measure(self, fn: Callable, args: list, iterations: int) -> tuple[str, list[list[tuple[str, float]]]]:
        from inspector.families.gpu.kernels.thunks import kernels

        names = [k.name for k in kernels(self._compile(fn, args).thunk_sequence)]
        return "fake", [[(name, 0.01 * (i + 1) * (1 + 0.01 * run)) for i, name in enumerate(names)] for run in range(iterations)]

    def compile_dumps(self, fn: Callable, args: list) -> dict[str, str]:
        return self._compile(fn, args).dumps


# ----------------------------------------------------------------------------- the verbs

def verb_steps(chip: str) -> list[tuple[str, list[str], int]]:
    """(name, argv after `inspector`, seconds allowed): what a new user tries on the GPU machine."""
    return [
        ("doctor", ["doctor"], 120),
        ("show_default", ["show", MATMUL, "--json"], 60),  # no --target: what the attached GPU gives
        ("show_local", ["show", MATMUL, "--target", "local", "--json"], 60),
        ("show_chip", ["show", MATMUL, "--target", chip, "--view", "pallas"], 60),
        ("check_default", ["check", MATMUL], 60),
        ("check_chip", ["check", MATMUL, "--target", chip], 60),
        ("diff_default", ["diff", MATMUL], 90),
        ("diff_local", ["diff", MATMUL, "--target", "local"], 90),
        ("measure", ["show", MATMUL, "--measure", "--json"], 60),
        ("measure_chip", ["show", MATMUL, "--target", chip, "--measure", "--json"], 60),
    ]


def run_verb(argv: list[str], limit: int) -> dict:
    """``inspector ARGV`` in a process of its own, as a user runs it."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "inspector", *argv], capture_output=True, text=True, timeout=limit, cwd=ROOT)
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as timeout:
        rc, out, err = None, str(timeout.stdout or ""), f"timed out after {limit} s"
    return {"rc": rc, "seconds": round(time.monotonic() - started, 2), "stdout_tail": _tail(out), "stderr_tail": _tail(err, 1500)}


def fake_verb(argv: list[str], limit: int) -> dict:
    return {"rc": 0, "seconds": 0.0, "stdout_tail": "(fake: not run)", "stderr_tail": ""}


def verbs(chip: str, runner: Callable[[list[str], int], dict], left: Callable[[], float]) -> list[dict]:
    """Each verb step, the last ones skipped where the run's time is short (``left``: its seconds)."""
    done = []
    for name, argv, limit in verb_steps(chip):
        allowed = int(min(limit, left() - 60))  # a minute kept for the kernels at least
        outcome = runner(argv, allowed) if allowed >= 10 else {"rc": None, "seconds": 0.0, "stdout_tail": "",
                                                               "stderr_tail": SKIPPED}
        done.append({"name": name, "argv": ["inspector", *argv], **outcome})
    return done


# ----------------------------------------------------------------------------- estimate and measurement

def estimate(spec: str, args: str | None, sets: tuple[str, ...], chip: str) -> dict:
    """What ``inspector show SPEC --target CHIP --time --json`` says of each launched kernel, deviceless."""
    from inspector.cli import main

    argv = ["show", spec, "--target", chip, "--time", "--json", *(["--args", args] if args else []),
            *(a for s in sets for a in ("--set", s))]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv, isolate=False)
    if code not in (0, 1):
        return {"error": f"exit {code}: {err.getvalue().strip()[-500:]}", "kernels": []}
    report = json.loads(out.getvalue())
    hlo, launched = report.get("kernels") or [], report.get("gpu_kernels") or []
    # the launches are in schedule order, as the kernels: beside each other where the counts agree
    paired = len(hlo) == len(launched)
    kernels = [{"name": k["name"], "hlo_name": hlo[i]["name"] if paired else None,
                "estimated_seconds": hlo[i].get("estimated_seconds") if paired else None,
                "roofline_s": hlo[i].get("roofline_s") if paired else None,
                "estimate_kind": hlo[i].get("estimate_kind") if paired else None,
                "bound": hlo[i].get("bound") if paired else None,
                "shared_memory_bytes": k.get("shared_memory_bytes"), "registers": k.get("registers"),
                "spill_bytes": k.get("spill_bytes")} for i, k in enumerate(launched)]
    totals = report.get("totals") or {}
    return {"error": None if report["stages"].get("compile_error") is None else str(report["stages"]["compile_error"])[:500],
            "kernels": kernels, "paired": paired, "estimated_seconds": totals.get("estimated_seconds"),
            "roofline_s": totals.get("roofline_s"), "estimate_kind": totals.get("estimate_kind")}


def concrete(target) -> tuple[Callable, list]:
    """``target`` (inspector's loaded target) as a jitted function of its positional inputs, and
    random inputs of their shapes (floats normal, integers zero)."""
    import jax
    import jax.numpy as jnp

    kwargs = target.kwargs
    fn = jax.jit(lambda *a: target.call(*a, **kwargs))
    leaves, tree = jax.tree.flatten(target.args)
    keys = jax.random.split(jax.random.key(0), max(len(leaves), 1))
    made = [jax.random.normal(key, leaf.shape, jnp.float32).astype(leaf.dtype)
            if jnp.issubdtype(leaf.dtype, jnp.floating) else jnp.zeros(leaf.shape, leaf.dtype)
            for key, leaf in zip(keys, leaves)]
    return fn, list(jax.tree.unflatten(tree, made))


def measured(device, fn: Callable, args: list, iterations: int) -> dict:
    """Each kernel's median time over the runs (seconds), in launch order; the program's total."""
    method, runs = device.measure(fn, args, iterations)
    if not runs:
        return {"error": "no kernel launched", "method": method, "kernels": [], "seconds": None, "iterations": 0}
    per_kernel: dict[str, list[float]] = {}
    for run in runs:
        counts: dict[str, int] = {}
        for name, ms in run:  # a name launched twice in one run is two kernels: #2 after the first
            counts[name] = counts.get(name, 0) + 1
            per_kernel.setdefault(name if counts[name] == 1 else f"{name}#{counts[name]}", []).append(ms / 1e3)
    kernels = [{"name": name, "seconds": statistics.median(times)} for name, times in per_kernel.items()]
    return {"error": None, "method": method, "kernels": kernels, "seconds": sum(k["seconds"] for k in kernels),
            "iterations": len(runs)}


def matched(est: dict, meas: dict) -> list[dict]:
    """Each measured kernel beside the estimate of the launch of the same name."""
    by_name: dict[str, dict] = {}
    for k in est.get("kernels", []):
        key, n = k["name"], 2
        while key in by_name:
            key, n = f"{k['name']}#{n}", n + 1
        by_name[key] = k
    rows = []
    for m in meas.get("kernels", []):
        e = by_name.get(m["name"])
        figure = None if e is None else (e["estimated_seconds"] if e["estimated_seconds"] is not None else e["roofline_s"])
        rows.append({"name": m["name"], "measured_s": m["seconds"], "estimated_s": figure,
                     "ratio": m["seconds"] / figure if figure else None})
    return rows


def entry_record(device, label: str, spec: str, args: str | None, sets: tuple[str, ...], chip: str, iterations: int,
                 skip: bool = False) -> dict:
    from inspector.compilation.target import load_target

    record: dict[str, Any] = {"label": label, "spec": spec, "args": args, "sets": list(sets)}
    if skip:
        return {**record, "estimate": {"error": SKIPPED, "kernels": []}, "matched": [], "measured_over_estimate": None,
                "measured": {"error": SKIPPED, "method": None, "kernels": [], "seconds": None, "iterations": 0}}
    try:
        record["estimate"] = estimate(spec, args, sets, chip)
    except Exception as err:  # noqa: BLE001 - one entry's failure is its record, the others go on
        record["estimate"] = {"error": f"{type(err).__name__}: {err}"[:500], "kernels": []}
    try:
        fn, inputs = concrete(load_target(spec, args, sets=list(sets)))
        record["measured"] = measured(device, fn, inputs, iterations)
    except Exception as err:  # noqa: BLE001
        record["measured"] = {"error": f"{type(err).__name__}: {err}"[:500], "method": None, "kernels": [], "seconds": None,
                              "iterations": 0}
    record["matched"] = matched(record["estimate"], record["measured"])
    total, floor = record["measured"]["seconds"], record["estimate"].get("estimated_seconds")
    record["measured_over_estimate"] = total / floor if total and floor else None  # the whole program
    return record


# ----------------------------------------------------------------------------- deviceless against attached compiles

def launches(dumps: dict[str, str]) -> dict:
    from inspector.families.gpu.kernels.launches import kernel_launches
    from inspector.families.gpu.kernels.ptxas import ptxas_path

    ptx = {n: t for n, t in dumps.items() if n.endswith(".ptx")}
    kernels = [{"name": k.name, "grid": list(k.launch.grid or ()), "threads": list(k.launch.threads or ()),
                "shared_memory_bytes": k.launch.shared_memory_bytes,
                "registers": k.ptxas.registers if k.ptxas else None,
                "spill_bytes": k.ptxas.spill_store_bytes + k.ptxas.spill_load_bytes if k.ptxas else None}
               for k in kernel_launches(dumps.get("thunk_sequence.txt", ""), ptx, ptxas_path())]
    targets = sorted({line.split()[1] for text in ptx.values() for line in text.splitlines() if line.startswith(".target")})
    digest = hashlib.sha256("".join(ptx[n] for n in sorted(ptx)).encode()).hexdigest()[:16]
    return {"kernels": kernels, "ptx_targets": targets, "ptx_sha256": digest}


def compile_record(device, label: str, spec: str, args: str | None, sets: tuple[str, ...], chip: str,
                   skip: bool = False) -> dict:
    import jax

    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target
    from inspector.families.gpu.compile.deviceless import compile_deviceless
    from inspector.families.gpu.jax.target_configs import spec_text

    record: dict[str, Any] = {"label": label, "error": SKIPPED if skip else None}
    if skip:
        return record
    try:
        fn, inputs = concrete(load_target(spec, args, sets=list(sets)))
        abstract = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs]
        record["deviceless"] = launches(compile_deviceless(fn, abstract, spec_text(get_chip(chip).target_config)).dumps)
        record["attached"] = launches(device.compile_dumps(fn, inputs))
    except Exception as err:  # noqa: BLE001
        record["error"] = f"{type(err).__name__}: {err}"[:500]
        return record
    a, b = record["deviceless"], record["attached"]
    fields = ("name", "grid", "threads", "shared_memory_bytes", "registers", "spill_bytes")
    record["same"] = {f: [k[f] for k in a["kernels"]] == [k[f] for k in b["kernels"]] for f in fields}
    record["same"]["ptx_targets"] = a["ptx_targets"] == b["ptx_targets"]
    record["same"]["ptx"] = a["ptx_sha256"] == b["ptx_sha256"]
    return record


# ----------------------------------------------------------------------------- the run

def summary(kernels: list[dict], compiles: list[dict]) -> dict:
    ratios = [m["ratio"] for e in kernels for m in e["matched"] if m["ratio"]]
    return {"entries": len(kernels), "measured_entries": sum(1 for e in kernels if not e["measured"]["error"]),
            "estimated_entries": sum(1 for e in kernels if not e["estimate"]["error"]),
            "measured_kernels": sum(len(e["measured"]["kernels"]) for e in kernels), "matched_kernels": len(ratios),
            "median_measured_over_estimate": statistics.median(ratios) if ratios else None,
            "compiles_same": {label: all(r["same"].values()) if "same" in r else None for label, r in ((r["label"], r) for r in compiles)}}


def versions() -> dict:
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "inspector", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-cupti-cu12"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def run(device, chip: str, labels: list[str] | None, iterations: int, runner: Callable[[list[str], int], dict],
        limit: float, save: Callable[[dict], None]) -> dict:
    """Every part in turn, each saved as it ends (a run killed at its limit leaves what it had);
    the parts that ``limit`` (seconds) leaves no time for are recorded as skipped."""
    started, clock = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), time.monotonic()
    left = lambda: limit - (time.monotonic() - clock)  # noqa: E731
    entries = [e for e in ENTRIES if labels is None or e[0] in labels]
    result: dict[str, Any] = {"schema": VERSION, "fake": device.fake, "started": started, "seconds": None,
                              "versions": versions(), "device": device.describe(), "verbs": [], "kernels": [],
                              "compiles": [], "summary": None}

    def saved() -> None:
        result["summary"] = summary(result["kernels"], result["compiles"])
        result["seconds"] = round(time.monotonic() - clock, 1)
        save({key: result[key] for key in SCHEMA})

    result["verbs"] = verbs(chip, runner, left)
    saved()
    for entry in entries:  # a third of the time left is kept for the compiles' comparison
        result["kernels"].append(entry_record(device, *entry, chip, iterations, skip=left() < 60))
        saved()
    for entry in (e for e in entries if e[0] in COMPILED):
        result["compiles"].append(compile_record(device, *entry, chip, skip=left() < 15))
        saved()
    return {key: result[key] for key in SCHEMA}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chip", default="h200", help="the chip row whose deviceless estimate is compared (default h200)")
    parser.add_argument("--only", help="entry labels, comma-separated (default: all)")
    parser.add_argument("--iterations", type=int, default=20, help="measured runs per entry (default 20)")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="the folder gpu_chip.json goes to (default $OUT)")
    parser.add_argument("--limit", type=float, default=540, help="seconds the whole run may take (default 540)")
    parser.add_argument("--fake", action="store_true", help="no GPU: a fake device, verbs not run (the plumbing only)")
    opts = parser.parse_args(argv)
    if not opts.out:
        parser.error("give --out DIR or set $OUT")
    labels = opts.only.split(",") if opts.only else None
    unknown = sorted(set(labels or ()) - {e[0] for e in ENTRIES})
    if unknown:
        parser.error(f"no entry {', '.join(unknown)}: use labels of ENTRIES")
    os.chdir(ROOT)  # the entries' files are relative to the clone
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    os.makedirs(opts.out, exist_ok=True)
    from inspector.base.atomic import write_atomic

    path = os.path.join(opts.out, "gpu_chip.json")
    device = FakeGpu(opts.chip) if opts.fake else AttachedGpu()
    result = run(device, opts.chip, labels, opts.iterations, fake_verb if opts.fake else run_verb, opts.limit,
                 lambda partial: write_atomic(path, json.dumps(partial, indent=1) + "\n"))
    print(path, json.dumps(result["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
