"""The documentation cannot drift from the code:

- every `$ inspector ...` line in a fenced block of README.md and docs/*.md runs here, through the
  CLI's main in this process (the cli_run fixture: what a reader's `inspector` prints, without a
  Python per command; tests/test_cli.py and test_bad_inputs.py hold the real process to the same
  messages) with COLUMNS=100 and no colour, and must exit as the block says
  (`# exit N` after the command; 0 otherwise) and print the whole output the block shows under it:
  line for line, blank lines and runs of spaces aside, wall-clock figures (each named in
  _WALL_CLOCK: a deterministic time such as a roofline is compared) and the temporary folder's path normalised; a line `...` stands for any lines (none included), and
  ` ...` within a line for any text there. `# needs a TPU` marks a command skipped without
  one. Commands for a TPU (libtpu, deviceless; --estimate-only builds its topology) are marked `libtpu`, those that run
  kernels in interpret mode (diff) `slow`. Files a command writes go to a temporary folder.
- the reference tables of docs/ (tests/gen_docs.py) match the code's own tables, and changing one
  entry of a table makes that check fail;
- the examples of `inspector VERB --help` parse, and every option says its default.
"""
from __future__ import annotations

import argparse
import functools
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_docs  # noqa: E402
from inspector.jax_internals.cuda_topology import plugin_missing as gpu_missing  # noqa: E402

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)```")
OUTPUT_FLAGS = ("--patch", "--svg", "--html", "--dot", "--table")  # and export's --json PATH


def commands(page: Path) -> list[tuple[str, int, str, list[str] | None, int]]:
    """(page name, line, command, the output lines shown under it or None, exit code)."""
    found = []
    lines = page.read_text().splitlines()
    inside = False
    for number, line in enumerate(lines):
        if FENCE.match(line):
            inside = not inside
            continue
        text = line.strip()
        if not inside or not text.startswith("$ inspector"):
            continue
        command, comment = (re.split(r"\s+#\s*", text[2:], maxsplit=1) + [""])[:2]
        code = int(m.group(1)) if (m := re.search(r"exit (\d+)", comment)) else 0
        shown = []
        for after in lines[number + 1:]:
            if after.strip().startswith("```") or after.strip().startswith("$ "):
                break
            shown.append(after)
        if "needs a TPU" in comment:
            code = -1
        found.append((page.name, number + 1, command.strip(), shown if any(s.strip() for s in shown) else None, code))
    return found


ALL = [c for page in PAGES for c in commands(page)]


def _marks(command: str, code: int) -> list:
    if code == -1:
        return [pytest.mark.skip(reason="needs a TPU (on a TPU VM: INSPECTOR_DOCS_TPU=1 runs it)")
                if not os.environ.get("INSPECTOR_DOCS_TPU") else pytest.mark.libtpu]
    argv = command.split()
    marks = []
    # no --target: tpu-v5e, as a reader without a TPU or a project default gets it
    tpu_target = any(a.startswith("tpu-") for a in argv) or "--target" not in argv or argv[1] in ("check", "tune", "doctor")
    if tpu_target:  # --estimate-only too: it builds the chip's topology through libtpu, in this process
        marks.append(pytest.mark.libtpu)
    if argv[1] == "diff":
        marks.append(pytest.mark.slow)
    if any(c.split(":")[0] in ("h100", "h200", "a100") for a in argv for c in a.split(",")) and gpu_missing():
        marks.append(pytest.mark.skip(reason=f"a GPU target compiles through the gpu extra: {gpu_missing()}"))
    return marks


# Times the docs quote are compared like any figure (a roofline, libtpu's estimate, an ICI estimate: the
# same on any machine). Only wall-clock figures vary from run to run; each is named here and masked.
_WALL_CLOCK = {
    "the overview's time row (this run's trace, lower and compile)": re.compile(r"^time (?:\S+ \d[^,]*,? ?)+.*$"),
    "what a command took": re.compile(r"\b(took|in|after) \d+(?:\.\d+)?\s?(?:min|s|ms)\b"),
    "a stage's seconds in a progress line": re.compile(r"\b\d+(?:\.\d+)?s\b(?= elapsed| so far)"),
}


def _normal(text: str) -> str:
    """A line as compared: runs of spaces as one, wall-clock figures as T."""
    line = " ".join(text.split())
    for pattern in _WALL_CLOCK.values():
        line = pattern.sub(lambda m: m.group(1) + " T" if m.groups() and m.group(1) else "T", line)
    return line


