"""A layout of our own for the kernel graph, used when Graphviz does not finish in its budget: it
cannot hang (one pass over the nodes, one over the edges). Nodes stand in one column in schedule
order, as `dot` ranks them; an edge between neighbours is a short arrow, a longer one an arc in a
lane to the right (the shortest arcs innermost, so arcs never overlap). The SVG has Graphviz's
structure (`g.node` with the node's id and a `title`, `g.edge`, `g.cluster`), so the HTML page
reads it as it reads dot's."""
from __future__ import annotations

import textwrap
from html import escape

from .graph import RANK_COLOR, _fill, _label_bytes, node_label
from .graph_model import Edge, KernelGraph, Node

FONT = 10
LINE = 13  # px per text line
CHAR = 6.0  # px per character of Helvetica 10 (about)
GAP = 26  # between rows: room for an arrow and its label
LANE = 14  # between arcs
PAD = 8


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


def ranked_svg(kg: KernelGraph, note: str = "") -> bytes:
    """The SVG of `kg` laid out in schedule order; `note` (what was simplified) under the title."""
    measure = (lambda n: n.time_s or 0) if kg.color == "roofline" else (lambda n: n.hbm_bytes)
    scale = max((measure(n) for n in kg.nodes if n.kind != "parameter"), default=0)
    rows = [n for n in kg.nodes if n.kind == "parameter"] + [n for n in kg.nodes if n.kind != "parameter"]
    out_row = None
    boxes = [_box(n) for n in rows]
    if kg.output_node:
        out_row = len(rows)
    width = max([w for _, w, _ in boxes] + [200.0])
    said = textwrap.wrap(note, 120) if note else []
    top = 2 * LINE + len(said) * LINE + PAD
    y: float = top
    ys: list[float] = []
    groups = {g.id: g for g in kg.groups}
    prev_group = None
    for n, (_, _, h) in zip(rows, boxes):
        cluster = n.group if n.kind == "kernel" and n.group in groups and groups[n.group].expanded and not n.away else None
        if cluster and cluster != prev_group:
            y += LINE + PAD  # room for the cluster's label
        elif prev_group and cluster != prev_group:
            y += PAD
        prev_group = cluster
        ys.append(y)
        y += h + GAP
    if out_row is not None:
        ys.append(y)
        y += 2 * LINE + GAP
    row_of = {n.id: i for i, n in enumerate(rows)}
    if out_row is not None:
        row_of["__output__"] = out_row
    x0 = PAD

    def mid(i: int) -> tuple[float, float, float]:  # (right edge x, top y, bottom y) of row i's box
        w, h = (boxes[i][1], boxes[i][2]) if i < len(rows) else (120.0, 2 * LINE)
        return x0 + (width + w) / 2, ys[i], ys[i] + h

    edges: list[tuple[str, str, Edge | None]] = [(e.src, e.dst, e) for e in kg.edges if e.src in row_of and e.dst in row_of]
    edges += [(src, "__output__", None) for src in kg.outputs if src in row_of and out_row is not None]
    spans = [(min(row_of[a], row_of[b]), max(row_of[a], row_of[b])) for a, b, _ in edges]
    long = [i for i, (a, b, _) in enumerate(edges)  # all but an arrow down to the next row
            if row_of[b] != row_of[a] + 1 or rows[row_of[a]].kind == "parameter"]
    lane = dict(zip(long, _lanes([spans[i] for i in long])))
    lanes = max(lane.values(), default=-1) + 1
    total_w = x0 + width + (lanes + 1) * LANE + 90
    biggest = max((e.bytes for e in kg.edges), default=0)

    parts = [f'<svg width="{total_w:.0f}pt" height="{y + PAD:.0f}pt" viewBox="0.00 0.00 {total_w:.2f} {y + PAD:.2f}" '
             'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">',
             f'<g id="graph0" class="graph"><title>{escape(kg.title)}</title>',
             f'<rect x="0" y="0" width="{total_w:.0f}" height="{y + PAD:.0f}" fill="white"/>',
             f'<text x="{PAD}" y="{LINE + 4}" font-family="Helvetica,sans-Serif" font-size="16">{escape(kg.title)}</text>']
    for i, line in enumerate(said):
        parts.append(f'<text x="{PAD}" y="{(2 + i) * LINE + 6}" font-family="Helvetica,sans-Serif" font-size="{FONT}" '
                     f'fill="#a33">{escape(line)}</text>')
    # clusters: an open group's rows, framed
    spans_of: dict[str, list[int]] = {}
    for i, n in enumerate(rows):
        if n.kind == "kernel" and n.group in groups and groups[n.group].expanded and not n.away:
            spans_of.setdefault(n.group, []).append(i)
    for gid, idx in spans_of.items():
        y_top, y_bot = ys[idx[0]] - LINE - PAD / 2, ys[idx[-1]] + boxes[idx[-1]][2] + PAD / 2
        parts.append(f'<g id="{escape(gid)}" class="cluster"><title>cluster_{escape(gid)}</title>'
                     f'<rect x="{x0 - PAD / 2}" y="{y_top:.1f}" width="{width + PAD:.1f}" height="{y_bot - y_top:.1f}" rx="6" '
                     f'fill="none" stroke="#999999"/><text x="{x0}" y="{y_top + LINE - 2:.1f}" font-family="Helvetica,sans-Serif" '
                     f'font-size="{FONT}">{escape(groups[gid].label)}</text></g>')
    for k, (a, b, e) in enumerate(edges):
        ra, rb = row_of[a], row_of[b]
        xa, _, ya_bot = mid(ra)
        xb, yb_top, _ = mid(rb)
        label = "" if e is None else (f"{e.shape} {_label_bytes(e.bytes)}" if e.tensors == 1 else f"{e.tensors} tensors {_label_bytes(e.bytes)}")
        stroke = 1.0 if e is None or not e.hbm or biggest <= 0 else 1 + 4 * (e.bytes / biggest) ** 0.5
        dash = "" if e is None or e.hbm else ' stroke-dasharray="5,2"'
        if k in lane:
            x = x0 + width + (lane[k] + 1) * LANE
            y1, y2 = ys[ra] + 0.65 * boxes[ra][2] if ra < len(rows) else ya_bot, yb_top + 0.35 * (boxes[rb][2] if rb < len(rows) else 2 * LINE)
            d = f"M{xa:.1f},{y1:.1f} H{x:.1f} V{y2:.1f} H{xb + 7:.1f}"
            head = f"{xb + 7:.1f},{y2 - 4:.1f} {xb:.1f},{y2:.1f} {xb + 7:.1f},{y2 + 4:.1f}"
            tx, ty = x + 3, (y1 + y2) / 2
        else:
            xm = x0 + width / 2
            d = f"M{xm:.1f},{ya_bot:.1f} V{yb_top - 7:.1f}"
            head = f"{xm - 4:.1f},{yb_top - 7:.1f} {xm:.1f},{yb_top:.1f} {xm + 4:.1f},{yb_top - 7:.1f}"
            tx, ty = xm + 6, (ya_bot + yb_top) / 2 + 3
        parts.append(f'<g class="edge"><title>{escape(a)}&#45;&gt;{escape(b)}</title>'
                     f'<path fill="none" stroke="#555555" stroke-width="{stroke:.1f}"{dash} d="{d}"/>'
                     f'<polygon fill="#555555" stroke="#555555" points="{head}"/>'
                     + (f'<text x="{tx:.1f}" y="{ty:.1f}" font-family="Helvetica,sans-Serif" font-size="8">{escape(label)}</text>'
                        if label else "") + "</g>")
    for i, n in enumerate(rows):
        lines, w, h = boxes[i]
        fill, font = _fill(n, kg.color, scale)
        stroke, pen = (RANK_COLOR, 4) if n.ranks else ("#333333", 1)
        x = x0 + (width - w) / 2
        shape = (f'<rect x="{x:.1f}" y="{ys[i]:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{0 if n.kind != "kernel" else 5}" '
                 f'fill="{fill}" stroke="{stroke}" stroke-width="{pen}"/>')
        if n.kind == "group":  # box3d, as dot draws a collapsed group
            shape = (f'<rect x="{x + 4:.1f}" y="{ys[i] - 4:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" stroke="#333333"/>'
                     + shape)
        text = "".join(f'<text text-anchor="middle" x="{x0 + width / 2:.1f}" y="{ys[i] + PAD / 2 + (j + 0.8) * LINE:.1f}" '
                       f'font-family="Helvetica,sans-Serif" font-size="{FONT}" fill="{font}">{escape(line)}</text>'
                       for j, line in enumerate(lines))
        parts.append(f'<g id="{escape(n.id)}" class="node"><title>{escape(n.id)}</title>{shape}{text}</g>')
    if out_row is not None:
        yo = ys[out_row]
        parts.append(f'<g id="__output__" class="node"><title>__output__</title><rect x="{x0 + width / 2 - 60:.1f}" y="{yo:.1f}" '
                     f'width="120" height="{2 * LINE}" fill="#c8e6c9" stroke="#333333" stroke-width="2"/>'
                     f'<text text-anchor="middle" x="{x0 + width / 2:.1f}" y="{yo + 1.4 * LINE:.1f}" '
                     f'font-family="Helvetica,sans-Serif" font-size="{FONT}">program output</text></g>')
    parts.append("</g></svg>\n")
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + "\n".join(parts)).encode()
