"""The Bundles tab: each kernel's VLIW bundles (libtpu's, T computes them): the summary of every
kernel, the selected kernel's units and source lines, and its bundle listing, one line a bundle
with the source lines of its instructions. The listing is searchable (/, n, N) and linked: ``l``
on a kernel line of another tab lands on that line's first bundle here, ``l`` on a bundle goes
back to its source line (navigation.py). ``[`` and ``]`` switch kernels."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from ...base.units import fmt_count

from ..bundles import kernel_detail, render_bundles, summary_table
from ..printer import RenderOptions
from .stage_text import StageText

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...libtpu import KernelBundles, TimeEstimate
    from ...results.report import Report

SOURCE_WIDTH = 44  # the listing's source column, at most


def listing_line(index: int, depth: int, sources: list[str], ops: str, width: int,
                 spill_stores: int = 0, spill_fills: int = 0) -> str:
    """One bundle as the listing shows it: its index, its loop depth ('>' per level), the source
    lines of its instructions, its opcodes, and its spill stores and fills."""
    where = ", ".join(sources) or "-"
    spills = f"  [spill {spill_stores} st, {spill_fills} fill]" if spill_stores or spill_fills else ""
    return f"#{index:<6} {'>' * depth:<3} {where:<{width}}  {ops}{spills}"


class BundleListing(StageText):
    """One kernel's bundles, a line each (the TextArea draws only what is on screen: a kernel
    keeps up to 20,000). Each line's sources come from the data, not from reading the text."""

    def __init__(self) -> None:
        super().__init__("bundles")
        self.show_line_numbers = False  # each line starts with its bundle's own index
        self.sources: list[list[str]] = []
        self._by_source: dict[str, list[int]] = {}  # the status line asks at every cursor move

    def show_kernel(self, kb: KernelBundles | None) -> None:
        rows = kb.listing if kb else []
        self.sources = [r.sources for r in rows]
        self._by_source = {}
        for row, sources in enumerate(self.sources):
            for source in sources:
                self._by_source.setdefault(source, []).append(row)
        width = min(SOURCE_WIDTH, max((len(", ".join(r.sources)) for r in rows), default=1))
        lines = [listing_line(r.index, r.depth, r.sources, r.ops, width, r.spill_stores, r.spill_fills) for r in rows]
        if kb is not None and kb.listing_truncated:
            lines.append(f"… the first {len(rows):,} of {kb.bundles:,} bundles (the counts above use them all)")
        self.show_text("\n".join(lines))

    def source_of(self, row: int) -> str | None:
        """The first source line of the bundle on ``row`` (a bundle may hold instructions of several)."""
        return self.sources[row][0] if 0 <= row < len(self.sources) and self.sources[row] else None

    def rows_with_source(self, source: str) -> list[int]:
        return self._by_source.get(source, [])

    def matches(self, needle: str) -> list[tuple[int, int]]:
        """As StageText's, but a needle that ends in a digit (a source line, a bundle number) does
        not match inside a longer number: kernels/matmul.py:2 is not :25."""
        found = super().matches(needle)
        if needle[-1:].isdigit():
            lines = self.document.lines
            found = [(r, c) for r, c in found if not lines[r][c + len(needle):c + len(needle) + 1].isdigit()]
            self._matches = (needle, found)
        return found


class BundlesTab(Vertical):
    FOCUS = "#text-bundles"
    BINDINGS = [
        Binding("left_square_bracket", "kernel(-1)", "kernel", show=False),
        Binding("right_square_bracket", "kernel(1)", "kernel"),
    ]
    DEFAULT_CSS = """
    BundlesTab { height: 1fr; }
    #bundles-head { height: auto; padding: 0 1; background: $boost; }
    #bundles-summary { height: auto; max-height: 45%; }
    #bundles-body { padding: 0 1; }
    BundleListing { height: 1fr; border-top: solid $primary; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.estimate: TimeEstimate | None = None
        self.kernel = 0
        self._counts: dict[str, int] | None = None  # source line -> bundles from it in every kernel

    def compose(self):
        yield Static("", id="bundles-head")
        with VerticalScroll(id="bundles-summary"):
            yield Static("", id="bundles-body")
        yield BundleListing()

    @property
    def listing(self) -> BundleListing:
        return self.query_one(BundleListing)

    @property
    def kernels(self) -> list[KernelBundles]:
        return self.estimate.bundles if self.estimate else []

    def reset(self, message: str) -> None:
        self._message(Text(message))

    def show(self, report: Report) -> None:
        if report.chip.is_tpu and report.time is not None and report.time.bundles:
            self.show_estimate(report.time)
            return
        self._message(render_bundles(report, "bundles", RenderOptions(top=0, colour=True, interactive=True)))

    def progress(self, text: str) -> None:
        """While T's compile runs: what runs and for how long (the loading ticker); it said "press T"."""
        self.query_one("#bundles-body", Static).update(Text(text, style="yellow"))

    def _message(self, message) -> None:
        self.estimate, self.kernel, self._counts = None, 0, None
        self.query_one("#bundles-head", Static).update("")
        self.query_one("#bundles-body", Static).update(message)
        self.listing.show_kernel(None)
        self.listing.display = False
        self.app.refresh_bindings()  # the footer's l, n and N come and go with the listing

    def show_estimate(self, estimate: TimeEstimate) -> None:
        self.estimate, self.kernel, self._counts = estimate, 0, None
        self.listing.display = True
        self._draw()
        self.app.refresh_bindings()

    def action_kernel(self, delta: int) -> None:
        if self.kernels:
            self.kernel = (self.kernel + delta) % len(self.kernels)
            self._draw()

    def _draw(self) -> None:
        assert self.estimate is not None
        kb = self.kernels[self.kernel]
        per_step = f", {fmt_count(kb.bundles_per_step)} per grid step" if kb.bundles_per_step else ""
        self.query_one("#bundles-head", Static).update(Text.assemble(
            (kb.kernel, "bold"), f" ({self.kernel + 1} of {len(self.kernels)}; [ and ] switch): {fmt_count(kb.bundles)} "
            f"bundles{per_step}, bound: {kb.bound or '-'}, spills {kb.spill_stores} st / {kb.spill_fills} fill",
            ("  (/ searches the listing; l: a bundle's source line)", "dim")))
        self.query_one("#bundles-body", Static).update(Group(summary_table(self.estimate), Text(""),
                                                             kernel_detail(kb, listing=0)))
        self.listing.show_kernel(kb)

    def bundles_from(self, source: str) -> int:
        """Bundles from ``source`` in every kernel's listing (counted once per estimate)."""
        if self._counts is None:
            self._counts = {}
            for k in self.kernels:
                for r in k.listing:
                    for where in r.sources:
                        self._counts[where] = self._counts.get(where, 0) + 1
        return self._counts.get(source, 0)

    def go_to_source(self, source: str) -> str | None:
        """Show the first bundle from ``source`` (this kernel's, else the first kernel's that has
        one); says where it went, or None when no bundle comes from it."""
        order = [self.kernel] + [i for i in range(len(self.kernels)) if i != self.kernel]
        for i in order:
            listing = self.kernels[i].listing
            rows = [row for row, r in enumerate(listing) if source in r.sources]
            if rows:
                if i != self.kernel:
                    self.kernel = i
                    self._draw()
                self.listing.go_to_row(rows[0])
                return (f"{self.kernels[i].kernel} bundle #{listing[rows[0]].index}, the first of {len(rows):,} "
                        f"bundles from {source}")
        return None
