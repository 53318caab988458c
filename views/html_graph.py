"""The kernel graph as one self-contained HTML page (`inspector export TARGET --html FILE`): the
SVG inline with pan and zoom, search by kernel name, op or source line, figures on hover, and a
table of the slowest kernels that finds them in the graph. No network: the script and styles are
inline. Renders a KernelGraph and its SVG; computes nothing."""
from __future__ import annotations

import html
import json

from inspector.hlo.graph import node_label
from inspector.hlo.graph_model import KernelGraph
from inspector.units import fmt_bytes, fmt_count, fmt_time

_CSS = """
body{margin:0;font:13px Helvetica,Arial,sans-serif;display:flex;height:100vh;overflow:hidden}
#side{width:340px;border-right:1px solid #ccc;display:flex;flex-direction:column;overflow:auto;padding:8px;box-sizing:border-box}
#graph{flex:1;overflow:hidden;cursor:grab;background:#fff}
#graph svg{width:100%;height:100%}
#q{width:100%;box-sizing:border-box;padding:4px;font-size:13px}
table{border-collapse:collapse;width:100%;margin-top:6px}td,th{padding:2px 4px;text-align:left;border-bottom:1px solid #eee}
tr.top{cursor:pointer}tr.top:hover{background:#f0f4ff}
#info{flex:none;max-height:38vh;overflow:auto;white-space:pre-wrap;font-family:monospace;font-size:11px;background:#f7f7f7;padding:4px;margin-top:6px;min-height:4em}
svg.searching g.node:not(.hit){opacity:.25}
g.node.hit polygon,g.node.hit path{stroke:#0050ff;stroke-width:5}
#count{color:#555}
"""

_JS = r"""
const DATA = JSON.parse(document.getElementById('data').textContent);
const svg = document.querySelector('#graph svg');
svg.removeAttribute('width'); svg.removeAttribute('height');
const vb = svg.viewBox.baseVal; const home = [vb.x, vb.y, vb.width, vb.height];
function toSvg(x, y){ const p = svg.createSVGPoint(); p.x = x; p.y = y; return p.matrixTransform(svg.getScreenCTM().inverse()); }
svg.addEventListener('wheel', e => { e.preventDefault(); const p = toSvg(e.clientX, e.clientY);
  const f = e.deltaY > 0 ? 1.2 : 1 / 1.2; vb.x = p.x - (p.x - vb.x) * f; vb.y = p.y - (p.y - vb.y) * f;
  vb.width *= f; vb.height *= f; }, {passive: false});
let drag = null;
svg.addEventListener('mousedown', e => { drag = toSvg(e.clientX, e.clientY); });
window.addEventListener('mouseup', () => { drag = null; });
window.addEventListener('mousemove', e => { if (!drag) return; const p = toSvg(e.clientX, e.clientY);
  vb.x -= p.x - drag.x; vb.y -= p.y - drag.y; });
function reset(){ [vb.x, vb.y, vb.width, vb.height] = home; }
function focusNode(id){ const g = document.getElementById(id); if (!g) return;
  const r = g.getBoundingClientRect(), a = toSvg(r.left, r.top), b = toSvg(r.right, r.bottom);
  const w = Math.max(b.x - a.x, 1) * 4, h = Math.max(b.y - a.y, 1) * 4;
  const s = Math.max(w / vb.width, h / vb.height); vb.width *= s; vb.height *= s;
  vb.x = (a.x + b.x) / 2 - vb.width / 2; vb.y = (a.y + b.y) / 2 - vb.height / 2; }
function mark(ids){ document.querySelectorAll('g.node.hit').forEach(g => g.classList.remove('hit'));
  svg.classList.toggle('searching', ids !== null);
  (ids || []).forEach(id => { const g = document.getElementById(id); if (g) g.classList.add('hit'); }); }
function search(text){ const q = text.trim().toLowerCase();
  if (!q){ mark(null); document.getElementById('count').textContent = ''; return []; }
  const ids = Object.keys(DATA.nodes).filter(id => DATA.nodes[id].text.includes(q));
  mark(ids); document.getElementById('count').textContent = ids.length + ' node(s)';
  if (ids.length) { focusNode(ids[0]); show(ids[0]); } return ids; }
function show(id){ const n = DATA.nodes[id]; if (n) document.getElementById('info').textContent = n.info; }
document.getElementById('q').addEventListener('input', e => search(e.target.value));
document.querySelectorAll('g.node').forEach(g => g.addEventListener('mouseenter', () => show(g.id)));
document.querySelectorAll('tr.top').forEach(tr => tr.addEventListener('click', () => {
  mark([tr.dataset.node]); focusNode(tr.dataset.node); show(tr.dataset.node); }));
document.getElementById('reset').addEventListener('click', () => { reset(); mark(null); });
window.inspectorSearch = search;
if (location.hash.startsWith('#q=')) { const q = decodeURIComponent(location.hash.slice(3));
  document.getElementById('q').value = q; search(q); }  // a link that opens on a search
"""


def _node_data(kg: KernelGraph) -> dict:
    nodes = {}
    for n in kg.nodes:
        info = node_label(n).replace("\\n", "\n")
        if n.kind != "parameter":
            info += "\n\nkernels: " + ", ".join(n.kernels[:40]) + (" ..." if len(n.kernels) > 40 else "")
            info += "\nops: " + ", ".join(n.ops[:30]) + "\nsources: " + ", ".join(n.sources[:20])
        text = " ".join([n.title, *n.kernels, *n.ops, *n.sources]).lower()
        nodes[n.id] = {"info": info, "text": text}
    return nodes


def graph_page(kg: KernelGraph, svg: str) -> str:
    """The page: `svg` is Graphviz's drawing of `kg` (node ids are the KernelGraph's)."""
    svg = svg[svg.find("<svg"):] if "<svg" in svg else svg
    rows = "".join(
        f'<tr class="top" data-node="{html.escape(t.node)}"><td>#{t.rank}</td><td>{html.escape(t.name)}</td>'
        f"<td>{fmt_time(t.time_s) if t.time_s is not None else fmt_bytes(t.hbm_bytes)}</td></tr>" for t in kg.top)
    measure = "roofline time" if kg.top and kg.top[0].time_s is not None else "HBM bytes"
    data = json.dumps({"nodes": _node_data(kg)}).replace("</", "<\\/")
    total_flops = sum(n.flops for n in kg.nodes)
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(kg.title)}</title>"
            f"<style>{_CSS}</style></head><body>"
            f"<div id='side'><b>{html.escape(kg.title)}</b>"
            f"<div>{kg.kernels} kernels, {len(kg.nodes)} nodes, {len(kg.groups)} groups, {fmt_count(total_flops)}flop; "
            f"colour: {html.escape(kg.color)}</div>"
            "<input id='q' placeholder='search: kernel, op or file:line' autofocus> <span id='count'></span>"
            "<button id='reset'>reset view</button>"
            f"<div id='info'>hover a node for its figures</div>"
            f"<table><tr><th>#</th><th>slowest kernels</th><th>{measure}</th></tr>{rows}</table>"
            "<p style='color:#555'>wheel: zoom, drag: pan; click a row to find the kernel</p></div>"
            f"<div id='graph'>{svg}</div>"
            f"<script type='application/json' id='data'>{data}</script><script>{_JS}</script></body></html>\n")
