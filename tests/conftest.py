"""Shared set-up: a quiet jax, a private compile cache, and helpers to run the CLI."""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"

# Before jax loads: the same environment the CLI sets, and a cache no other run shares. Under
# pytest-xdist the controller makes it before it starts its workers, which inherit the variable:
# one content-keyed cache for the whole run (entries are written atomically), so a compile one
# worker made is a hit in the other. Only the process that made it removes it.
if "INSPECTOR_CACHE_DIR" not in os.environ and "PYTEST_XDIST_WORKER" not in os.environ:
    import atexit
    import shutil

    os.environ["INSPECTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inspector-test-cache-")
    atexit.register(shutil.rmtree, os.environ["INSPECTOR_CACHE_DIR"], ignore_errors=True)
SESSION_CACHE = os.environ.get("INSPECTOR_CACHE_DIR", "")
# An xdist worker starts with COLUMNS=80 and LINES=24 that the run itself did not have: a UI
# started in a pty from a test then draws 80x24 whatever size the pty says (a test waited out
# its 300 s for a line off that screen). Workers take the controller's values, or none.
for _name in ("COLUMNS", "LINES"):
    _key = f"INSPECTOR_TEST_RUN_{_name}"
    if "PYTEST_XDIST_WORKER" not in os.environ:
        os.environ[_key] = os.environ.get(_name, "")
    elif os.environ.get(_key, "") == "":
        os.environ.pop(_name, None)
    else:
        os.environ[_name] = os.environ[_key]
