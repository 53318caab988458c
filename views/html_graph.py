"""The kernel graph as one self-contained HTML page (`inspector export TARGET --html FILE`): the
SVG inline with pan and zoom, search by kernel name, op or source line, figures on hover, and a
table of the slowest kernels that finds them in the graph. No network: the script and styles are
inline. Where the exporting machine has no Graphviz `dot`, the page carries the DOT sources and
Graphviz as WebAssembly (vendored: views/vendor/wasm_graphviz/, its README says which build) and
lays the graph out when it opens. Renders a KernelGraph and its drawing; computes nothing."""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from inspector.hlo.graph import short_source, node_label
from inspector.hlo.graph_model import KernelGraph
from inspector.base.units import fmt_bytes, fmt_count, fmt_time

_CSS = """
body{margin:0;font:13px Helvetica,Arial,sans-serif;display:flex;height:100vh;overflow:hidden}
#side{width:420px;border-right:1px solid #ccc;display:flex;flex-direction:column;overflow:auto;padding:8px;box-sizing:border-box}
#graph{flex:1;overflow:hidden;cursor:grab;background:#fff}
#graph svg{width:100%;height:100%}
#q{width:100%;box-sizing:border-box;padding:4px;font-size:13px}
table{border-collapse:collapse;width:100%;margin-top:6px}td,th{padding:2px 4px;text-align:left;border-bottom:1px solid #eee;word-break:break-word}
tr.top{cursor:pointer}tr.top:hover{background:#f0f4ff}
#info{flex:none;max-height:38vh;overflow:auto;white-space:pre-wrap;font-family:monospace;font-size:11px;background:#f7f7f7;padding:4px;margin-top:6px;min-height:4em}
#graph > svg.searching g.node:not(.hit){opacity:.25}
g.node.hit polygon,g.node.hit path,g.node.hit rect{stroke:#0050ff;stroke-width:5}
#notes{color:#a33;font-size:12px;margin:4px 0}
#count{color:#555}
#graph{position:relative}
#detail{display:none;position:absolute;top:0;right:0;width:55%;height:100%;background:#fff;border-left:2px solid #0050ff;flex-direction:column}
#detail .title{background:#0050ff;color:#fff;padding:4px;cursor:pointer}#detail .body{flex:1;overflow:hidden}
#detail svg{width:100%;height:100%}
"""

# @hpcc-js/wasm-graphviz 1.29.2 (Graphviz 16.1.0): the file and its sha256 (tests/test_graph.py checks it)
GRAPHVIZ_WASM = Path(__file__).with_name("vendor") / "wasm_graphviz" / "graphviz.js"
GRAPHVIZ_WASM_SHA256 = "550d9cd6ff429f5bd225316fe1faed4f852038c3e1ec609ce113af1f9379ce25"
GRAPHVIZ_WASM_VERSION = "@hpcc-js/wasm-graphviz 1.29.2 (Graphviz 16.1.0)"

# Where no SVG came with the page: Graphviz as WebAssembly lays out the DOT sources here, the whole
# graph when the page opens, a group's drawing when it is first opened. The module travels as
# base64 (its text holds "</", which would end a <script> early) and is imported from a blob: URL.
_LAYOUT_JS = r"""
let GV = null;
const DOTS = JSON.parse((document.getElementById('dots') || {textContent: 'null'}).textContent);
const bare = s => s.slice(s.indexOf('<svg'));
async function layOut(){
  const text = document.getElementById('graphviz').textContent.trim();
  const bytes = Uint8Array.from(atob(text), c => c.charCodeAt(0));
  const {Graphviz} = await import(URL.createObjectURL(new Blob([bytes], {type: 'text/javascript'})));
  GV = await Graphviz.load();
  document.getElementById('graph').insertAdjacentHTML('afterbegin', bare(GV.dot(DOTS.main)));
}
function groupTemplate(id){  // a group's drawing, laid out the first time it is opened
  if (!GV || !DOTS || !DOTS.groups[id]) return null;
  const t = document.createElement('template'); t.id = 't_' + id; t.innerHTML = bare(GV.dot(DOTS.groups[id]));
  document.body.appendChild(t); return t; }
"""

