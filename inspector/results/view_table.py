"""The one table of views. Each row says what a view is called, where the terminal UI puts it
(key and tab title), what it needs computed, which JSON keys it fills, and which functions render
it. The CLI's `show --view`, ``Report.show``, the printer, the TUI's tabs and its help screen all
read this table: a new view is one row here plus its renderer.

Renderers are named as ``"module:function"`` inside ``inspector.views`` (and ``"module:Class"``
inside ``inspector.views.tui`` for a tab of its own) and loaded only by the front ends, so the
core never imports rich or textual (``inspector.display`` is the core's one door to them)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class Needs:
    """What a view needs from the capture (``report.make_report``'s switches)."""

    compile: bool = False  # the optimized HLO (a compile, or the cache)
    jaxpr_text: bool = False  # the jaxpr printed whole
    fusions: bool = False  # the kernels of the optimized HLO with HBM traffic and roofline
    pallas: bool = False  # every pallas_call: BlockSpecs, grid walk, budgets
    buffers: bool = False  # the compiler's buffer assignment
    collectives: bool = False  # the collectives in schedule order
    passes: bool = False  # a compile with XLA's pass dumps (never cached)
    mosaic_passes: bool = False  # a compile with Mosaic's pass dumps (TPU targets with Pallas kernels)
    time: bool = False  # libtpu's time estimate and VLIW bundles per kernel (compiles of their own; --time)

    def __or__(self, other: Needs) -> Needs:
        return Needs(**{f.name: getattr(self, f.name) or getattr(other, f.name) for f in dataclasses.fields(self)})


@dataclasses.dataclass(frozen=True, kw_only=True)
class View:
    name: str
    key: str  # the TUI's key for the tab
    title: str  # the TUI's tab title (after the key)
    needs: Needs
    json_keys: tuple[str, ...] = ()  # top-level keys of `show --json` beyond the always-there ones
    stage_text: str | None = None  # the stage text `show --json` includes for this view
    render: str | None = None  # "module:function" in inspector.views: (report, RenderOptions) -> renderable or str
    tab: str | None = None  # "module:Class" in inspector.views.tui; None: the rendered view in a scrolling pane
    shown: bool = True  # offered by `show --view` (False: a TUI tab fed by a job of its own, e.g. diff)
    opens: str | None = None  # the TUI action its key runs instead of switching to the tab (compare: pick the variant)
    waiting: str = "compiling…"  # what the TUI tab says until the report comes
    summary: str = ""  # one line for the help screen and `--help`


_COMPILED = Needs(compile=True)

VIEWS: tuple[View, ...] = (
    View(name="overview", key="1", title="Overview", needs=Needs(compile=True, fusions=True, pallas=True, collectives=True),
         json_keys=("kernels", "totals", "xla_cost", "fusion_analysis", "pallas", "memory", "collectives"),
         render="printer:render_overview", tab="overview_tab:OverviewTab",
         summary="the function, inputs, target, key figures and every finding"),
    View(name="jaxpr", key="2", title="Jaxpr", needs=Needs(jaxpr_text=True), stage_text="jaxpr", render="printer:render_stage_text",
         tab="stage_text:StageText", summary="the jaxpr, each equation with its source line"),
    View(name="stablehlo", key="3", title="StableHLO", needs=Needs(), stage_text="stablehlo", render="printer:render_stage_text",
         tab="stage_text:StageText", summary="the lowered StableHLO, each op with its source line"),
    View(name="hlo", key="4", title="HLO", needs=_COMPILED, stage_text="hlo", render="printer:render_stage_text", tab="stage_text:StageText",
         summary="the optimized HLO"),
    View(name="fusions", key="5", title="Fusions", needs=Needs(compile=True, fusions=True, pallas=True),
         json_keys=("kernels", "totals", "xla_cost", "fusion_analysis"), render="printer:render_fusions", tab="fusions_tab:FusionsTab",
         summary="every kernel with HBM traffic, flops and roofline; the materialized intermediates"),
    View(name="pallas", key="6", title="Pallas", needs=Needs(pallas=True), json_keys=("pallas", "gpu_kernels"), render="printer:render_pallas",
         tab="pallas_tab:PallasTab", waiting="compiling… (the Pallas analysis comes with the compile)",
         summary="every pallas_call: BlockSpecs, VMEM per chip, the grid walk"),
    View(name="diff", key="7", title="Diff", needs=Needs(), tab="diff_tab:DiffTab", shown=False,
         summary="the function against its reference (d runs it; `inspector diff`)"),
    View(name="mosaic", key="8", title="Mosaic", needs=Needs(mosaic_passes=True), json_keys=("mosaic_passes", "relayouts", "mosaic_kernels"),
         stage_text="mosaic", render="printer:render_mosaic", tab="stage_text:StageText",
         summary="the Mosaic MLIR of each Pallas kernel (show: Mosaic's passes, what each changed, the relayouts per line)"),
    View(name="memory", key="9", title="Memory", needs=Needs(compile=True, buffers=True), json_keys=("memory",), render="printer:render_memory",
         waiting="compiling… (the memory figures come with the compile)",
         summary="HBM per device against the chip's capacity; B: the largest buffers at the peak"),
    View(name="collectives", key="0", title="Collectives", needs=Needs(compile=True, collectives=True, pallas=True), json_keys=("collectives", "collective_totals"),
         render="printer:render_collectives", waiting="compiling… (the collectives come with the optimized HLO)",
         summary="every collective, bytes per device, ICI time"),
    View(name="passes", key="p", title="Passes", needs=Needs(compile=True, passes=True), json_keys=("passes", "pass_diff", "origins", "pass_log"),
         render="printer:render_passes", tab="passes_tab:PassesTab",
         summary="the compiler's pass pipeline; P compiles with pass dumps, Enter shows a step's diff"),
    View(name="mosaic-passes", key="m", title="Mosaic passes", needs=Needs(mosaic_passes=True), json_keys=("mosaic_passes", "relayouts", "mosaic_kernels"),
         render="printer:render_mosaic_passes", tab="mosaic_passes_tab:MosaicPassesTab", shown=False,
         waiting="press M to compile with Mosaic's pass dumps: each pass of each Pallas kernel, what it changed, the relayouts",
         summary="Mosaic's passes of each Pallas kernel (M compiles with its dumps, Enter shows a pass's diff; "
         "`show --view mosaic`)"),
    View(name="bundles", key="v", title="Bundles", needs=Needs(compile=True, fusions=True, pallas=True, time=True), json_keys=("bundles", "time_estimate"),
         render="bundles:render_bundles", tab="bundles_tab:BundlesTab",
         waiting="press T to estimate time with libtpu: each kernel's VLIW bundles, units, spills and source lines",
         summary="each kernel's VLIW bundles: units, what bounds it, spills, per source line, the listing "
         "(T; / searches it, l links a bundle and its source line)"),
    View(name="compare", key="c", title="Compare", needs=Needs(), tab="compare_tab:CompareTab", shown=False, opens="compare",
         summary="this variant against another chip or parameter set (`inspector compare`)"),
)

SORT_ORDERS = ("order", "bytes", "flops", "time")  # the fusions view's row orders
SHOW_VIEWS: tuple[str, ...] = tuple(v.name for v in VIEWS if v.shown)
STAGE_TEXTS: tuple[str, ...] = tuple(v.stage_text for v in VIEWS if v.stage_text)


# what a compile adds only when asked (a key in the terminal UI, a flag of show, a keyword of inspect):
# never part of a report for every view
ON_DEMAND = Needs(buffers=True, passes=True, mosaic_passes=True, time=True)


def everyday_needs() -> Needs:
    """What a report for every view computes before a key or a flag asks for more: each view's
    needs, less those ON_DEMAND (the terminal UI's first report, ``inspector.inspect``'s)."""
    found = Needs()
    for view in VIEWS:
        found = found | view.needs
    return Needs(**{f.name: getattr(found, f.name) and not getattr(ON_DEMAND, f.name) for f in dataclasses.fields(Needs)})


def get_view(name: str) -> View:
    """The row named ``name``; KeyError when there is none (the callers check names first)."""
    return _BY_NAME[name]


_BY_NAME = {v.name: v for v in VIEWS}
