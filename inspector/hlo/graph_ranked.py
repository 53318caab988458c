"""A layout of our own for the kernel graph, used when Graphviz does not finish in its budget: it
cannot hang (one pass over the nodes, one over the edges). Nodes stand in one column in schedule
order, as `dot` ranks them; an edge between neighbours is a short arrow, a longer one an arc in a
lane to the right (the shortest arcs innermost, so arcs never overlap). The SVG has Graphviz's
structure (`g.node` with the node's id and a `title`, `g.edge`, `g.cluster`), so the HTML page
reads it as it reads dot's."""
from __future__ import annotations

import dataclasses
import textwrap
from html import escape

from .graph import RANK_COLOR, node_fill, label_bytes, node_label
from .graph_budget import Group
from .graph_model import Edge, KernelGraph, Node

FONT = 10
LINE = 13  # px per text line
CHAR = 6.0  # px per character of Helvetica 10 (about)
GAP = 26  # between rows: room for an arrow and its label
LANE = 14  # between arcs
PAD = 8
X0 = PAD  # the column's left edge


def _box(n: Node) -> tuple[list[str], float, float]:
    lines = node_label(n).split("\n")
    width = max(60.0, max(len(line) for line in lines) * CHAR + 2 * PAD)
    return lines, width, len(lines) * LINE + PAD


def _lanes(spans: list[tuple[int, int]]) -> list[int]:
    """A lane for each (top row, bottom row): the shortest spans first, each in the first lane
    free over its rows (a lane's rows are the bits of an int: one AND per lane tried)."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][1] - spans[i][0])
    busy: list[int] = []
    lane = [0] * len(spans)
    for i in order:
        lo, hi = spans[i]
        rows = ((1 << max(1, hi - lo)) - 1) << lo  # [lo, hi): arcs that only meet at a row share a lane
        for j, taken in enumerate(busy):
            if not taken & rows:
                busy[j] |= rows
                lane[i] = j
                break
        else:
            busy.append(rows)
            lane[i] = len(busy) - 1
    return lane


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Column:
    """Where each row's box stands: the parameters, then the schedule, then the program output."""

    rows: list[Node]
    boxes: list[tuple[list[str], float, float]]  # each row's label lines, width, height
    ys: list[float]  # the top of each row's box (the output's last)
    row_of: dict[str, int]  # node id -> row ("__output__" too)
    width: float  # of the column
    height: float  # below the last row
    out_row: int | None
    groups: dict[str, Group]

    def mid(self, i: int) -> tuple[float, float, float]:
        """(right edge x, top y, bottom y) of row i's box."""
        w, h = (self.boxes[i][1], self.boxes[i][2]) if i < len(self.rows) else (120.0, 2 * LINE)
        return X0 + (self.width + w) / 2, self.ys[i], self.ys[i] + h

    def cluster(self, n: Node) -> str | None:
        """The open group whose frame holds the node (not a kernel drawn away from its group)."""
        framed = n.kind == "kernel" and n.group in self.groups and self.groups[n.group].expanded and not n.away
        return n.group if framed else None


def _column(kg: KernelGraph, top: float) -> _Column:
    rows = [n for n in kg.nodes if n.kind == "parameter"] + [n for n in kg.nodes if n.kind != "parameter"]
    boxes = [_box(n) for n in rows]
    out_row = len(rows) if kg.output_node else None
    groups = {g.id: g for g in kg.groups}
    column = _Column(rows=rows, boxes=boxes, ys=[], row_of={n.id: i for i, n in enumerate(rows)},
                     width=max([w for _, w, _ in boxes] + [200.0]), height=0.0, out_row=out_row, groups=groups)
    y: float = top
    prev_group = None
    for n, (_, _, h) in zip(rows, boxes):
        cluster = column.cluster(n)
        if cluster and cluster != prev_group:
            y += LINE + PAD  # room for the cluster's label
        elif prev_group and cluster != prev_group:
            y += PAD
        prev_group = cluster
        column.ys.append(y)
        y += h + GAP
    if out_row is not None:
        column.ys.append(y)
        y += 2 * LINE + GAP
        column.row_of["__output__"] = out_row
    return dataclasses.replace(column, height=y)