_JS = r"""
const DATA = JSON.parse(document.getElementById('data').textContent);
function panZoom(svg){  // wheel zooms about the cursor, drag pans; returns what moves the view
  svg.removeAttribute('width'); svg.removeAttribute('height');
  const vb = svg.viewBox.baseVal, home = [vb.x, vb.y, vb.width, vb.height];
  const toSvg = (x, y) => { const p = svg.createSVGPoint(); p.x = x; p.y = y; return p.matrixTransform(svg.getScreenCTM().inverse()); };
  svg.addEventListener('wheel', e => { e.preventDefault(); const p = toSvg(e.clientX, e.clientY);
    const f = e.deltaY > 0 ? 1.2 : 1 / 1.2; vb.x = p.x - (p.x - vb.x) * f; vb.y = p.y - (p.y - vb.y) * f;
    vb.width *= f; vb.height *= f; }, {passive: false});
  let drag = null, moved = false, start = null;
  svg.addEventListener('mousedown', e => { drag = toSvg(e.clientX, e.clientY); start = [e.clientX, e.clientY]; moved = false; });
  window.addEventListener('mouseup', () => { drag = null; });
  window.addEventListener('mousemove', e => { if (!drag) return; const p = toSvg(e.clientX, e.clientY);
    vb.x -= p.x - drag.x; vb.y -= p.y - drag.y;
    moved = moved || Math.abs(e.clientX - start[0]) + Math.abs(e.clientY - start[1]) > 4; });  // a hand's jitter is still a click
  return {
    reset(){ [vb.x, vb.y, vb.width, vb.height] = home; },
    dragged(){ return moved; },
    focus(g, part = 1){  // centre g in the left `part` of the view (the rest may be under the open group)
      const r = g.getBoundingClientRect(), a = toSvg(r.left, r.top), b = toSvg(r.right, r.bottom);
      const s = Math.max((b.x - a.x) * 4 / vb.width / part, (b.y - a.y) * 4 / vb.height, 0.05); vb.width *= s; vb.height *= s;
      vb.x = (a.x + b.x) / 2 - vb.width * part / 2; vb.y = (a.y + b.y) / 2 - vb.height / 2; },
  };
}
let svg = null, view = null;
const detail = document.getElementById('detail');
function mark(ids){ document.querySelectorAll('g.node.hit').forEach(g => g.classList.remove('hit'));
  svg.classList.toggle('searching', ids !== null);
  (ids || []).forEach(id => { const g = document.getElementById(id); if (g) g.classList.add('hit'); }); }
function show(id){ const n = DATA.nodes[id]; if (n) document.getElementById('info').textContent = n.info; }
function matcher(q){  // a line number matches itself, not the lines it begins: gpt2.py:3 is not gpt2.py:34
  const esc = q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); const re = new RegExp(esc + (/\d$/.test(q) ? '(?!\\d)' : ''));
  return text => re.test(text); }
function search(text){ const q = text.trim().toLowerCase();
  if (!q){ mark(null); document.getElementById('count').textContent = ''; return []; }
  const hit = matcher(q), ids = Object.keys(DATA.nodes).filter(id => hit(DATA.nodes[id].text));
  mark(ids); document.getElementById('count').textContent = ids.length + ' node(s)';
  if (ids.length) { const g = document.getElementById(ids[0]); if (g) view.focus(g); show(ids[0]); } return ids; }
function expand(id, q){  // open a collapsed group: its own kernels, drawn beside the graph
  const t = document.getElementById('t_' + id) || (typeof groupTemplate === 'function' ? groupTemplate(id) : null);
  if (!t) return false;
  detail.querySelector('.body').replaceChildren(t.content.cloneNode(true));
  detail.querySelector('.title').textContent = DATA.nodes[id].title + ' (click the title bar to close)';
  detail.style.display = 'flex'; const sub = detail.querySelector('svg'), v = panZoom(sub);
  const node = document.getElementById(id); if (node) view.focus(node, 0.45);  // the group stays in sight beside it
  sub.querySelectorAll('g.node').forEach(g => g.addEventListener('mouseenter', () => {
    document.getElementById('info').textContent = [...g.querySelectorAll('text')].map(t => t.textContent).join('\n'); }));  // not the <title>: Graphviz's node id
  const inner = DATA.groups[id] || {}, m = q ? matcher(q) : null;  // its kernels' names, ops and every source line
  if (m) { const hit = [...sub.querySelectorAll('g.node')].filter(g => m(inner[g.id] || g.textContent.toLowerCase()));
    hit.forEach(g => g.classList.add('hit')); if (hit.length) v.focus(hit[0]); }
  return true; }
function collapse(){ detail.style.display = 'none'; detail.querySelector('.body').replaceChildren(); }
function open1(q){ const ids = search(q); if (ids.length && DATA.nodes[ids[0]].group) expand(ids[0], q.trim().toLowerCase()); }
function start(){
svg = document.querySelector('#graph > svg'); view = panZoom(svg);
document.getElementById('q').addEventListener('input', e => search(e.target.value));
document.getElementById('q').addEventListener('keydown', e => { if (e.key === 'Enter') open1(e.target.value); });
document.querySelectorAll('#graph > svg g.node').forEach(g => {
  g.addEventListener('mouseenter', () => show(g.id));
  g.addEventListener('click', () => { if (!view.dragged()) expand(g.id, document.getElementById('q').value.trim().toLowerCase()); }); });
document.querySelectorAll('tr.top').forEach(tr => tr.addEventListener('click', () => {
  const g = document.getElementById(tr.dataset.node); mark([tr.dataset.node]); if (g) view.focus(g); show(tr.dataset.node);
  if (DATA.nodes[tr.dataset.node].group) expand(tr.dataset.node, tr.dataset.kernel.toLowerCase()); }));
detail.querySelector('.title').addEventListener('click', collapse);
document.getElementById('reset').addEventListener('click', () => { view.reset(); mark(null); collapse(); });
window.inspectorSearch = search; window.inspectorExpand = expand;
if (location.hash.startsWith('#q=')) { const q = decodeURIComponent(location.hash.slice(3));
  document.getElementById('q').value = q; open1(q); }  // a link that opens on a search (Enter: the same)
}
// settled once the graph is drawn and searchable (at once, or after the layout in the page)
window.inspectorReady = document.querySelector('#graph > svg') ? Promise.resolve(start()) :
  layOut().then(start, err => { document.getElementById('notes').textContent = 'the graph could not be laid out here: ' + err; });
"""


