"""The reference tables of docs/ are made from the code's own tables, never typed:

    .venv/bin/python tests/gen_docs.py           # rewrite every generated block in docs/
    .venv/bin/python tests/gen_docs.py --check   # exit 1 and name the blocks that differ from the code

A page holds a block between two markers, and only the text between them is rewritten:

    <!-- generated: findings (tests/gen_docs.py) -->
    ...
    <!-- end generated: findings -->

The tables: ``views`` (inspector/results/view_table.py: the TUI's tabs and `show --view`), ``findings``
(inspector/base/findings.py's CODES), ``chips`` (inspector/base/chips.py's CHIPS), ``exit-codes`` (the
EXIT_* constants of inspector/base/errors.py and inspector/commands/process.py, with the comment on
their line), ``vmem-rules`` (inspector/pallas/vmem_rules.py's RULES, each with its evidence from
inspector/pallas/vmem_rule_evidence.json), ``layers`` (tests/layers.py's LAYERS and SEAMS: the order of the
folders that tests/test_layering.py enforces). tests/test_docs.py fails when a page and the code disagree.
"""
from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) \(tests/gen_docs.py\) -->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)",
                   re.S)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def views_table() -> str:
    from inspector.results.view_table import VIEWS

    rows = [[f"`{v.key}`", v.title, f"`--view {v.name}`" if v.shown else "-", v.summary] for v in VIEWS]
    return _table(["key", "tab", "`inspector show`", "what it shows"], rows)


def findings_table() -> str:
    from inspector.base.findings import CODES

    rows = [[f"`{c.name}`", c.severity, "per chip" if c.per_chip else "once", c.view, c.summary] for c in CODES.values()]
    return _table(["code", "severity", "reported", "evidence in", "what"], rows)


def chips_table() -> str:
    from inspector.base.chips import CHIPS
    from inspector.base.units import fmt_bytes

    def figure(value, scale=1.0, digits=0):
        return "-" if value is None else f"{value / scale:,.{digits}f}"

    rows = [[f"`{c.name}`", ", ".join(c.aliases) or "-", c.kind, c.tensor_cores or "-",
             fmt_bytes(c.vmem_bytes) if c.vmem_bytes else "-", fmt_bytes(c.scoped_vmem_bytes) if c.scoped_vmem_bytes else "-",
             fmt_bytes(c.hbm_bytes) if c.hbm_bytes else "-", figure(c.hbm_bytes_per_s, 1e9), figure(c.bf16_flops, 1e12),
             c.mxu or "-", figure(c.clock_hz, 1e9, 2), " ".join(c.topologies) or "-"] for c in CHIPS]
    return _table(["target", "aliases", "kind", "TensorCores", "VMEM per core", "scoped VMEM", "HBM", "HBM GB/s",
                   "bf16 TFLOP/s", "MXU", "clock GHz", "slice shapes (`CHIP:SHAPE`)"], rows)


def exit_codes() -> list[tuple[int, str, str]]:
    """(code, name, meaning) of every EXIT_* constant, the meaning from the comment on its line
    (errors.py says what each code means there; process.py names the signals)."""
    found: dict[int, tuple[int, str, str]] = {}
    for path in (ROOT / "inspector" / "base" / "errors.py", ROOT / "inspector" / "commands" / "process.py"):
        source = path.read_text()
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        for line_no, line in enumerate(source.splitlines(), 1):
            match = re.match(r"(EXIT_\w+(?:\s*,\s*EXIT_\w+)*)\s*=\s*([\d\s,]+?)\s*(?:#\s*(.*))?$", line)
            if not match:
                continue
            names = [n.strip() for n in match.group(1).split(",")]
            values = [int(v) for v in match.group(2).split(",") if v.strip()]
            comment = next((t.string.lstrip("# ") for t in tokens if t.type == tokenize.COMMENT and t.start[0] == line_no), "")
            for name, value in zip(names, values):
                found.setdefault(value, (value, name, comment or SIGNALS.get(name, "")))
    return sorted(found.values())