def _matches(shown: list[str], printed: list[str]) -> bool:
    """Whether the printed lines are the shown ones (blank lines aside): `...` is any lines, a line
    ending in ` ...` any rest of its line."""
    want = [_normal(line) for line in shown if line.strip()]
    have = [_normal(line) for line in printed if line.strip()]

    def line_ok(w: str, h: str) -> bool:  # " ..." in a shown line: any text there
        if " ..." not in w and not w.startswith("... "):
            return w == h
        parts = [re.escape(p) for p in re.split(r"(?:^|\s)\.\.\.(?:\s|$)", w)]
        return re.fullmatch(".*".join(parts), h) is not None

    @functools.lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:  # want[i:] against have[j:]
        if i == len(want):
            return j == len(have)
        if want[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and line_ok(want[i], have[j]) and match(i + 1, j + 1)

    return match(0, 0)


@pytest.mark.parametrize("page, line, command, expected, code",
                         [pytest.param(*c, id=f"{c[0]}:{c[1]}", marks=_marks(c[2], c[4])) for c in ALL])
def test_every_command_runs(page, line, command, expected, code, tmp_path, cli_run, monkeypatch):
    argv = shlex.split(command)
    for i, arg in enumerate(argv[:-1]):  # files a command writes land in tmp_path
        if arg in OUTPUT_FLAGS or (arg == "--json" and argv[1] == "export"):
            argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
    monkeypatch.delenv("INSPECTOR_TARGET", raising=False)  # as a reader runs it: no project default
    done = cli_run(*argv[1:])
    out = (done.stdout + done.stderr).replace(str(tmp_path) + "/", "")
    assert done.returncode == max(code, 0), f"{page}:{line}: {command}\n{out[-3000:]}"
    if expected is not None:
        assert _matches(expected, out.splitlines()), (f"{page}:{line}: {command}: prints\n{out[-4000:]}\n"
                                                      "where the page shows\n" + "\n".join(expected))


def test_the_docs_hold_commands():
    assert len(ALL) >= 30 and {p for p, *_ in ALL} >= {"README.md", "vmem.md", "tune.md", "diff.md", "mosaic.md"}


def test_readme_is_short_with_a_picture():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (ROOT / image).is_file(), image


def test_links_between_pages_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+\.(?:md|svg))(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name}: {target}"


def test_generated_pages_match_the_code():
    assert gen_docs.stale() == [], "run .venv/bin/python tests/gen_docs.py"
    assert set(gen_docs.blocks()) == set(gen_docs.TABLES)


@pytest.mark.parametrize("change", ["findings", "views", "chips", "exit-codes", "vmem-rules"])
def test_a_changed_table_entry_fails_the_check(change, monkeypatch):
    import dataclasses

    from inspector.base import chips, findings
    from inspector.results import view_table

    if change == "findings":
        code = findings.CODES["tiling"]
        monkeypatch.setitem(findings.CODES, "tiling", dataclasses.replace(code, severity="warning"))
    elif change == "views":
        views = list(view_table.VIEWS)
        views[1] = dataclasses.replace(views[1], summary="something else")
        monkeypatch.setattr(view_table, "VIEWS", tuple(views))
    elif change == "chips":
        monkeypatch.setattr(chips, "CHIPS", tuple(dataclasses.replace(c, scoped_vmem_bytes=1 << 20) if c.name == "tpu-v5e" else c
                                                  for c in chips.CHIPS))
    elif change == "vmem-rules":
        from inspector.pallas import vmem_rules

        monkeypatch.setattr(vmem_rules, "RULES", tuple(dataclasses.replace(r, share=0.7) if r.name == "held_dot" else r
                                                       for r in vmem_rules.RULES))
    else:
        monkeypatch.setattr(gen_docs, "exit_codes", lambda: [(4, "EXIT_BUSY", "the TPU is held by another process")])
    assert gen_docs.stale() != []


def _subparsers():
    from inspector.commands.parser import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_every_option_says_its_default():
    _, verbs = _subparsers()
    for name, verb in verbs.items():
        for action in verb._actions:
            if action.option_strings and action.nargs != 0:
                text = verb._get_formatter()._get_help_string(action) or ""
                assert "default" in text, (name, action.option_strings)


