"""Every verb on the held-out rounds' kernels (tests/data/heldout<N>/: third-party Pallas TPU kernels
the inspector was not written against), run the way a new user runs them at INSPECT's small shapes:
every view on the CPU and on one TPU from one Report per entry, `check` (the estimate on three
generations, libtpu's compile on one), `diff` in interpret mode where the round runs it, and
`export`. A correct kernel gets no error finding, no analysis takes a command down, and the
estimate never says "does not fit" where libtpu fits the kernel.

One row of ROUNDS per round; what is particular to a round's kernels (its VMEM truth, the defects
it found) stays in the round's own file, named in its row."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from conftest import HeldOut, assert_entry_clean, errors, render, shared_report
from inspector.base.chips import get_chip
from inspector.compilation.target import load_target
from inspector.results.view_table import SHOW_VIEWS as VIEWS
from inspector.verbs.checking import run_check

CHECK_CHIPS = ("tpu-v5e", "tpu-v6e", "tpu-7x")


@dataclass(frozen=True)
class Round:
    folder: str
    files: int  # what assert_vendored holds the folder to
    entries: int
    source: str = "https://github.com/"
    licences: dict[str, str] = field(default_factory=dict)  # file name -> "MIT"/"BSD" where not Apache
    tpu_of: dict[str, str] = field(default_factory=dict)  # entry -> the one TPU of its views, estimate and compile
    lowering_errors: dict[str, tuple[str, str]] = field(default_factory=dict)  # entry -> (code, word) check must say
    estimate_fits: bool = True  # the estimate is ok and says "fits" on every chip (else: only no error finding)
    compile_slow: bool = True  # libtpu's compile is in the slow tier
    within_estimate: bool = False  # libtpu's VMEM is at most 1.5 times the estimate's on that chip
    diff: bool = False  # diff in interpret mode runs on every entry
    not_interpretable: dict[str, str] = field(default_factory=dict)  # entry -> a word of its interpret-unsupported
    races: frozenset[str] = frozenset()  # entries with a real DMA race that diff confirms
    export: str | None = None  # the entry `export` writes a graph and a report for


ROUNDS = (
    # test_corpus_model_kernels.py (issue 28's third round): sglang-jax, MaxText, MaxDiffusion,
    # RecurrentGemma. The SparseCore kernel needs a chip with 16-lane SparseCores (v5e has none; on v6e's
    # 8 lanes its reduce group of 8 leaves no output rows). The ring all-gather runs over the devices of
    # a slice (INSPECT's mesh puts them all on one axis): on one chip Mosaic refuses its collective_id,
    # as it should, since no barrier is used. MaxText's top-k gating calls lax.top_k in the kernel (with
    # is_stable=False, newer jax), which has no Mosaic rule in jax 0.10.2: check must say so. The
    # interpreter cannot run a vmapped pallas_call with dimension_semantics, nor a SparseCore kernel.
    Round("heldout3", files=12, entries=13, tpu_of={"gather_reduce": "tpu-7x", "ring_gather": "tpu-v5e:2x2"},
          lowering_errors={"fused_topk_gating": ("mosaic-unimplemented", "top_k")}, estimate_fits=False,
          diff=True, not_interpretable={"ragged_mha": "", "gather_reduce": ""}),
    # test_corpus_levanter_pallasbench.py: Levanter and PallasBench
    Round("heldout4", files=4, entries=4, compile_slow=False, within_estimate=True, diff=True,
          export="pallas_qk_softmax"),
    # test_pallas_nested_pipelines.py: tpu-inference's nested pipelines. GDN decode's state writeback is
    # still in flight when the next prefetch into its buffer starts: diff must say so, confirmed by
    # running the DMAs both ways. jax 0.10.2's interpreter cannot load through a reshaped ref
    # (acc_ref.reshape(-1, 128)).
    Round("heldout5", files=4, entries=7, source="https://github.com/vllm-project/tpu-inference/blob/",
          diff=True, not_interpretable={"proj_and_save_state_rows": "Reshape"}, races=frozenset({"gdn_decode"})),
    # test_vmem_polymul_and_gla.py; jax 0.10.2's interpreter cannot DMA through a reshaped ref
    Round("heldout6", files=4, entries=5, diff=True, not_interpretable={"fused_recurrent_gla_fwd": "reshaped ref"},
          export="chunk_gla_fwd_o"),
    Round("heldout7", files=4, entries=4),  # test_vmem_serving_kernels.py
    Round("heldout8", files=4, entries=4,  # test_vmem_norm_softmax_flash.py
          licences={"pallasflash_flash_attention.py": "MIT", "pallasflash_fused_rope.py": "MIT"}),
    Round("heldout9", files=4, entries=4),  # test_vmem_linear_attention_decoding.py
    Round("heldout10", files=5, entries=5),  # test_vmem_straight_line_matmuls.py
    Round("heldout11", files=3, entries=6,  # test_vmem_rolled_loops.py
          licences={"pallas_forge_glu.py": "MIT", "gdn2_fwd.py": "MIT"}),
)
HELD = {r.folder: HeldOut(r.folder) for r in ROUNDS}
ROUND_OF = {spec: r for r in ROUNDS for spec in HELD[r.folder].entries}


def entries(where=lambda r: True, slow=lambda r: False) -> list:
    """Each entry of the rounds ``where`` keeps, id'd by its round and name, in the slow tier
    where ``slow`` says so for its round."""
    return [pytest.param(spec, id=f"{r.folder}.{spec.rsplit(':', 1)[1]}", marks=[pytest.mark.slow] if slow(r) else [])
            for r in ROUNDS if where(r) for spec in HELD[r.folder].entries]


def entry(spec: str) -> tuple[Round, str]:
    return ROUND_OF[spec], spec.rsplit(":", 1)[1]


def tpu_of(spec: str) -> str:
    held, name = entry(spec)
    return held.tpu_of.get(name, "tpu-v5e")


def check_chips(spec: str) -> list[str]:
    held, name = entry(spec)
    return [held.tpu_of[name]] if name in held.tpu_of else list(CHECK_CHIPS)


_ESTIMATES: dict = {}


def estimate(spec: str):
    """`check --estimate-only` on the entry's chips, once a process: its two tests read it."""
    if spec not in _ESTIMATES:
        _ESTIMATES[spec] = run_check(load_target(spec), [get_chip(c) for c in check_chips(spec)], estimate_only=True)
    return _ESTIMATES[spec]


