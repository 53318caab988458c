"""The terminal UI's Bundles and Mosaic passes tabs (Textual's pilot): the bundle listing searched
and linked to the kernel's source lines (l there and back), Mosaic's passes stepped through with
each pass's diff on Enter, and Enter on a Mosaic error landing on the failing op.

The fast tests feed the tabs recorded dumps (tests/data/libtpu, tests/data/mosaic_dumps) through a
report of the CPU compile of the same kernel, its chip set to the TPU the dumps are of; the TPU
tests compile for real (deviceless v5e)."""
import dataclasses
import threading

import pytest
from textual.widgets import DataTable, TabbedContent

from conftest import DATA, loaded, line_of
from inspector.base.chips import get_chip
from inspector.hlo.passes import parse_range
from inspector.libtpu import dumps
from inspector.libtpu.bundles import kernel_bundles
from inspector.libtpu.model import TimeEstimate
from inspector.mosaic.dumps import diff_passes, read_kernel_dumps
from inspector.mosaic.passes import MosaicPasses
from inspector.session import Session
from inspector.views.tui.app import InspectorApp
from inspector.views.tui.stage_text import StageText
from test_tui import plain, status

MATMUL = Session("samples/matmul.py:tiled", "cpu", args="bf16[256,256] bf16[256,256]")
SIZE = (120, 36)
DOT = f"kernels/matmul.py:{line_of('kernels/matmul.py', 'acc_ref[...] += jnp.dot')}"  # the kernel's matmul line


def recorded_bundles():
    """The recorded excerpt of the v5e matmul kernel's bundles (its paths as the jaxpr gives them),
    and a hand-written kernel that spills (tests/test_libtpu_dumps.py)."""
    from test_libtpu_dumps import SPILLING, SPILLING_USE

    relative = lambda path: path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1]  # noqa: E731
    text = (DATA / "libtpu" / "matmul_v5e-final_bundles.txt").read_text()
    use = (DATA / "libtpu" / "matmul_v5e-final_hlo-static-per-bundle-utilization.txt").read_text()
    matmul = kernel_bundles("matmul.1", "custom-call:pallas", dumps.read_bundles(text, relative=relative),
                            dumps.read_utilization(use), pallas=True, steps=8, cycles_per_step=1000.0)
    spills = kernel_bundles("k.1", "custom-call:pallas", dumps.read_bundles(SPILLING, relative=lambda p: p.lstrip("/")),
                            dumps.read_utilization(SPILLING_USE), pallas=True, steps=4, cycles_per_step=None)
    return TimeEstimate(chip="tpu-v5e", clock_hz=1.5e9, kernels=[], totals={}, method="libtpu", budget={}, jobs=[], bundles=[matmul, spills])


async def _with(app, pilot, **fields):
    """Show the app's report with ``fields`` replaced, on v5e (the dumps' chip)."""
    report = dataclasses.replace(app.report, chip=get_chip("tpu-v5e"), **fields)
    app._show(app._generation, report)
    await pilot.pause()


async def _bundles_tab(app, pilot):
    """v: the listing searched, kernels switched, l from the jaxpr's kernel line to its bundles
    and back."""
    estimate = recorded_bundles()
    matmul, spills = estimate.bundles
    await _with(app, pilot)
    assert "press T" in plain(app, "#bundles-body")
    await _with(app, pilot, time=estimate)
    await pilot.press("v")
    assert app.query_one(TabbedContent).active == "bundles"
    assert "matmul.1 (1 of 2" in plain(app, "#bundles-head") and "per source line" in plain(app, "#bundles-body")
    listing = app.query_one("#text-bundles", StageText)
    assert listing.has_focus and listing.document.line_count == len(matmul.listing)
    # each bundle shows its source lines
    with_dot = [i for i, r in enumerate(matmul.listing) if DOT in r.sources]
    assert len(with_dot) > 1 and all(DOT in listing.document.get_line(i) for i in with_dot)
    # / searches the listing: the match count is the bundles from that line
    await pilot.press("slash", *DOT, "enter")
    assert f"match 1 of {len(with_dot)}" in status(app) and listing.cursor_location[0] == with_dot[0]
    await pilot.press("n")
    assert f"match 2 of {len(with_dot)}" in status(app) and listing.cursor_location[0] == with_dot[1]
    await pilot.press("N", "N")
    assert f"match {len(with_dot)} of {len(with_dot)}" in status(app)
    await pilot.press("slash", *DOT[:-1], "enter")  # kernels/matmul.py:2 is no line of the kernel
    assert "not found" in status(app)
    # [ and ]: the other kernel, its spills marked on the bundles that spill
    await pilot.press("right_square_bracket")
    assert "k.1 (2 of 2" in plain(app, "#bundles-head") and "spills 2 st / 2 fill" in plain(app, "#bundles-head")
    assert sum("[spill" in line for line in listing.document.lines) == 4
    # l from the kernel's line in the jaxpr: its first bundle (the kernel that has it), then back
    await pilot.press("2")
    jaxpr = app.query_one("#text-jaxpr", StageText)
    rows = jaxpr.rows_with_source(DOT)
    assert rows, "the jaxpr has the kernel body's lines"
    jaxpr.go_to_row(rows[0])
    await pilot.pause()
    assert f"bundles {len(with_dot)} (l jumps there)" in status(app)
    await pilot.press("l")
    await pilot.pause()
    assert app.query_one(TabbedContent).active == "bundles" and "matmul.1 (1 of 2" in plain(app, "#bundles-head")
    assert listing.cursor_location[0] == with_dot[0]
    assert f"the first of {len(with_dot)} bundles from {DOT}" in status(app)
    await pilot.press("n")  # the line's next bundle
    assert listing.cursor_location[0] == with_dot[1]
    await pilot.press("l")
    await pilot.pause()
    assert app.query_one(TabbedContent).active == "jaxpr"
    assert jaxpr.source_of(jaxpr.cursor_location[0]) == DOT
    # a bundle with no source line says so
    await pilot.press("v")
    no_source = next(i for i, r in enumerate(matmul.listing) if not r.sources)
    listing.go_to_row(no_source)
    await pilot.press("l")
    assert "no source location" in status(app)