def test_help_examples_parse():
    from inspector.commands.help_text import TOP
    from inspector.commands.parser import normalise
    from inspector.commands.verb_table import VERBS

    parser, verbs = _subparsers()
    EPILOGS = {v.name: v.epilog for v in VERBS}
    assert set(EPILOGS) == set(verbs)
    assert "HTML" in parser.format_help()  # export's summary
    for text in (TOP, *EPILOGS.values()):
        for line in text.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("inspector ") and "VERB" not in line:
                argv = shlex.split(line)[1:]
                parser.parse_args(normalise(argv))
                spec = next((a for a in argv if ".py:" in a), None)
                assert spec is None or (ROOT / spec.split(":")[0]).is_file(), line


def test_a_missing_file_suggests_the_nearest(tmp_path):
    from inspector.base.errors import UsageError
    from inspector.compilation.target import load_target

    with pytest.raises(UsageError, match=r"samples/atention.py: no such file; did you mean samples/attention.py\?"):
        load_target("samples/atention.py:flash")


def test_the_chip_figures_quoted_are_the_datas():
    """README and BENCHMARKS.md quote how many corpus kernels libtpu's estimate put within 25% of
    the chip: the figures of tests/data/chip/v5e_corpus.json (README once said 52, the data 54)."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("chip_corpus", ROOT / "tests/bench/chip_corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    sys.modules["chip_corpus"] = corpus  # its dataclasses look their module up
    spec.loader.exec_module(corpus)
    kernels, within, twice = corpus.corpus_figures(json.loads((ROOT / "tests/data/chip/v5e_corpus.json").read_text()))
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{within} of {kernels} kernels came within 25% of the chip" in readme
    benchmarks = (ROOT / "BENCHMARKS.md").read_text()
    assert f"of the {kernels} kernels of 0.1 ms or more, {within} within 25% of the chip" in benchmarks
    assert f"| corpus | {kernels} | {within} ({round(100 * within / kernels)}%) | {twice} |" in benchmarks
    # the fourth held-out round as estimated before the chip ran it (the corpus holds today's figures)
    data = json.loads((ROOT / "tests/data/chip/v5e_corpus.json").read_text())
    blind = json.loads((ROOT / "tests/data/chip/heldout4_estimated.json").read_text())["entries"]
    for label, found in blind.items():
        data["entries"][label]["inspector"] = found
    held, held_within, *_ = corpus.round_figures(data, "heldout4")
    assert f"on 23 programs nobody here had written, {held_within} of {held} kernels came within 25% of the chip" in readme
    _, today, *_ = corpus.round_figures(json.loads((ROOT / "tests/data/chip/v5e_corpus.json").read_text()), "heldout4")
    assert f"as estimated before it ran them, {today} of {held} with today's estimate" in readme


def test_the_repository_cites_no_file_outside_it():
    """The project's documents stand on their own: no code, test or page points at a file outside
    the repository (the team's notes beside it once were)."""
    outside = re.compile(r"\.\./shared/|shared/facts\.md|facts\.md section|facts\.md s\d")
    files = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *(ROOT / "docs").glob("*.md")]
    for folder in ("inspector", "views", "kernels", "samples", "tests"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md") and "heldout" not in str(p)]
    assert [str(p.relative_to(ROOT)) for p in files if outside.search(p.read_text(errors="replace"))] == []


def test_only_wall_clock_figures_are_masked():
    """A stale roofline or estimate in the docs fails (README once said 675 us where show printed 660 us);
    a run's own seconds do not."""
    assert _normal("roofline time       675 us") != _normal("roofline time 660 us")
    assert _normal("0  matmul.1  173 us  memory  308 us") != _normal("0  matmul.1  173 us  memory  310 us")
    assert _normal("time          trace 0.41s, lower 0.10s, compile 2.31s") == _normal("time trace 0.52s, lower 0.12s, compile 3.02s")
    assert _normal("wrote 3 kernels in 12 s") == _normal("wrote 3 kernels in 4.5 s")


def test_the_docs_on_two_cpus_are_the_datas():
    """BENCHMARKS.md quotes tests/data/docs_two_cpus.json: this file run whole on two x86 CPUs
    (tests/bench/docs_on_vm.sh), every test with one outcome on both and none failed."""
    import json

    results = json.loads((ROOT / "tests/data/docs_two_cpus.json").read_text())["results"]
    assert [name for name, r in results.items() if r["dev"] != r["tpu_vm"] or r["dev"] == "failed"] == []
    count = {kind: sum(r["dev"] == kind for r in results.values()) for kind in ("passed", "skipped")}
    assert f"`pytest tests/test_docs.py`: {count['passed']} passed, {count['skipped']} skipped" in (ROOT / "BENCHMARKS.md").read_text()