def _routes(kg: KernelGraph, col: _Column) -> tuple[list[tuple[str, str, Edge | None]], dict[int, int]]:
    """The edges drawn (those into the program output with no Edge), and the lane of each that
    is not an arrow down to the next row, by its index."""
    row_of = col.row_of
    edges: list[tuple[str, str, Edge | None]] = [(e.src, e.dst, e) for e in kg.edges if e.src in row_of and e.dst in row_of]
    edges += [(src, "__output__", None) for src in kg.outputs if src in row_of and col.out_row is not None]
    spans = [(min(row_of[a], row_of[b]), max(row_of[a], row_of[b])) for a, b, _ in edges]
    long = [i for i, (a, b, _) in enumerate(edges)  # all but an arrow down to the next row
            if row_of[b] != row_of[a] + 1 or col.rows[row_of[a]].kind == "parameter"]
    return edges, dict(zip(long, _lanes([spans[i] for i in long])))


def ranked_svg(kg: KernelGraph, note: str = "") -> bytes:
    """The SVG of `kg` laid out in schedule order; `note` (what was simplified) under the title."""
    measure = (lambda n: n.time_s or 0) if kg.color == "roofline" else (lambda n: n.hbm_bytes)
    scale = max((measure(n) for n in kg.nodes if n.kind != "parameter"), default=0)
    said = textwrap.wrap(note, 120) if note else []
    col = _column(kg, top=2 * LINE + len(said) * LINE + PAD)
    edges, lane = _routes(kg, col)
    lanes = max(lane.values(), default=-1) + 1
    total_w = X0 + col.width + (lanes + 1) * LANE + 90
    y = col.height
    biggest = max((e.bytes for e in kg.edges), default=0)

    parts = [f'<svg width="{total_w:.0f}pt" height="{y + PAD:.0f}pt" viewBox="0.00 0.00 {total_w:.2f} {y + PAD:.2f}" '
             'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">',
             f'<g id="graph0" class="graph"><title>{escape(kg.title)}</title>',
             f'<rect x="0" y="0" width="{total_w:.0f}" height="{y + PAD:.0f}" fill="white"/>',
             f'<text x="{PAD}" y="{LINE + 4}" font-family="Helvetica,sans-Serif" font-size="16">{escape(kg.title)}</text>']
    for i, line in enumerate(said):
        parts.append(f'<text x="{PAD}" y="{(2 + i) * LINE + 6}" font-family="Helvetica,sans-Serif" font-size="{FONT}" '
                     f'fill="#a33">{escape(line)}</text>')
    parts += _clusters_svg(col)
    parts += [_edge_svg(col, a, b, e, lane.get(k), biggest) for k, (a, b, e) in enumerate(edges)]
    parts += [_node_svg(col, i, kg.color, scale) for i in range(len(col.rows))]
    if col.out_row is not None:
        yo, width = col.ys[col.out_row], col.width
        parts.append(f'<g id="__output__" class="node"><title>__output__</title><rect x="{X0 + width / 2 - 60:.1f}" y="{yo:.1f}" '
                     f'width="120" height="{2 * LINE}" fill="#c8e6c9" stroke="#333333" stroke-width="2"/>'
                     f'<text text-anchor="middle" x="{X0 + width / 2:.1f}" y="{yo + 1.4 * LINE:.1f}" '
                     f'font-family="Helvetica,sans-Serif" font-size="{FONT}">program output</text></g>')
    parts.append("</g></svg>\n")
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + "\n".join(parts)).encode()


def _clusters_svg(col: _Column) -> list[str]:
    """An open group's rows, framed."""
    spans_of: dict[str, list[int]] = {}
    for i, n in enumerate(col.rows):
        if (gid := col.cluster(n)) is not None:
            spans_of.setdefault(gid, []).append(i)
    parts = []
    for gid, idx in spans_of.items():
        y_top, y_bot = col.ys[idx[0]] - LINE - PAD / 2, col.ys[idx[-1]] + col.boxes[idx[-1]][2] + PAD / 2
        parts.append(f'<g id="{escape(gid)}" class="cluster"><title>cluster_{escape(gid)}</title>'
                     f'<rect x="{X0 - PAD / 2}" y="{y_top:.1f}" width="{col.width + PAD:.1f}" height="{y_bot - y_top:.1f}" rx="6" '
                     f'fill="none" stroke="#999999"/><text x="{X0}" y="{y_top + LINE - 2:.1f}" font-family="Helvetica,sans-Serif" '
                     f'font-size="{FONT}">{escape(col.groups[gid].label)}</text></g>')
    return parts


