"""Mosaic's passes: the dumps read into passes, layouts and relayouts per source line, a pass's diff.

Offline: two real dump folders of libtpu 0.0.42.1 (tests/data/mosaic_dumps: the fixed
samples/mosaic_errors.py:mask_column on v5e, and the unfixed one, which fails in
infer-vector-layout), with the checkout's path made relative. On a TPU target: the flash
attention sample, compiled in a fresh process with the dump flags.
"""
import glob
import io
import json
import os
import re
import tempfile

import pytest

from conftest import DATA, lines_of_function
from inspector.hlo.passes import UnknownPass, parse_range
from inspector.mosaic.dumps import count_ops, diff_passes, read_kernel_dumps

DUMPS = DATA / "mosaic_dumps"
FIXED, FAILED = DUMPS / "mask_column_fixed", DUMPS / "mask_column_failed"


def test_the_passes_of_a_kernel_in_order_with_their_ops():
    [k], notes = read_kernel_dumps(str(FIXED))
    assert notes == [] and k.notes == [] and k.kernel == "_mask_kernel"
    assert k.files == 18  # the lone post-deserialization dump (another compiler pass reading the module) left out
    names = [p.name for p in k.passes]
    assert names[0] == "original" and names[-1] == "finalize-llo"
    assert names.index("infer-vector-layout") < names.index("relayout-insertion") < names.index("apply-vector-layout")
    for p, prev in zip(k.passes[1:], k.passes):  # each pass: ops after it, and the change from the one before
        assert p.total == sum(p.ops.values()) and p.total_delta == p.total - prev.total
        assert all(p.ops.get(kind, 0) - prev.ops.get(kind, 0) == n for kind, n in p.delta.items())
    assert not k.step("infer-memref-space").changed  # its dump is the same text as the one before
    assert k.step("lower-to-llo").total > k.step("original").total and any(kind.startswith("llo.") for kind in
                                                                           k.step("lower-to-llo").ops)


def test_relayouts_are_counted_per_source_line():
    [k], _ = read_kernel_dumps(str(FIXED))
    inserted = next(FIXED.glob("*-post-relayout-insertion.txt")).read_text()
    assert k.relayout_count == len(re.findall(r"= tpu\.relayout ", inserted)) == 3
    assert k.step("relayout-insertion").delta == {"tpu.relayout": 3}
    assert sum(r.count for r in k.relayouts) == 3
    # the mask line of the fixed kernel (as the fixture recorded it): an iota made lane-replicated, then compared
    mask_line = [r for r in k.relayouts if r.source == "samples/mosaic_errors.py:104"]
    assert {(r.shape, r.from_layout, r.to_layout) for r in mask_line} == {
        ("s32[32,128]", "32,{*,*},(8,128)", "32,{0,*},(8,128)"), ("pred[32,128]", "32,{0,*},(8,128)", "32,{0,0},(8,128)")}
    assert k.relayouts[0].as_json().keys() == {"source", "count", "from", "to", "shape"}


def test_the_layout_each_vector_value_got():
    [k], _ = read_kernel_dumps(str(FIXED))
    by_op = {v.op: v for v in k.layouts}
    assert by_op["tpu.iota"].layout == "32,{0,*},(8,128)" and by_op["tpu.iota"].shape == "s32[32,128]"
    assert by_op["arith.cmpi"].shape == "pred[32,128]"
    assert by_op["tpu.vector_load"].source == "samples/mosaic_errors.py:107"


def test_a_pass_that_failed_ends_the_list():
    [k], notes = read_kernel_dumps(str(FAILED))
    assert k.failed_pass == "infer-vector-layout" and k.passes[-1].failed
    assert k.layouts is None and k.relayouts is None and k.notes == [] and notes == []