FIXED = DATA / "mosaic_dumps" / "mask_column_fixed"
FAILED = DATA / "mosaic_dumps" / "mask_column_failed"


async def _mosaic_passes_tab(app, pilot):
    """m: the passes listed, Enter shows a pass's diff (the worker's answer made from the recorded
    dumps), ] the failed kernel, Esc drops a diff in flight."""
    [fixed], _ = read_kernel_dumps(str(FIXED))
    [failed], _ = read_kernel_dumps(str(FAILED))
    result = MosaicPasses(chip="tpu-v5e", kernels=[fixed, failed], findings=[])
    asked = []

    def worker(session, method, name, select, index):  # the worker's answer, from the recorded dumps
        asked.append((method, name, select, index))
        k = result.kernels[index]
        assert k.kernel == name
        return diff_passes(k, *parse_range(k, select, view="--view mosaic"))

    await _with(app, pilot, mosaic_passes=None)
    assert "press M" in plain(app, "#mosaic-passes-title")
    await _with(app, pilot, mosaic_passes=result)
    await pilot.press("m")
    table = app.query_one("#mosaic-passes-table", DataTable)
    assert table.has_focus and table.row_count == len(fixed.passes) == 18
    assert "_mask_kernel" in plain(app, "#mosaic-passes-title") and "kernel 1 of 2" in plain(app, "#mosaic-passes-title")
    assert "samples/mosaic_errors.py:104" in plain(app, "#mosaic-passes-detail")  # the relayouts per line
    app.remote.call = lambda session, method, *args, epoch=None: worker(session, method, *args)
    row = next(p.index for p in fixed.passes if p.name == "relayout-insertion")
    table.move_cursor(row=row)
    await pilot.press("enter")
    await loaded(pilot)
    diff = diff_passes(fixed, row, row)
    shown = plain(app, "#mosaic-passes-detail")
    assert asked == [("mosaic_pass_diff", "_mask_kernel", str(row), 0)]
    assert "#10 relayout-insertion" in shown and shown.count("tpu.relayout") >= 3
    assert f"+{diff.added} -{diff.removed} lines" in status(app)
    table.move_cursor(row=row + 1)  # the next pass: another diff
    await pilot.press("enter")
    await loaded(pilot)
    assert "apply-vector-layout" in plain(app, "#mosaic-passes-detail") and len(asked) == 2
    table.move_cursor(row=row)  # one seen before: no second call
    await pilot.press("enter")
    await loaded(pilot)
    assert len(asked) == 2 and "#10 relayout-insertion" in plain(app, "#mosaic-passes-detail")
    # ]: the kernel that failed in infer-vector-layout, its last pass marked
    await pilot.press("right_square_bracket")
    assert "kernel 2 of 2" in plain(app, "#mosaic-passes-title") and "failed in infer-vector-layout" in plain(
        app, "#mosaic-passes-title")
    assert table.row_count == len(failed.passes) and "FAILED" in str(table.get_row_at(table.row_count - 1)[2])
    # Esc drops a diff in flight; Enter asks again
    held = threading.Event()
    app.remote.call = lambda *a, **k: held.wait(30) and None
    table.move_cursor(row=1)
    await pilot.press("enter")
    assert "compiling with Mosaic's pass dumps" in plain(app, "#mosaic-passes-detail")
    await pilot.press("escape")
    held.set()
    await loaded(pilot)
    assert "cancelled" in plain(app, "#mosaic-passes-detail")


