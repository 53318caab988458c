"""A stage's text (jaxpr, StableHLO, HLO, Mosaic): read-only, virtualised (TextArea renders only
the visible lines, so a 90,000-line HLO scrolls), searchable, and each line's source location."""
from __future__ import annotations

import bisect
import re

from textual import events
from textual.document._wrapped_document import WrappedDocument
from textual.widgets import TextArea
from textual.widgets.text_area import Selection

from ..highlight import RULES
from ..printer import stage_text

_JAXPR_SOURCE = re.compile(r"#\s+(\S+?:\d+)(?::\d+)?\s")
_MLIR_SOURCE = re.compile(r"  // (\S+?:\d+)$")  # StableHLO's op lines (inspector/hlo/mlir_sources.py)
_HLO_FRAME = re.compile(r"stack_frame_id=(\d+)")

# Syntax colour for jaxpr, MLIR and HLO (no tree-sitter grammar knows HLO): the printer's rules,
# each role named as the TextArea theme names its styles.
_THEME_STYLE = {"name": "variable", "op": "function"}
_RULES = [(re.compile(pattern), _THEME_STYLE.get(role, role)) for role, pattern in RULES]


class _LineHighlights(dict):
    """Highlights computed per line when the line is first drawn: a 90,000-line HLO costs only
    what is on screen. Offsets are in UTF-8 bytes, as the TextArea expects."""

    def __init__(self, document):
        super().__init__()
        self.document = document

    def __bool__(self) -> bool:
        return True

    def __missing__(self, row: int) -> list:
        line = self.document.get_line(row) if row < self.document.line_count else ""
        to_bytes = (lambda i: i) if line.isascii() else (lambda i: len(line[:i].encode()))
        found = [(to_bytes(m.start()), to_bytes(m.end()), name) for rule, name in _RULES for m in rule.finditer(line)]
        self[row] = found
        return found


class _Wrapped(WrappedDocument):
    """TextArea asks the wrapped document's height (a sum over every line) for each line it
    draws: 36 lines of a 10,000-line HLO summed 360,000 numbers per frame. Kept once per wrap."""

    _height: int | None = None

    def wrap(self, width: int, tab_width: int | None = None) -> None:
        self._height = None
        super().wrap(width, tab_width)

    def wrap_range(self, *args, **kwargs) -> None:
        self._height = None
        super().wrap_range(*args, **kwargs)

    @property
    def height(self) -> int:
        if self._height is None:
            self._height = super().height
        return self._height


class StageText(TextArea):
    """One stage's text. ``frames`` maps HLO stack_frame_ids to file:line."""

    def __init__(self, stage: str, **kwargs):
        super().__init__("", read_only=True, soft_wrap=False, show_line_numbers=True, id=f"text-{stage}", **kwargs)
        self.stage = stage
        self.frames: dict[int, str] = {}
        self._rows_by_source: dict[str, list[int]] | None = None  # built on first use, per text
        self._matches: tuple[str, list[tuple[int, int]]] | None = None  # (needle, every match), per text

    def _build_highlight_map(self) -> None:  # Textual's hook (pinned textual 8): our rules, lazily
        self._line_cache.clear()
        self._highlights = _LineHighlights(self.document)

    def _set_document(self, text: str, language: str | None) -> None:  # Textual's hook (pinned textual 8)
        super()._set_document(text, language)
        self.wrapped_document.__class__ = _Wrapped  # the same object and wrapping, its height kept

    def _on_resize(self, event: events.Resize) -> None:  # type: ignore[override]  # a handler, run before TextArea's own (pinned textual 8)
        """TextArea re-wraps the whole document on every resize, and a tab switch hides and
        shows the widget: ~60 ms for a 10,000-line jaxpr, at every switch to its tab. Unwrapped
        (soft_wrap is off), a resize changes no line: only the size-dependent state is refreshed."""
        if self.soft_wrap or self.wrapped_document._width != self.wrap_width:
            return  # TextArea's handler runs next and re-wraps
        event.prevent_default()
        self._line_cache.clear()
        self._refresh_scrollbars()

    @classmethod
    def for_view(cls, view) -> StageText:
        return cls(view.name)

    def reset(self, message: str) -> None:
        self.show_text("")  # an empty text until the stage comes (the overview says what runs)

    def show(self, report) -> None:
        frames = report.fusions.frames if self.stage == "hlo" and report.fusions else {}
        self.show_text(stage_text(report, self.stage) or "", frames)

    def show_text(self, text: str, frames: dict[int, str] | None = None) -> None:
        self.load_text(text)
        self.frames = frames or {}
        self._rows_by_source = None
        self._matches = None

    def source_of(self, row: int) -> str | None:
        """The user's file:line behind a line of this stage, when the text says."""
        if row >= self.document.line_count:
            return None
        line = self.document.get_line(row)
        m = _JAXPR_SOURCE.search(line + " ") or _MLIR_SOURCE.search(line)
        if m:
            return m[1]
        m = _HLO_FRAME.search(line)
        return self.frames.get(int(m[1])) if m else None

    def rows_with_source(self, source: str) -> list[int]:
        """Rows whose line comes from ``source``; indexed once per text (the cursor asks on every move)."""
        if self._rows_by_source is None:
            index: dict[str, list[int]] = {}
            for row in range(self.document.line_count):
                where = self.source_of(row)
                if where:
                    index.setdefault(where, []).append(row)
            self._rows_by_source = index
        return self._rows_by_source.get(source, [])

    def matches(self, needle: str) -> list[tuple[int, int]]:
        """Every (row, column) where ``needle`` starts, in order; kept for the last needle."""
        if self._matches is None or self._matches[0] != needle:
            found = []
            if needle:
                for r, line in enumerate(self.document.lines):  # not .text: it joins every line first
                    at = line.find(needle)
                    while at >= 0:
                        found.append((r, at))
                        at = line.find(needle, at + 1)
            self._matches = (needle, found)
        return self._matches[1]

    def find(self, needle: str, forward: bool = True) -> tuple[int, int] | None:
        """Select the next (or previous) occurrence of ``needle`` after the cursor, wrapping
        around; returns (which match, 1-based; how many) or None when there is none."""
        found = self.matches(needle)
        if not found:
            return None
        start, end = sorted((self.selection.start, self.selection.end))
        if forward:
            i = bisect.bisect_left(found, tuple(end)) % len(found)
        else:
            i = (bisect.bisect_left(found, tuple(start)) - 1) % len(found)
        r, at = found[i]
        self.selection = Selection((r, at), (r, at + len(needle)))
        self.scroll_cursor_visible(center=True)
        return i + 1, len(found)

    def go_to_row(self, row: int) -> None:
        """Select the line, the cursor at its start: the view shows the line's beginning (the
        cursor at its end scrolled a long line out of sight, all but its source comment)."""
        self.selection = Selection((row, len(self.document.get_line(row))), (row, 0))
        self.scroll_cursor_visible(center=True)