def _edge_svg(col: _Column, a: str, b: str, e: Edge | None, lane: int | None, biggest: int) -> str:
    """An arrow down to the next row, or (with a lane) an arc to the right of the column."""
    rows, boxes, ys, width = col.rows, col.boxes, col.ys, col.width
    ra, rb = col.row_of[a], col.row_of[b]
    xa, _, ya_bot = col.mid(ra)
    xb, yb_top, _ = col.mid(rb)
    label = "" if e is None else (f"{e.shape} {label_bytes(e.bytes)}" if e.tensors == 1 else f"{e.tensors} tensors {label_bytes(e.bytes)}")
    stroke = 1.0 if e is None or not e.hbm or biggest <= 0 else 1 + 4 * (e.bytes / biggest) ** 0.5
    dash = "" if e is None or e.hbm else ' stroke-dasharray="5,2"'
    if lane is not None:
        x = X0 + width + (lane + 1) * LANE
        y1, y2 = ys[ra] + 0.65 * boxes[ra][2] if ra < len(rows) else ya_bot, yb_top + 0.35 * (boxes[rb][2] if rb < len(rows) else 2 * LINE)
        d = f"M{xa:.1f},{y1:.1f} H{x:.1f} V{y2:.1f} H{xb + 7:.1f}"
        head = f"{xb + 7:.1f},{y2 - 4:.1f} {xb:.1f},{y2:.1f} {xb + 7:.1f},{y2 + 4:.1f}"
        tx, ty = x + 3, (y1 + y2) / 2
    else:
        xm = X0 + width / 2
        d = f"M{xm:.1f},{ya_bot:.1f} V{yb_top - 7:.1f}"
        head = f"{xm - 4:.1f},{yb_top - 7:.1f} {xm:.1f},{yb_top:.1f} {xm + 4:.1f},{yb_top - 7:.1f}"
        tx, ty = xm + 6, (ya_bot + yb_top) / 2 + 3
    return (f'<g class="edge"><title>{escape(a)}&#45;&gt;{escape(b)}</title>'
            f'<path fill="none" stroke="#555555" stroke-width="{stroke:.1f}"{dash} d="{d}"/>'
            f'<polygon fill="#555555" stroke="#555555" points="{head}"/>'
            + (f'<text x="{tx:.1f}" y="{ty:.1f}" font-family="Helvetica,sans-Serif" font-size="8">{escape(label)}</text>'
               if label else "") + "</g>")


def _node_svg(col: _Column, i: int, color: str, scale: float) -> str:
    n, (lines, w, h), y, width = col.rows[i], col.boxes[i], col.ys[i], col.width
    fill, font = node_fill(n, color, scale)
    stroke, pen = (RANK_COLOR, 4) if n.ranks else ("#333333", 1)
    x = X0 + (width - w) / 2
    shape = (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{0 if n.kind != "kernel" else 5}" '
             f'fill="{fill}" stroke="{stroke}" stroke-width="{pen}"/>')
    if n.kind == "group":  # box3d, as dot draws a collapsed group
        shape = (f'<rect x="{x + 4:.1f}" y="{y - 4:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" stroke="#333333"/>'
                 + shape)
    text = "".join(f'<text text-anchor="middle" x="{X0 + width / 2:.1f}" y="{y + PAD / 2 + (j + 0.8) * LINE:.1f}" '
                   f'font-family="Helvetica,sans-Serif" font-size="{FONT}" fill="{font}">{escape(line)}</text>'
                   for j, line in enumerate(lines))
    return f'<g id="{escape(n.id)}" class="node"><title>{escape(n.id)}</title>{shape}{text}</g>'