def _text(n) -> str:
    """What a search reads: the node's title, kernels, ops and every source line of its kernels."""
    return " ".join([n.title, *n.kernels, *n.ops, *n.sources]).lower()


def _node_data(kg: KernelGraph) -> dict:
    nodes = {}
    loops = {g.id: g for g in kg.program_groups if g.repetition is not None}
    for n in kg.nodes:
        info = node_label(n).replace("\\n", "\n")
        if n.kind == "group" and n.group in loops:  # where the loop is, and which of its runs this is
            g = loops[n.group]
            info += f"\nrun {g.repetition + 1} of {g.repetitions} of the loop at {g.site}"  # type: ignore[operator]
        if n.kind != "parameter":
            info += "\n\nkernels: " + ", ".join(n.kernels[:40]) + (" ..." if len(n.kernels) > 40 else "")
            info += "\nops: " + ", ".join(n.ops[:30]) + "\nsources: " + ", ".join(n.sources[:20])
        nodes[n.id] = {"info": info, "text": _text(n), "title": n.title, "group": n.kind == "group"}
    return nodes


def _bare(svg: str) -> str:
    return svg[svg.find("<svg"):] if "<svg" in svg else svg


def _in_page(dots: dict) -> str:
    """The DOT sources and Graphviz as WebAssembly, for a page that lays itself out."""
    wasm = base64.b64encode(GRAPHVIZ_WASM.read_bytes()).decode()
    sources = json.dumps(dots).replace("</", "<\\/")
    return (f"<script type='application/json' id='dots'>{sources}</script>"
            f"<script type='text/plain' id='graphviz'>{wasm}</script><script>{_LAYOUT_JS}</script>")


def graph_page(kg: KernelGraph, svg: str, groups: dict[str, str] | None = None, notes: list[str] | None = None,
               group_graphs: dict[str, KernelGraph] | None = None, dots: dict | None = None) -> str:
    """The page: `svg` is the drawing of `kg` (node ids are the KernelGraph's); `groups` maps a
    collapsed group's node id to the drawing of its own kernels (opened on click), `group_graphs`
    to their graphs (what a search inside an open group reads); `notes`: what the drawing
    simplified. Without `svg`, `dots` ({"main": DOT, "groups": {node id: DOT}}) are laid out in the
    page by Graphviz as WebAssembly."""
    svg = _bare(svg) if svg else ""
    layout = _in_page(dots) if not svg and dots else ""
    templates = "".join(f'<template id="t_{html.escape(gid)}">{_bare(text)}</template>' for gid, text in (groups or {}).items())
    rows = "".join(
        f'<tr class="top" data-node="{html.escape(t.node)}" data-kernel="{html.escape(t.name)}"><td>#{t.rank}</td><td>{html.escape(t.name)}</td>'
        f"<td>{fmt_time(t.time_s) if t.time_s is not None else fmt_bytes(t.hbm_bytes)}</td>"
        f"<td>{html.escape(short_source(t.source) or '-')}</td></tr>" for t in kg.top)
    timed = bool(kg.top) and kg.top[0].time_s is not None
    measure, ranked = ("roofline time", "slowest kernels") if timed else ("HBM bytes", "most HBM bytes")
    inner = {gid: {n.id: _text(n) for n in g.nodes} for gid, g in (group_graphs or {}).items()}
    data = json.dumps({"nodes": _node_data(kg), "groups": inner}).replace("</", "<\\/")
    said = "".join(f"<div>{html.escape(n)}</div>" for n in notes or [])
    total_flops = sum(n.flops for n in kg.nodes)
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(kg.title)}</title>"
            f"<style>{_CSS}</style></head><body>"
            f"<div id='side'><b>{html.escape(kg.title)}</b>"
            f"<div>{kg.kernels} kernels, {len(kg.nodes)} nodes, {len(kg.groups)} groups, {fmt_count(total_flops)}flop; "
            f"colour: {html.escape(kg.color)}</div>"
            "<input id='q' placeholder='search: kernel, op or file:line' autofocus> <span id='count'></span>"
            "<button id='reset'>reset view</button>"
            f"<div id='notes'>{said}</div>"
            f"<div id='info'>hover a node for its figures</div>"
            f"<table><tr><th>#</th><th>{ranked}</th><th>{measure}</th><th>source</th></tr>{rows}</table>"
            "<p style='color:#555'>wheel: zoom, drag: pan; click a group to open its kernels, a row to find the kernel</p></div>"
            f"<div id='graph'>{svg}<div id='detail'><div class='title'></div><div class='body'></div></div></div>{templates}"
            f"<script type='application/json' id='data'>{data}</script>{layout}<script>{_JS}</script></body></html>\n")