def test_a_diff_of_one_pass_with_the_passes_view_grammar():
    [k], _ = read_kernel_dumps(str(FIXED))
    first, last = parse_range(k, "relayout", view="--view mosaic")
    assert k.passes[first].name == "relayout-insertion" and first == last
    diff = diff_passes(k, first, last)
    added = [l for l in diff.text.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert sum("tpu.relayout" in l for l in added) == 3 and diff.added == len(added)
    assert "loc(" not in diff.text  # locations left out of the diff
    whole = diff_passes(k, *parse_range(k, "original..infer-vector-layout"))
    assert whole.title.startswith("#0 original .. #")
    with pytest.raises(UnknownPass, match="--view mosaic"):
        parse_range(k, "99", view="--view mosaic")


def test_a_folder_this_reader_cannot_follow_gives_notes(tmp_path):
    (tmp_path / "something-else.txt").write_text("hello")
    kernels, notes = read_kernel_dumps(str(tmp_path))
    assert kernels == [] and any("not named" in n for n in notes) and any("no pass dumps" in n for n in notes)
    (tmp_path / "12-0001-mosaic-dump-anonymous-original.txt").write_text("not MLIR at all\n")
    [k], _ = read_kernel_dumps(str(tmp_path))
    assert any("no operations" in n for n in k.notes)


def test_op_census():
    text = ('  %0 = arith.constant 0 : i32\n  %1:2 = scf.for %a = %0 to %0 step %0\n'
            '  "tpu.vector_store"(%x) : () -> ()\n  tpu.vector_store %2[%c0], %3\n  return\n  } {in_layout = []}\n')
    assert count_ops(text) == {"arith.constant": 1, "scf.for": 1, "tpu.vector_store": 2, "func.return": 1}


def test_the_view_renders_passes_and_relayouts():
    from rich.console import Console

    from inspector.mosaic.passes import MosaicPasses
    from inspector.views.mosaic_passes import mosaic_passes_view

    [k], _ = read_kernel_dumps(str(FIXED))
    k.diff = diff_passes(k, *parse_range(k, "relayout"))
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(mosaic_passes_view(MosaicPasses(chip="tpu-v5e", kernels=[k], findings=[]), layouts=True))
    text = out.getvalue()
    assert "18 Mosaic passes" in text and "relayout-insertion" in text and "samples/mosaic_errors.py:104" in text
    assert "+3 tpu.relayout" in text and "32,{0,*},(8,128)" in text
    data = MosaicPasses(chip="tpu-v5e", kernels=[k], findings=[]).to_json()
    assert {"name", "changed", "ops", "delta"} <= set(data["mosaic_passes"][0])
    assert data["relayouts"] and set(data["relayouts"][0]) == {"source", "count", "from", "to", "shape"}
    json.dumps(data)


def test_not_a_tpu_is_a_finding():
    from inspector.base.chips import get_chip
    from inspector.mosaic.passes import capture_mosaic_passes
    from inspector.compilation.target import load_target

    result = capture_mosaic_passes(load_target("samples/mosaic_errors.py:mask_column"), get_chip("cpu"))
    assert result.kernels == [] and [f.code for f in result.findings] == ["mosaic-passes-unread"]


def test_the_child_gets_its_own_environment():
    from inspector.base.child_process import run_isolated

    assert run_isolated(os.getenv, "INSPECTOR_PROBE", env={"INSPECTOR_PROBE": "yes"}) == "yes"
    assert "INSPECTOR_PROBE" not in os.environ


# ----------------------------------------------------------------------------- on the real compiler

@pytest.fixture(scope="module")
def flash():
    from inspector.base.chips import get_chip
    from inspector.mosaic.passes import capture_mosaic_passes
    from inspector.compilation.target import load_target

    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "inspector-mosaic-*")))
    result = capture_mosaic_passes(load_target("samples/attention.py:flash"), get_chip("tpu-v5e"),
                                   select="relayout-insertion")
    after = set(glob.glob(os.path.join(tempfile.gettempdir(), "inspector-mosaic-*")))
    return result, after - before


@pytest.mark.libtpu
def test_flash_attention_passes_on_v5e(flash):
    result, left = flash
    assert left == set()  # the dump folder is gone
    assert result.findings == [] and result.compile_error is None
    [k] = result.kernels
    assert k.kernel == "flash_attention_fwd" and k.source.startswith("kernels/flash_attention.py:")
    names = [p.name for p in k.passes]
    for name in ("original", "infer-memref-layout", "infer-vector-layout", "relayout-insertion", "apply-vector-layout",
                 "lower-to-llo", "finalize-llo"):
        assert name in names
    inserted = k.step("relayout-insertion").delta.get("tpu.relayout", 0)
    assert inserted > 0 and k.relayout_count == inserted == sum(r.count for r in k.relayouts)
    added = [l for l in k.diff.text.splitlines() if l.startswith("+") and "tpu.relayout" in l]
    assert len(added) == inserted  # the diff the user sees shows the same relayouts
    body = lines_of_function("kernels/flash_attention.py", "_fwd_kernel")
    helpers = {int(r.source.rsplit(":", 1)[1]) for r in k.relayouts if r.source}
    assert helpers and all(r.source.startswith("kernels/flash_attention.py:") for r in k.relayouts if r.source)
    assert helpers & set(body)  # lines of the kernel body itself, not only its helpers
    assert k.layouts and all(v.layout for v in k.layouts)