@pytest.mark.asyncio
async def test_bundles_and_mosaic_passes_tabs_on_recorded_dumps():
    """Both tabs on one app (one compile): fed the recorded dumps of the kernels they show."""
    app = InspectorApp(MATMUL)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("v")  # on the CPU: why there is nothing to show
        assert "no bundles on cpu" in plain(app, "#bundles-body")
        await pilot.press("m")
        assert "no Mosaic passes on cpu" in plain(app, "#mosaic-passes-title")
        await _bundles_tab(app, pilot)
        await _mosaic_passes_tab(app, pilot)


@pytest.mark.asyncio
@pytest.mark.libtpu
async def test_enter_on_a_mosaic_error_opens_the_mosaic_tab_at_the_failing_op():
    """The unaligned pl.ds read of samples/mosaic_errors.py fails in Mosaic (E2003) on v5e: Enter on
    the finding shows the Mosaic text's line of that read, from the kernel's source line. A kernel
    Pallas cannot lower (jnp.sort) has no Mosaic module: Enter shows the jaxpr's line instead."""
    read = f"samples/mosaic_errors.py:{line_of('samples/mosaic_errors.py', 'x_ref[pl.ds(start, 16)')}"
    sort = f"samples/mosaic_errors.py:{line_of('samples/mosaic_errors.py', 'jnp.sort(')}"

    for spec, code, tab, source in (("unaligned_rows", "mosaic-unproven-alignment", "mosaic", read),
                                    ("sort_rows", "mosaic-unimplemented", "jaxpr", sort)):
        app = InspectorApp(Session(f"samples/mosaic_errors.py:{spec}", "tpu-v5e"))
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot)
            findings = app.query_one("#findings", DataTable)
            codes = [str(findings.get_row_at(i)[1]) for i in range(findings.row_count)]
            findings.move_cursor(row=codes.index(code))
            await pilot.press("enter")
            await pilot.pause()
            assert app.query_one(TabbedContent).active == tab
            text = app.query_one(f"#text-{tab}", StageText)
            line = text.document.get_line(text.cursor_location[0])
            assert text.source_of(text.cursor_location[0]) == source and source in status(app), line
            if tab == "mosaic":
                assert "load" in line and "tpu.vector_load failed" in status(app)  # the read itself
            else:
                assert "failed to lower" in status(app)
                assert "the lowering failed" in app.query_one("#text-mosaic", StageText).text
            await pilot.press("b")
            assert app.query_one(TabbedContent).active == "overview"


@pytest.mark.asyncio
@pytest.mark.libtpu
@pytest.mark.slow
async def test_on_a_real_v5e_compile_l_goes_to_the_bundles_and_enter_diffs_a_mosaic_pass():
    """The matmul kernel compiled deviceless for v5e: T's bundles carry the kernel's source lines,
    l goes from the jaxpr's dot line to its bundles and back; M's passes, Enter on one: its diff,
    compiled once more by the worker, the next one read from the dumps it keeps."""
    app = InspectorApp(Session("samples/matmul.py:tiled", "tpu-v5e", args="bf16[256,512] bf16[512,256]"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("T")
        await loaded(pilot)
        [kb] = [b for b in app.report.time.bundles if b.kind.startswith("custom-call")]
        with_dot = [i for i, r in enumerate(kb.listing) if DOT in r.sources]
        assert with_dot and any(line.source == DOT and line.mxu_ops for line in kb.lines)
        await pilot.press("2")
        jaxpr = app.query_one("#text-jaxpr", StageText)
        jaxpr.go_to_row(jaxpr.rows_with_source(DOT)[0])
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        listing = app.query_one("#text-bundles", StageText)
        assert app.query_one(TabbedContent).active == "bundles" and listing.cursor_location[0] == with_dot[0]
        assert "vmatmul" in " ".join(kb.listing[i].ops for i in with_dot)
        await pilot.press("l")
        assert app.query_one(TabbedContent).active == "jaxpr" and jaxpr.source_of(jaxpr.cursor_location[0]) == DOT
        await pilot.press("M")
        await loaded(pilot)
        table = app.query_one("#mosaic-passes-table", DataTable)
        names = [p.name for p in app.report.mosaic_passes.kernels[0].passes]
        table.move_cursor(row=names.index("relayout-insertion"))
        await pilot.press("enter")
        await loaded(pilot)
        assert "relayout-insertion" in plain(app, "#mosaic-passes-detail") and "tpu.relayout" in plain(
            app, "#mosaic-passes-detail")
        table.move_cursor(row=names.index("apply-vector-layout"))
        await pilot.press("enter")
        await loaded(pilot)
        assert "apply-vector-layout" in plain(app, "#mosaic-passes-detail") and "lines)" in status(app)