SIGNALS = {"EXIT_OK": "ok", "EXIT_SIGINT": "interrupted: Ctrl-C (SIGINT); what is done is printed where a verb can (tune)",
           "EXIT_SIGTERM": "terminated (SIGTERM)"}


def exit_codes_table() -> str:
    return _table(["code", "name in the code", "when"], [[code, f"`{name}`", meaning] for code, name, meaning in exit_codes()])


def vmem_rules_table() -> str:
    """The VMEM estimate's rules (inspector/pallas/vmem_rules.py's RULES), then each rule's evidence
    (vmem_rule_evidence.json) under its name."""
    from inspector.pallas.vmem_rules import PLACEMENT_KEYS, RULES, evidence

    def figure(r) -> str:
        return "-" if r.share is None else f"{r.share:g}"

    def per_chip(r) -> str:
        chips = [f"{c} {v:g}" for c, v in r.per_chip.items()] + [f"{c} at most {v:g}" for c, v in r.most.items()]
        chips += [f"only on {', '.join(sorted(r.only_on))}"] if r.only_on is not None else []
        chips += [f"not on {', '.join(sorted(r.not_on))}"] if r.not_on else []
        return "; ".join(chips) or "-"

    found = evidence()
    text = _table(["rule", "kind", "share", "per chip", "what it matches"],
                  [[f"[`{r.name}`](#{r.name.replace('_', '-')})", r.kind + (" (replaces)" if r.replaces else ""),
                    figure(r), per_chip(r), r.summary] for r in RULES])
    for name in [r.name for r in RULES] + list(PLACEMENT_KEYS):
        entry = found[name]
        text += (f"\n### {name.replace('_', '-')}\n\n{entry['evidence']}\n\nChips: {', '.join(entry['chips'])}. "
                 f"Data: {', '.join(entry['data'])}.\n")
    return text


def layers_table() -> str:
    """The layers, bottom to top (tests/layers.py's LAYERS), and the seams that cross them."""
    from layers import LAYERS, SEAMS

    text = _table(["layer", "paths", "what lives there"],
                  [[f"{i}. {layer.name}", ", ".join(f"`{p}`" for p in layer.paths), layer.what]
                   for i, layer in enumerate(LAYERS, 1)])
    seams = [f"- `{s.importer}` imports `{s.imported}`: {s.why}" for s in SEAMS]
    return text + "\nSeams (an import up the order that must stay): " + ("\n" + "\n".join(seams) if seams else "none.") + "\n"


TABLES = {"layers": layers_table, "views": views_table, "findings": findings_table, "chips": chips_table, "exit-codes": exit_codes_table,
          "vmem-rules": vmem_rules_table}


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def regenerate(text: str) -> str:
    def fill(match: re.Match) -> str:
        name = match.group("name")
        if name not in TABLES:
            raise SystemExit(f"gen_docs: no table named {name!r} (known: {', '.join(TABLES)})")
        return match.group(1) + TABLES[name]() + match.group(4)
    return BLOCK.sub(fill, text)


def stale() -> list[str]:
    """The generated blocks that differ from what the code's tables give now, as 'page: name'."""
    found = []
    for page in pages():
        text = page.read_text()
        for match in BLOCK.finditer(text):
            if regenerate(match.group(0)) != match.group(0):
                found.append(f"{page.relative_to(ROOT)}: {match.group('name')}")
    return found


def blocks() -> dict[str, list[str]]:
    """Which page holds each generated table."""
    held: dict[str, list[str]] = {}
    for page in pages():
        for match in BLOCK.finditer(page.read_text()):
            held.setdefault(match.group("name"), []).append(page.name)
    return held


def main(argv: list[str]) -> int:
    if "--check" in argv:
        differ = stale()
        for line in differ:
            print(f"{line}: differs from the code; run .venv/bin/python tests/gen_docs.py", file=sys.stderr)
        return 1 if differ else 0
    for page in pages():
        text = page.read_text()
        new = regenerate(text)
        if new != text:
            page.write_text(new)
            print(f"wrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