# Under pytest-xdist every core already runs a test: a test's own parallel work (libtpu's compiles
# side by side, tune's worker processes: inspector.base.cores) gets its worker's share of the cores.
# More only contends: measured on the libtpu-heavy files, 15% more wall time and 19% more CPU, each
# extra child paying libtpu's start-up. The figures are the same whatever runs at once.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ and "INSPECTOR_CORES" not in os.environ:
    os.environ["INSPECTOR_CORES"] = str(max(1, len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
# The suite's tests were written for the CPU where they give no --target: the project default for this
# run (compilation/default_target.py's rule 2). Tests of the rule itself and the docs' commands remove it.
os.environ.setdefault("INSPECTOR_TARGET", "cpu")
from inspector.base import environment  # noqa: E402

environment.prepare()


def line_of(path: str, text: str) -> int:
    """The line number of the first line of ROOT/path that contains text: tests name source
    lines without hard-coding numbers that move when the file is edited."""
    for number, line in enumerate((ROOT / path).read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


_REPORTS: dict = {}


def shared_report(spec: str, chip: str):
    """One Report (fusions and Pallas views) per target and chip, shared by every test file that
    runs a corpus through the views: one trace and compile each."""
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.results.report import build_report
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target

    if (spec, chip) not in _REPORTS:
        target = load_target(spec)
        # with the compiler's buffer assignment on a TPU: `check` asks for it, so a check of the same
        # entry after this finds the compile in the run's cache instead of compiling again
        _REPORTS[spec, chip] = build_report(target, get_chip(chip), capture(target, Backend(get_chip(chip)), buffers=chip != "cpu"),
                                            fusions=True, pallas=True)
    return _REPORTS[spec, chip]


def errors(findings) -> list[str]:
    return [f"{f.code}: {f.message}" for f in findings if f.severity == "error"]


def render(report, view: str) -> str:
    """One view of a Report as the terminal shows it."""
    import io

    from inspector.views.printer import make_console, print_view

    out = io.StringIO()
    print_view(report, view, make_console(out))
    return out.getvalue()


def assert_views_clean(report, views) -> None:
    """A correct kernel's Report: no error finding, nothing the analyses could not follow, and
    every view renders."""
    assert errors(report.findings) == []
    assert not [f for f in report.findings if f.code == "analysis-failed"], report.findings
    for view in views:
        assert render(report, view).strip()


def assert_entry_clean(spec: str, chip: str, views) -> None:
    """A held-out corpus entry on one chip: every view clean, a Pallas kernel found; on the CPU the
    Report serialises, on a TPU libtpu compiled it and Mosaic saw a kernel."""
    import json

    r = shared_report(spec, chip)
    if chip != "cpu":
        assert r.stages.compile_error is None, r.stages.compile_error
    assert_views_clean(r, views)
    assert r.pallas, "every entry launches a Pallas kernel"
    if chip == "cpu":
        json.dumps(r.to_dict(texts=("jaxpr", "stablehlo", "hlo", "mosaic")), default=str)
    else:
        assert len(r.stages.mosaic) >= 1


class HeldOut:
    """A held-out round's vendored kernels (tests/data/<folder>/): one entry per INSPECT name."""

    def __init__(self, folder: str):
        from inspector.compilation.user_files import load_module

        self.corpus = DATA / folder
        self.files = sorted(self.corpus.glob("*.py"))
        self.entries = [f"{path.relative_to(ROOT)}:{name}" for path in self.files
                        for name in load_module(str(path)).INSPECT]
        self.names = {spec.rsplit(":", 1)[1]: spec for spec in self.entries}

    def assert_vendored(self, files: int, entries: int, source: str = "https://github.com/",
                        licences: dict[str, str] | None = None) -> None:
        """So many files and entries, each file naming its source (a link at a commit) and its
        licence up top: Apache, or as ``licences`` says per file name ("MIT", "BSD")."""
        assert (len(self.files), len(self.entries)) == (files, entries)
        for path in self.files:
            head = path.read_text()[:3000]
            assert source in head and "/blob/" in head, path.name
            found = ("Apache" if "Apache License" in head else "MIT" if "MIT License" in head else
                     "BSD" if "BSD" in head and "Redistribution and use" in head else None)
            assert found == (licences or {}).get(path.name, "Apache"), (path.name, found)


TRUTH_KINDS = ("agree", "undecided", "short", "false error")


@functools.cache
def _recorded_estimates() -> dict:
    """tests/data/vmem_estimates.json, read once a session, not once per truth file."""
    import json

    return json.loads((DATA / "vmem_estimates.json").read_text())


def estimate_against_truth(name: str) -> list[tuple[dict, bool | None, int]]:
    """Each VMEM row of tests/data/<name> (libtpu's verdicts) beside the estimate's verdict on its
    chip, as `check --estimate-only` gives it, and the tightest limit among its kernels: as recorded
    in tests/data/vmem_estimates.json, which tests/test_vmem_estimates.py recomputes row by row and
    holds to the rules (so the rows are traced once in the suite, not once per test that reads
    them). Rows whose compile failed for another reason than VMEM say nothing about the estimate
    and are left out."""
    import json
    from importlib import metadata

    truth = json.loads((DATA / name).read_text())
    assert truth["libtpu"] == metadata.version("libtpu"), f"{name} was made with another libtpu: compile the rows again"
    recorded = _recorded_estimates()[name]
    assert len(recorded) == len(truth["rows"]), f"{name}: record its estimates (tests/data/make_vmem_estimates.py)"
    found = []
    for r, e in zip(truth["rows"], recorded, strict=True):
        assert (e["target"], e["chip"], e["params"]) == (r["target"], r["chip"], r["params"]), (name, r)
        if r["compiler_fits"] or "VMEM" in (r["compiler_message"] or ""):
            found.append((r, e["fits"], min((b["limit"] for b in e["budgets"]), default=0)))
    return found


def truth_kind(estimate: bool | None, libtpu_fits: bool) -> str:
    """One of TRUTH_KINDS: the estimate agrees, cannot decide, says "fits" where libtpu runs out
    (short), or "does not fit" where libtpu fits (a false error)."""
    return ("agree" if estimate == libtpu_fits else "undecided" if estimate is None else
            "short" if estimate else "false error")


@functools.lru_cache(maxsize=None)
def truth_outcome(name: str) -> tuple[list[dict], dict[str, list]]:
    """The VMEM rows of tests/data/<name>, and per TRUTH_KINDS the rows of that kind as
    (kernel, args, params, chip)."""
    found = estimate_against_truth(name)
    outcome: dict[str, list] = {kind: [] for kind in TRUTH_KINDS}
    for r, estimate, _ in found:
        outcome[truth_kind(estimate, r["compiler_fits"])].append(
            (r["target"].rsplit(":", 1)[1], r["args"], r["params"], r["chip"]))
    return [r for r, _, _ in found], outcome


def assert_truth_outcome(name: str, rows: int, refused: int, undecided: list[tuple], agree: int) -> None:
    """tests/data/<name> holds ``rows`` VMEM rows, ``refused`` of them refused by libtpu; the estimate
    recomputed now is never wrong on them, undecided on exactly ``undecided`` and agrees on ``agree``."""
    found, outcome = truth_outcome(name)
    assert len(found) == rows and sum(not r["compiler_fits"] for r in found) == refused
    assert outcome["short"] == [] and outcome["false error"] == [], outcome
    assert sorted(map(repr, outcome["undecided"])) == sorted(map(repr, undecided))
    assert len(outcome["agree"]) == agree, {k: len(v) for k, v in outcome.items()}


def lines_of_function(path: str, name: str) -> range:
    import ast

    tree = ast.parse((ROOT / path).read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    return range(node.lineno, node.end_lineno + 1)


@pytest.fixture
def cli(capsys, monkeypatch):
    """The CLI in this process: (code, stdout, stderr). It shares the session's compile cache
    (a compile another test made is a hit here); a test about the cache sets its own
    INSPECTOR_CACHE_DIR (monkeypatch.setenv) after taking this fixture."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", SESSION_CACHE)

    from inspector.cli import main

    def run(*argv: str):
        code = main(list(argv), isolate=False)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def cli_run(capsys, monkeypatch):
    """`inspector ARGS` through cli.main in this process, as run_cli gives it (a CompletedProcess:
    returncode, stdout, stderr; COLUMNS=100, no colour; ``env`` over this process's, ``cwd``),
    without the two fresh Pythons that import jax. For the tests about what the CLI prints and
    returns; run_cli stays for those about the process itself (signals, a closed pipe, what the
    user's code prints, the start-up)."""
    from inspector.cli import main

    def run(*args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
        with monkeypatch.context() as m:
            m.chdir(cwd)
            for name, value in {"NO_COLOR": "1", "COLUMNS": "100", **(env or {})}.items():
                m.setenv(name, value)
            capsys.readouterr()
            code = main(list(args), isolate=False)
            out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["inspector", *args], code, out, err)

    return run


@pytest.fixture
def run_cli():
    """Run `python -m inspector ARGS` in a subprocess; returns CompletedProcess (text). Where the
    process is not what is tested, cli_run gives the same in this process."""

    def run(*args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
        full_env = dict(os.environ, NO_COLOR="1", COLUMNS="100", **(env or {}))
        return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True, text=True,
                              cwd=cwd, env=full_env, timeout=600)

    return run


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its own hook)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`-n 2 --dist loadgroup`, as .ci/test runs): a test file is one unit of
    work unless its tests say otherwise (@pytest.mark.xdist_group) or ``_unit`` splits it, so what
    a file's tests share (module-level memos of traced kernels and Reports, module fixtures, the
    order within the file) is made once, on one worker, as in a serial run. And the tests that
    start `python -m inspector` (the run_cli fixture) are marked `process`, so the fast tier can
    leave them out."""
    process = pytest.mark.process
    for item in items:
        if "run_cli" in getattr(item, "fixturenames", ()):
            item.add_marker(process)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_unit(item)))
        if _is_fast(item):
            item.add_marker(pytest.mark.fast)
    # the longest units first (measured: BENCHMARKS.md, "The test suite's time"), so that no worker
    # starts one of them when the other has nothing left
    items.sort(key=_rank)


def _rank(item) -> int:
    return next((i for i, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)), len(LONG_FIRST))


# The files whose tests share state mostly per corpus entry (its Report, compile and diff, memoised
# in the process): a unit per entry, so that one file's minutes are not one worker's tail; their
# other tests are the file's unit. A round's own file that reads an entry's Report again
# (test_corpus_model_kernels.py, test_pallas_nested_pipelines.py) takes its compile from the
# run's cache.
SPLIT_BY_ENTRY = ("tests/test_corpus.py", "tests/test_corpus_heldout.py")
# The files whose tests share only what the process memoises (the UI's few small compiles, made
# again once on the other worker): a unit per test function.
SPLIT_BY_FUNCTION = ("tests/test_tui.py",)


def _unit(item) -> str:
    """The xdist group of a test: its file, or a finer unit (a docs command, a corpus entry, a
    function of test_tui.py) where what its file's tests share is per that unit."""
    file, _, rest = item.nodeid.partition("::")
    params = item.callspec.params if hasattr(item, "callspec") else {}
    if item.nodeid.startswith("tests/test_docs.py::test_every_command_runs"):
        # a unit per command; a command two pages show (tune's, in README and tune.md) one unit,
        # so the second is tune's journal hit, not the same sweep on the other worker meanwhile
        return "docs: " + re.sub(r"[\[\]@]", "_", params["command"])  # xdist reads a "]" or "@" in a name as its own
    entry = params.get("entry", params.get("spec"))
    if file in SPLIT_BY_ENTRY and isinstance(entry, str):
        return f"{file} {entry}"
    if file in SPLIT_BY_FUNCTION:  # no "::" in a group's name: syrupy reads the node id's last "::" part as the test
        return f"{file} {rest.split('[', 1)[0]}"
    return file


# Longest first, by the serial profile (BENCHMARKS.md): a unit under none of these comes after them,
# in file order.
LONG_FIRST = ("tests/test_vmem_estimates.py::test_estimate_unchanged_on_truth_rows", "tests/test_default_target.py",
              "tests/test_docs.py::test_every_command_runs", "tests/test_corpus.py", "tests/test_corpus_heldout.py",
              "tests/test_corpus_model_kernels.py",
              "tests/test_fusions.py", "tests/test_tui.py", "tests/test_kernels.py",
              "tests/test_pallas_nested_pipelines.py", "tests/test_diff.py", "tests/test_vmem_rolled_loops.py",
              "tests/test_libtpu_time.py", "tests/test_fix.py", "tests/test_layering.py",
              "tests/test_corpus_levanter_pallasbench.py")
# Files the fast tier leaves out whole (measured at a minute or more of not-slow, not-libtpu
# work each: truth-row traces, kernels run against their references, the UI under its pilot),
# and one test of each kind it would otherwise never run.
FAST_LEAVES_OUT = ("tests/test_vmem_", "tests/test_tui", "tests/test_corpus", "tests/test_default_target.py",
                   "tests/test_docs.py::test_every_command_runs", "tests/test_output_reads.py", "tests/test_layering.py",
                   "tests/test_pallas_nested_pipelines.py", "tests/test_compat.py")
FAST_ONE_OF_EACH = (
    "tests/test_vmem_estimates.py::test_estimate_unchanged_on_truth_rows[vmem_truth_checks.json]",  # truth rows traced
    "tests/test_tui.py::test_opens_before_the_compile_and_fills_in",  # the UI under Textual's pilot
    "tests/test_tui.py::test_esc_when_idle_keeps_the_worker_and_quit_ends_it_quietly",  # the UI's worker process
    "tests/test_cli.py::test_overview_json_shape",  # a verb's output
    "tests/test_bad_inputs.py::test_export_to_dev_stdout_keeps_stdout_json",  # a real `python -m inspector`
    "tests/test_docs.py::test_every_command_runs[targets.md:50]",  # a docs command
    "tests/test_pallas.py::test_check_cli_exit_codes_and_json",  # a libtpu compile
    "tests/test_diff.py::test_json_and_exit_codes",  # kernels in Pallas interpret mode
)


def _is_fast(item) -> bool:
    if item.nodeid in FAST_ONE_OF_EACH:
        return True
    if any(item.get_closest_marker(m) for m in ("slow", "libtpu", "process", "tpu")):
        return False
    return not item.nodeid.startswith(FAST_LEAVES_OUT)


@pytest.fixture(scope="session", autouse=True)
def _libtpu_children_kept():
    """libtpu's dump children (inspector/libtpu/runner.py) stay between the time estimates of one
    test process, as in a tuner's worker: a child's start (jax's import, libtpu's) cost about a
    second of CPU, a third of an estimate's (BENCHMARKS.md, "The fourth round"). One estimate's set
    of children stays (three, 0.4-0.7 GiB apiece; a child that reads other flags or environment is
    another); a test about the children's own lifetime opts out with ``runner.fresh_sessions()``."""
    from inspector.libtpu.runner import kept_sessions

    with kept_sessions(limit=3):
        yield


@pytest.fixture(autouse=True)
def _dot_may_start():
    """Each test may start Graphviz's dot: a Ctrl-C test before it in this process stopped every later
    one (graphviz_run.kill_all) until a drawing allows them again, which a test of layout() alone
    does not make."""
    from inspector.hlo.graphviz_run import allow_runs

    allow_runs()


@pytest.fixture(autouse=True)
def _chip_tests_need_a_chip(request):
    """@pytest.mark.tpu: the test runs programs on an attached TPU; without one it is skipped."""
    if request.node.get_closest_marker("tpu"):
        from inspector.compilation.backends import attached_chip

        if attached_chip() is None:
            pytest.skip("needs a TPU attached to this machine (a TPU VM)")


@pytest.fixture(autouse=True)
def _libtpu_marker_is_honest(request, monkeypatch):
    """A test that builds a TPU backend in this process must carry @pytest.mark.libtpu, so that
    `-m "not libtpu"` really runs without libtpu compiles."""
    if request.node.get_closest_marker("libtpu"):
        return
    from inspector.jax_internals import tpu_topology

    def refuse(topology):
        raise AssertionError(f"this test compiles for a TPU ({topology}): mark it @pytest.mark.libtpu")

    monkeypatch.setattr(tpu_topology, "tpu_mesh", refuse)


# ----------------------------------------------------------------- the terminal UI under Textual's pilot

@pytest.fixture
def worker_in_process(monkeypatch):
    """The UI's worker on a thread of this process (inspector/remote.py, INSPECTOR_WORKER=thread),
    not a child Python that imports jax: for the UI's tests where the child is not what is tested
    (killing it, its log, the stages arriving while it compiles need the real one). A compile for
    a TPU then happens in this process: such a test is marked libtpu."""
    monkeypatch.setenv("INSPECTOR_WORKER", "thread")


async def opened(pilot):
    """Until the tabs after the overview are mounted (just after the first frame) and the load began."""
    while not pilot.app.tabs_ready:
        await pilot.pause(0.01)


async def loaded(pilot):
    """Until what the app asked of its worker (the load, a diff, a compare) has arrived."""
    await opened(pilot)
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def until(pilot, condition, seconds: float = 60.0) -> None:
    """Until ``condition()`` holds (a ticker's repaint, say), failing after ``seconds``: a fixed
    pause is too short on a loaded machine."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    assert condition(), f"not so after {seconds:.0f} s"