@pytest.mark.libtpu
@pytest.mark.slow
def test_a_kernel_that_fails_shows_its_passes_up_to_the_failure():
    from inspector.base.chips import get_chip
    from inspector.mosaic.passes import capture_mosaic_passes
    from inspector.compilation.target import load_target

    result = capture_mosaic_passes(load_target("samples/mosaic_errors.py:mask_column"), get_chip("tpu-v5e"))
    [k] = result.kernels
    assert k.failed_pass == "infer-vector-layout" and "unsupported reshape" in result.compile_error
    assert [f.code for f in result.findings] == ["mosaic-shape-cast"]  # the failure, explained; nothing unread


@pytest.mark.libtpu
def test_show_view_mosaic_lists_the_passes_and_relayouts_per_line(cli_run):
    """`show --view mosaic` on a TPU target: the passes with their changes and the relayouts per
    source line, as text and as JSON (the MLIR text rides along in the JSON)."""
    out = cli_run("show", "samples/attention.py:flash", "--target", "tpu-v5e", "--view", "mosaic", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    names = [p["name"] for p in data["mosaic_passes"]]
    assert "relayout-insertion" in names and "apply-vector-layout" in names
    inserted = next(p for p in data["mosaic_passes"] if p["name"] == "relayout-insertion")
    assert inserted["changed"] and inserted["delta"].get("tpu.relayout", 0) == sum(r["count"] for r in data["relayouts"])
    assert any(r["source"] and r["source"].startswith("kernels/flash_attention.py:") for r in data["relayouts"])
    assert data["stages"]["mosaic"]
    text = cli_run("show", "samples/attention.py:flash", "--target", "tpu-v5e", "--view", "mosaic", "--pass", "relayout-insertion")
    assert text.returncode == 0, text.stderr
    assert "relayouts inserted by relayout-insertion" in text.stdout and "+ " in text.stdout  # the pass's diff


def test_pass_is_refused_outside_the_passes_and_mosaic_views(cli_run):
    out = cli_run("show", "samples/attention.py:naive", "--view", "fusions", "--pass", "1")
    assert out.returncode == 2 and "--pass is for the passes view" in out.stderr


def test_the_worker_keeps_one_compiles_dumps_for_the_next_passs_diff(monkeypatch):
    """The TUI's Enter on a Mosaic pass: the first diff compiles with the dumps (here: the recorded
    ones copied into the kept folder), the next ones of that module are read; the folder goes when
    forgotten."""
    import shutil
    import types

    from inspector.compilation import stages
    from inspector.base.chips import get_chip
    from inspector.base.errors import UsageError
    from inspector.mosaic import kept
    from inspector.mosaic.passes import MosaicPasses

    compiles = []

    def compile_with_dumps(target, chip, directory, **_):
        compiles.append(directory)
        for f in FIXED.iterdir():
            shutil.copy(f, directory)
        kernels, _ = read_kernel_dumps(directory)
        for k in kernels:
            k.release()  # as the child sends them
        return MosaicPasses(chip=chip.name, kernels=kernels, findings=[])

    monkeypatch.setattr(kept, "compile_with_dumps", compile_with_dumps)
    monkeypatch.setattr(kept, "Backend", lambda chip: None)  # the lowering below is faked too
    monkeypatch.setattr(stages, "capture", lambda *a, **k: types.SimpleNamespace(stages=types.SimpleNamespace(
        stablehlo="module @m {}")))
    chip = get_chip("tpu-v5e")
    try:
        diff = kept.kept_mosaic_diff(None, chip, "_mask_kernel", "relayout-insertion")
        assert diff.title == "#10 relayout-insertion" and sum("tpu.relayout" in l for l in diff.text.splitlines()
                                                               if l.startswith("+")) == 3
        assert kept.kept_mosaic_diff(None, chip, "_mask_kernel", "11").title == "#11 apply-vector-layout"
        assert len(compiles) == 1 and os.path.isdir(compiles[0])  # the second was read from the kept dumps
        with pytest.raises(UsageError, match="no Mosaic kernel 'other'"):
            kept.kept_mosaic_diff(None, chip, "other", "1")
        with pytest.raises(UsageError, match="--view mosaic"):
            kept.kept_mosaic_diff(None, chip, "_mask_kernel", "99")
    finally:
        kept._KEPT.forget()
    assert compiles and not os.path.exists(compiles[0])