@pytest.mark.parametrize("held", [pytest.param(r, id=r.folder) for r in ROUNDS])
def test_corpus_is_what_the_notes_say(held):
    """So many files and entries, each file with its licence and its source at a commit."""
    HELD[held.folder].assert_vendored(files=held.files, entries=held.entries, source=held.source,
                                      licences=held.licences)


@pytest.mark.parametrize("spec", entries())
def test_every_view_on_cpu(spec):
    assert_entry_clean(spec, "cpu", VIEWS)


@pytest.mark.libtpu
@pytest.mark.parametrize("spec", entries())
def test_every_view_on_one_tpu(spec):
    held, name = entry(spec)
    if name in held.lowering_errors:
        r = shared_report(spec, tpu_of(spec))
        code, word = held.lowering_errors[name]
        assert [f for f in r.findings if f.severity == "error" and f.code == code and word in f.message], r.findings
        for view in VIEWS:
            assert render(r, view).strip()
        return
    assert_entry_clean(spec, tpu_of(spec), VIEWS)


@pytest.mark.libtpu
@pytest.mark.parametrize("spec", entries())
def test_the_estimate_finds_no_error(spec):
    result = estimate(spec)
    assert errors(result.findings) == []
    if entry(spec)[0].estimate_fits:
        assert result.ok and [row.fits for row in result.targets] == [True] * len(check_chips(spec))


@pytest.mark.libtpu
@pytest.mark.parametrize("spec", entries(slow=lambda r: r.compile_slow))
def test_check_agrees_with_libtpu(spec):
    """libtpu's compile on the entry's chip: no error finding, it fits the entry at INSPECT's shape,
    and the estimate never says "does not fit" there (an undecided estimate is allowed)."""
    held, name = entry(spec)
    real = run_check(load_target(spec), [get_chip(tpu_of(spec))])
    row = real.targets[0]
    if name in held.lowering_errors:
        code, word = held.lowering_errors[name]
        assert row.compiler_fits is False and [f for f in real.findings if f.code == code and word in f.message]
        return
    assert errors(real.findings) == [] and real.ok
    assert row.compiler_fits is True, row.compiler_message
    guess = next(r for r in estimate(spec).targets if r.chip == row.chip)
    assert guess.fits is not False, (guess.vmem_bytes, row.compiler_vmem_bytes)
    if held.within_estimate:
        assert 0 < row.compiler_vmem_bytes <= guess.vmem_bytes * 1.5


@pytest.mark.slow
@pytest.mark.parametrize("spec", entries(where=lambda r: r.diff))
def test_diff_in_interpret_mode(spec):
    from inspector.run import run_diff

    held, name = entry(spec)
    result = run_diff(load_target(spec), runs=0)
    if name in held.races:
        [race] = [f for f in result.findings if f.code == "dma-hazard"]
        assert race.severity == "error" and "Confirmed" in race.message and "eager DMAs: matches" in race.message
        assert "_start_store" in race.message and "_prefetch" in race.message
        assert not result.ok
        return
    assert not errors(result.findings)
    if name in held.not_interpretable:
        word = held.not_interpretable[name]
        assert [f for f in result.findings if f.code == "interpret-unsupported" and word in f.message]
    else:
        assert result.ok and result.outputs


@pytest.mark.parametrize("spec", [pytest.param(HELD[r.folder].names[r.export], id=f"{r.folder}.{r.export}")
                                  for r in ROUNDS if r.export])
def test_export_writes_the_graph_and_the_report(cli, tmp_path, spec):
    code, out, err = cli("export", spec, "--svg", str(tmp_path / "g.svg"), "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    assert (tmp_path / "g.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert json.loads((tmp_path / "r.json").read_text())["pallas"]
