"""`inspector tune` (its tuning table, search space, Ray, workers and their folders, Ctrl-C) and the
graph export of a plain model (Graphviz's faults, its budgets and flags) at their faults: each
defect issue 30's audit found, as a test that fails without its fix (the list, with the cases
that were fine, is in the closing note). Nothing here compiles for a TPU; the graph tests lay out
a stored HLO's graph, with fake `dot` programs on PATH for the faults of Graphviz.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import tempfile
import threading
import time
import types

import pytest

from conftest import DATA, ROOT

from inspector.base.chips import get_chip
from inspector.base.errors import UsageError
from inspector.hlo.fusions import analyse_fusions
from inspector.hlo.graph import build_dot
from inspector.hlo.graph_model import build_graph
from inspector.tuning.model import PRUNED, RANKED, TuneResult, TuneRow
from inspector.tuning.rank import rank_all

FUNCS = str(DATA / "funcs.py")
TUNE = "tests/data/tune_kernels.py:mm"


def one_line(err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("inspector: ") and needle in lines[0], err
    assert "Traceback" not in err


# ----------------------------------------------------------------------------- the graph: Graphviz's faults


@pytest.fixture(scope="module")
def step3():
    """A 3-layer training step compiled by libtpu (stored HLO): 100+ kernels in groups."""
    text = gzip.decompress((DATA / "hlo" / "tpu_step3.hlo.gz").read_bytes()).decode()
    return analyse_fusions(text, get_chip("tpu-v5e"), None)


def _fake_dot(tmp_path, monkeypatch, script: str) -> None:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    dot = folder / "dot"
    dot.write_text("#!/bin/sh\n" + script + "\n")
    dot.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


def _small_graph():
    a = analyse_fusions((DATA / "hlo" / "tpu_small.hlo").read_text(), get_chip("tpu-v5e"), None)
    graph, summary = build_dot(a, "small")
    return summary.graph, graph.source


def test_a_dot_wrapper_that_hangs_is_killed_within_the_budget(tmp_path, monkeypatch):
    """A `dot` that is a wrapper script (conda's, snap's) forks the real one; killing only the
    wrapper left the child holding the pipe, and the export waited forever past --layout-budget."""
    from inspector.hlo.graph_render import layout

    marker = f"{time.time():.6f}"  # this test's own sleep, to look for afterwards
    _fake_dot(tmp_path, monkeypatch, f"sleep 1000 # {marker}\nsleep 1000")
    kg, source = _small_graph()
    done: list = []
    worker = threading.Thread(target=lambda: done.append(layout(kg, source, budget_s=1.0)), daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(30)
    assert done, "the layout did not come back in 30 s with a budget of 1 s"
    assert time.monotonic() - started < 15
    assert done[0].engine == "ranked" and "did not finish in" in done[0].note and "--layout-budget" in done[0].note
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == [], "the wrapper's child outlived the export"


@pytest.mark.parametrize("script, why", [
    ("kill -9 $$", "killed by SIGKILL"),
    ("echo garbage", "it wrote 0 SVG drawings of 1"),
    ("echo 'Error: syntax error in line 1' >&2; exit 1", "Error: syntax error in line 1"),
    ("exit 3", "exit code 3"),
])
def test_a_dot_that_fails_says_why_and_not_to_wait_longer(tmp_path, monkeypatch, script, why):
    from inspector.hlo.graph_render import layout

    _fake_dot(tmp_path, monkeypatch, script)
    kg, source = _small_graph()
    out = layout(kg, source, budget_s=10)
    assert out.engine == "ranked" and f"failed ({why})" in out.note, out.note
    assert "--layout-budget" not in out.note and "inspector doctor --svg" in out.note  # time would not help
    assert "failed: -9" not in out.note and "failed: 0" not in out.note


def test_a_budget_under_a_second_is_not_said_as_0_s(tmp_path, monkeypatch, step3):
    from inspector.hlo.graph_render import layout
    from inspector.hlo.graphviz_run import seconds_text

    assert seconds_text(0.001) == "0.001 s" and seconds_text(0.25) == "0.25 s" and seconds_text(8) == "8 s"
    graph, summary = build_dot(step3, "step", max_nodes=1000)
    out = layout(summary.graph, graph.source, budget_s=0.001)
    assert "0.001 s" in out.note and " 0 s" not in out.note, out.note


def test_dot_not_installed_says_how_to_install_not_to_wait(monkeypatch):
    from inspector.hlo.graph_render import layout

    monkeypatch.setenv("PATH", "/nonexistent")
    kg, source = _small_graph()
    out = layout(kg, source, budget_s=5)
    assert "not installed" in out.note and "apt-get install graphviz" in out.note and "--layout-budget" not in out.note


# ----------------------------------------------------------------------------- the graph: its budgets and flags


@pytest.mark.parametrize("max_nodes", [1, 8])
def test_a_node_budget_below_the_drawings_floor_is_said_never_claimed_met(step3, max_nodes):
    kg = build_graph(step3, "step", max_nodes=max_nodes)
    drawn = len(kg.nodes) + (1 if kg.output_node else 0)
    assert drawn > max_nodes
    assert not any("to fit --max-nodes" in n for n in kg.notes), kg.notes
    assert any(f"{drawn} nodes drawn, more than --max-nodes {max_nodes}" in n for n in kg.notes), kg.notes


def test_a_node_budget_that_is_met_still_says_fit(step3):
    kg = build_graph(step3, "step", max_nodes=12)  # 16 groups: merged, and they fit
    assert len(kg.nodes) + (1 if kg.output_node else 0) <= 12
    assert any("to fit --max-nodes" in n for n in kg.notes) and not any("more than --max-nodes" in n for n in kg.notes)


@pytest.mark.parametrize("argv, needle", [
    (["--svg", "{o}/g.svg", "--max-nodes", "0"], "--max-nodes: '0': give 1 or more"),
    (["--svg", "{o}/g.svg", "--expand", ""], "--expand '': give a group's name"),
    (["--svg", "{o}/g.svg", "--expand", "  "], "give a group's name"),
    (["--json", "{o}/r.json", "--expand", "layer7"], "--expand opens groups of the drawing: give --svg, --dot or --html"),
])
def test_export_flags_that_cannot_work_are_usage_lines_before_the_compile(cli, tmp_path, argv, needle):
    code, out, err = cli("export", f"{FUNCS}:mlp", *[a.format(o=tmp_path) for a in argv])
    assert code == 2
    one_line(err, needle)
    assert [p.name for p in tmp_path.iterdir()] == ["cache"] or list(tmp_path.iterdir()) == []


def test_dot_missing_refuses_the_svg_only(cli, tmp_path, monkeypatch):
    """Without dot: --svg is refused before the compile, naming it and what --html does instead; the
    HTML page alone is written (it lays its graph out in the page)."""
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = cli("export", f"{FUNCS}:mlp", "--svg", f"{tmp_path}/g.svg", "--html", f"{tmp_path}/g.html")
    assert code == 2
    one_line(err, "so no --svg")
    assert "--html lays its graph out in the page without dot" in err and not (tmp_path / "g.html").exists()
    code, out, err = cli("export", f"{FUNCS}:matmul", "--html", f"{tmp_path}/g.html")
    assert code == 0 and (tmp_path / "g.html").exists() and "lays the graph out itself" in err, err


def test_one_node_is_not_1_nodes():
    from inspector.hlo.graph_render import Drawing

    kg = types.SimpleNamespace(nodes=[object()], output_node=False, collapsed=[])
    assert Drawing(graph=kg, dot="", svg=b"", group_svgs={}, group_graphs={}, notes=[], seconds=0.0).summary == "1 node"  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- tune: the tuning table


def _result(shape="f32[8]", best=1e-3, target="k.py:mm", ranked=True):
    status = RANKED if ranked else PRUNED
    rows = [TuneRow(shape=shape, chip="tpu-v5e", params={"bm": 256}, status=status, estimated_seconds=best if ranked else None,
                    estimate_source="libtpu" if ranked else None)]
    return TuneResult(target=target, swept=["bm"], fixed={}, defaults={"bm": 256}, shapes=rank_all([shape], ["tpu-v5e"], rows), counts={"total": 1},
                      versions={"jax": "0.10.2"})


@pytest.mark.parametrize("content", [
    b'{"schema": 1, "kernel": "k.py:mm", "entries": {"f32[8]": []}}',
    b'{"schema": 1, "kernel": "k.py:mm", "entries": {"f32[8]": {"tpu-v5e": 5}}}',
    b'{"schema": 1, "kernel": "k.py:mm", "entries": {"f32[8]": {"tpu-v5e": {"params": [1]}}}}',
    b"\xff\xfe not text",
])
def test_a_table_of_another_structure_is_refused_not_an_internal_error(tmp_path, content):
    from inspector.tuning.table import lookup, read_table, update_table

    path = tmp_path / "t.json"
    path.write_bytes(content)
    with pytest.raises(UsageError, match="tuning table|not JSON"):
        read_table(str(path))
    with pytest.raises(UsageError):
        update_table(str(path), _result())
    assert path.read_bytes() == content
    assert lookup(str(path), "f32[8]", "tpu-v5e", {"bm": 64}) == {"bm": 64}  # at run time: the default, no crash


def test_a_bad_table_is_refused_by_the_cli_before_the_sweep(cli, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"schema": 1, "kernel": "tune_kernels.py:mm", "entries": {"bf16[8]": []}}')
    code, out, err = cli("tune", TUNE, "--table", str(path))
    assert code == 2
    one_line(err, "not a tuning table of this version")


def test_another_kernels_table_is_refused(cli, tmp_path):
    from inspector.tuning.table import read_table, update_table

    path = tmp_path / "t.json"
    update_table(str(path), _result(target="samples/other.py:flash"))
    before = path.read_text()
    code, out, err = cli("tune", TUNE, "--table", str(path))
    assert code == 2
    one_line(err, "holds the tuning of samples/other.py:flash, not tests/data/tune_kernels.py:mm")
    with pytest.raises(UsageError, match="give each kernel its own table"):
        update_table(str(path), _result(target="k.py:mm"))
    assert path.read_text() == before
    read_table(str(path), "../elsewhere/other.py:flash")  # the same kernel from another folder is fine


def test_a_read_only_table_is_refused_before_the_sweep(cli, tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text('{"schema": 1, "kernel": null, "entries": {}}')
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if str(p) == str(path) and mode == os.W_OK
                        else real(p, mode, *a, **k))  # as a user other than root sees a 0444 file
    code, out, err = cli("tune", TUNE, "--table", str(path))
    assert code == 2
    one_line(err, "the file is read-only")


def test_a_chip_swept_again_without_a_ranked_candidate_loses_its_old_entry(tmp_path):
    from inspector.tuning.table import lookup, update_table

    path = str(tmp_path / "t.json")
    update_table(path, _result("f32[8]"))
    update_table(path, _result("f32[16]"))
    assert lookup(path, "f32[8]", "tpu-v5e") == {"bm": 256}
    update_table(path, _result("f32[8]", ranked=False))  # the kernel changed: nothing ranks for f32[8] now
    table = json.loads(open(path).read())
    assert "f32[8]" not in table["entries"] and "f32[16]" in table["entries"]
    assert lookup(path, "f32[8]", "tpu-v5e", {"bm": 1}) == {"bm": 1}


def test_two_sweeps_writing_one_table_both_land(tmp_path, monkeypatch):
    import inspector.tuning.table as table_mod

    path = str(tmp_path / "t.json")
    real = table_mod.read_table

    def slow_read(*args, **kwargs):  # widen the window between the read and the write
        found = real(*args, **kwargs)
        time.sleep(0.3)
        return found

    monkeypatch.setattr(table_mod, "read_table", slow_read)
    threads = [threading.Thread(target=table_mod.update_table, args=(path, _result(shape))) for shape in ("f32[8]", "f32[16]")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(json.loads(open(path).read())["entries"]) == {"f32[8]", "f32[16]"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # the lock leaves nothing behind


def test_a_table_that_cannot_be_written_after_the_sweep_keeps_the_rows(tmp_path, monkeypatch, capsys):
    from inspector.commands.tune import render_tune
    import inspector.tuning.table as table_mod
    from inspector.tuning.sweep import SweepRequest, _write_table

    path = tmp_path / "t.json"

    def replaced(*args):  # someone wrote another file there while the sweep ran
        raise UsageError(f"--table {path} is not JSON (Expecting value): give a new file or a tuning table")

    monkeypatch.setattr(table_mod, "update_table", replaced)
    result = _result()
    result = _write_table(SweepRequest(spec="k.py:mm", chips=["tpu-v5e"], table=str(path)), result)
    assert result.table is None and result.table_failed and "not written" in result.table_note
    monkeypatch.setenv("NO_COLOR", "1")
    code = render_tune(types.SimpleNamespace(json=False, top=0), result)
    out, err = capsys.readouterr()
    assert code == 2 and "--set bm=256" in out  # the rows are shown
    one_line(err, f"{path} not written")


# ----------------------------------------------------------------------------- tune: the search space


def test_a_grid_given_twice_is_refused():
    from inspector.tuning.candidates import parse_grid

    with pytest.raises(UsageError, match="--grid bm is given twice"):
        parse_grid(["bm=128", "bm=256"])


def test_a_parameter_swept_and_fixed_is_said_as_such(cli):
    code, out, err = cli("tune", TUNE, "--grid", "bm=128,256", "--set", "bm=128")
    assert code == 2
    one_line(err, "--grid bm=... and --set bm=... name the same parameter")
    assert "nothing to sweep" not in err


# ----------------------------------------------------------------------------- tune: Ray


@pytest.mark.parametrize("address", [":", "127.0.0.1:abc", "http://127.0.0.1:8265", "127.0.0.1:99999", ":6379"])
def test_a_malformed_ray_address_is_a_usage_line(cli, address):
    code, out, err = cli("tune", TUNE, "--ray", address)
    assert code == 2
    one_line(err, "give the cluster's HOST:PORT")


def test_rays_connection_noise_is_kept_off_the_terminal(capfd):
    from inspector.tuning.ray_backend import _advice, _stderr_kept

    with _stderr_kept(False) as said:
        os.write(2, b"[gcs_client.cc:210] Failed to get cluster ID: Unauthenticated: InvalidAuthToken\n")
        kept = said()
    assert "InvalidAuthToken" in kept and capfd.readouterr().err == ""
    assert "RAY_AUTH_MODE=token" in _advice(kept) and "ray start --head" in _advice("")


class _FakeRay:
    """What RayPool uses of Ray, for a cluster that is not there."""

    class exceptions:
        RayTaskError = RuntimeError
        RayError = OSError

    def init(self, **kwargs):
        self.kwargs = kwargs

    def cluster_resources(self):
        return {"CPU": 2}

    def shutdown(self):
        pass


def test_rays_messages_never_reach_stdout(monkeypatch, capsys):
    """Ray's driver prints a worker's death ("(raylet) A worker died ...") on stdout, where --json
    must be the only thing."""
    import inspector.tuning.ray_backend as ray_backend

    monkeypatch.setattr(ray_backend, "_import_ray", lambda: _FakeRay())
    with ray_backend.RayPool("auto", str(DATA / "tune_kernels.py") + ":mm"):
        print("\x1b[33m(raylet)\x1b[0m A worker died or was killed while executing a task")
    print("{}")
    assert capsys.readouterr().out == "{}\n"


def test_a_shipped_file_lives_in_a_folder_its_worker_owns(tmp_path, monkeypatch):
    """A Ray task cancelled on Ctrl-C (its worker killed) left inspector-tune-shipped-*; now the
    folder is owned (inspector.base.tempdirs): removed at the worker's exit, swept after a kill."""
    from inspector.base import tempdirs
    from inspector.tuning.ray_backend import _shipped_file

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = _shipped_file("k.py", b"x = 1\n")
    try:
        assert os.path.dirname(path) in tempdirs.owned()
        assert os.path.basename(os.path.dirname(os.path.dirname(path))).startswith("inspector-tune-shipped-")
        assert _shipped_file("k.py", b"x = 1\n") == path  # once per worker process
    finally:
        tempdirs.remove(os.path.dirname(path))
    assert not os.path.exists(path)


def test_a_libtpu_dump_folder_whose_janitor_died_too_is_swept(tmp_path, monkeypatch):
    """Ray kills a cancelled task's worker with all its children (Ctrl-C during `tune --ray`):
    the janitor that would remove libtpu's dump folder dies as well, and the folder stayed for 6
    hours. Now the folder is owned by its process (inspector.base.tempdirs), so the next sweep takes it."""
    import signal
    import sys

    from inspector.base import tempdirs

    code = ("import time;from inspector.libtpu.runner import DumpSession;"
            "s=DumpSession('v5e:1x1',profile=False,bundles=False).__enter__();"
            "print(s.folder,s._janitor.pid,s._proc.pid,flush=True);time.sleep(100)")
    # a temporary folder of its own: another inspector process (the other xdist worker) sweeps the
    # shared one's dead folders, and would take this one before the test looks
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        folder, janitor, child = proc.stdout.readline().split()
        root = os.path.dirname(folder)
        assert os.path.isdir(folder) and os.path.basename(root).startswith("inspector-libtpu-")
        for pid in (int(janitor), int(child), proc.pid):  # all at once, as Ray does
            os.kill(pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    time.sleep(0.3)
    assert os.path.isdir(root)  # nobody left to remove it ...
    tempdirs.sweep()
    assert not os.path.exists(root)  # ... until the next run's sweep


def test_ctrl_c_during_a_sweep_sweeps_the_killed_workers_folders(monkeypatch, tmp_path):
    """Ctrl-C kills the workers with SIGKILL: their folders (libtpu's logs) stayed until some later
    run swept them; now the sweep that was interrupted removes them before it returns."""
    import sys

    import inspector.tuning.sweep as sweep_mod
    from inspector.tuning.candidates import TunePlan
    from inspector.tuning.pool import LocalPool

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    plan = TunePlan(spec="k.py:mm", choices={"bm": [1, 2]}, defaults={"bm": 1}, takes=["x", "bm"], shapes=[("f32[8]", None)])
    monkeypatch.setattr(sweep_mod, "_plan", lambda req, local, budget: plan)
    made: list[str] = []

    def killed_then_interrupted(self, jobs, on_answer, on_died):
        code = ("import os;from inspector.base.tempdirs import new_folder;print(new_folder('tpu-logs'),flush=True);"
                "os.kill(os.getpid(),9)")  # a worker that made its folder, killed
        made.extend(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT).stdout.split())
        assert made and os.path.isdir(made[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalPool, "run", killed_then_interrupted)
    result = sweep_mod.run_sweep(sweep_mod.SweepRequest(spec="k.py:mm", chips=["tpu-v5e"], cache=False))
    assert result.interrupted and result.counts["not-run"] == 2
    assert not os.path.exists(os.path.dirname(made[0]))


def test_more_workers_than_memory_holds_are_not_started_and_it_is_said(monkeypatch, tmp_path):
    """`--workers 64` started 64 processes, each importing jax with a libtpu child (~0.8 GiB each
    measured): on a 24 GiB machine that is the kernel's OOM killer mid-sweep."""
    import inspector.tuning.sweep as sweep_mod
    from inspector.tuning.candidates import TunePlan
    from inspector.tuning.pool import LocalPool

    monkeypatch.setattr(sweep_mod, "_available_bytes", lambda: 3 * (1 << 30) + 5)
    assert sweep_mod.fit_workers(2) == (2, None)
    assert sweep_mod.fit_workers(64)[0] == 3
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    # more candidates than memory holds workers (with fewer, no note: tests/test_tune_bad_inputs.py)
    plan = TunePlan(spec="k.py:mm", choices={"bm": [1, 2, 3, 4]}, defaults={"bm": 1}, takes=["x", "bm"], shapes=[("f32[8]", None)])
    monkeypatch.setattr(sweep_mod, "_plan", lambda req, local, budget: plan)
    sizes = []
    monkeypatch.setattr(LocalPool, "run", lambda self, jobs, on_answer, on_died: sizes.append(self.size))
    result = sweep_mod.run_sweep(sweep_mod.SweepRequest(spec="k.py:mm", chips=["tpu-v5e"], workers=64, cache=False))
    assert sizes == [3]
    assert result.notes == ["--workers 64: 3 started, as many as 3.0 GiB of free memory holds at 1 GiB or more each"]
    from inspector.views.tune import summary

    assert "note: --workers 64: 3 started" in summary(result).plain


@pytest.mark.parametrize("kwargs, needle", [
    ({"grid": {"bm": []}}, "grid['bm'] is an empty list"),  # swept the default alone, silently
    ({"workers": 0}, "workers=0: give a whole number of 1 or more"),  # the cores, silently
    ({"workers": 2.5}, "workers=2.5"),
    ({"table": "{tmp}"}, "it is a folder"),  # swept, then the table was not written
])
def test_the_python_api_refuses_what_the_command_line_refuses(tmp_path, monkeypatch, kwargs, needle):
    import inspector

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    import inspector.tuning.sweep as sweep_mod

    monkeypatch.setattr(sweep_mod, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    kwargs = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(UsageError, match=needle.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        inspector.tune(str(DATA / "tune_kernels.py") + ":mm", **kwargs)


@pytest.mark.parametrize("groups", [False, True])
def test_ctrl_c_while_dot_runs_answers_at_once_and_leaves_no_dot(tmp_path, monkeypatch, groups):
    """dot runs in a session of its own (so a wrapper's children die with it), so the terminal's
    Ctrl-C does not reach it: the drawing kills it, or leaving the thread pool waits out the budget."""
    import signal

    from inspector.hlo.graph_render import draw

    marker = f"{time.time():.6f}"
    _fake_dot(tmp_path, monkeypatch, f"sleep 1000 # {marker}\nsleep 1000")
    analysis = analyse_fusions(gzip.decompress((DATA / "hlo" / "tpu_step3.hlo.gz").read_bytes()).decode(),
                               get_chip("tpu-v5e"), None)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()  # as the terminal's Ctrl-C
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        draw(analysis, "step", max_nodes=12, budget_s=60, groups=groups)
    assert time.monotonic() - started < 10
    time.sleep(0.3)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split() == []
    from inspector.hlo import graphviz_run

    assert not graphviz_run._LIVE


def test_a_resweep_where_nothing_ranks_anywhere_still_removes_the_stale_entry(tmp_path):
    from inspector.tuning.sweep import SweepRequest, _write_table
    from inspector.tuning.table import lookup, update_table

    path = str(tmp_path / "t.json")
    update_table(path, _result("f32[8]"))
    result = _result("f32[8]", ranked=False)
    result = _write_table(SweepRequest(spec="k.py:mm", chips=["tpu-v5e"], table=path), result)
    assert result.table == path and lookup(path, "f32[8]", "tpu-v5e", {"bm": 1}) == {"bm": 1}
    fresh = str(tmp_path / "new.json")  # no file, nothing ranked: nothing written
    result = _result("f32[8]", ranked=False)
    result = _write_table(SweepRequest(spec="k.py:mm", chips=["tpu-v5e"], table=fresh), result)
    assert not os.path.exists(fresh) and "no candidate was ranked" in result.table_note


@pytest.mark.parametrize("field, value", [("estimated_seconds", "fast"), ("status", "best"), ("params", [1]),
                                          ("estimated_seconds", None), ("rank", True), ("notes", "one")])
def test_a_stored_row_of_the_wrong_types_is_a_miss_not_an_internal_error(field, value):
    """A journal entry of the right keys and the wrong types (edited, another version) was served:
    the ranking then raised "internal error: TypeError: unsupported operand type(s) for /"."""
    import dataclasses

    from inspector.tuning.model import sound_row
    from inspector.tuning.sweep import _row

    good = dataclasses.asdict(TuneRow(shape="f32[8]", chip="tpu-v5e", params={"bm": 1}, status=RANKED, estimated_seconds=1e-6, rank=1, ratio=1.0))
    assert sound_row(good) is not None and _row(good, {}) is not None
    bad = dict(good, **{field: value})
    assert sound_row(bad) is None and _row(bad, {}) is None


def test_a_stored_plan_of_the_wrong_types_is_a_miss_not_an_internal_error():
    """The plan's journal entry with lists where pairs belong: "internal error: IndexError"."""
    import dataclasses

    from inspector.tuning.candidates import TunePlan
    from inspector.tuning.sweep import _stored_plan

    good = json.loads(json.dumps(dataclasses.asdict(TunePlan(spec="k.py:mm", choices={"bm": [1, 2]}, defaults={"bm": 1}, takes=["x", "bm"],
                                                             shapes=[("f32[8]", None)], closure=[("/k.py", "sig")]))))
    plan = _stored_plan(good)
    assert plan is not None and plan.shapes == [("f32[8]", None)] and plan.closure == [("/k.py", "sig")]
    for field, value in [("choices", [1]), ("shapes", "x"), ("shapes", []), ("closure", [["a"]]), ("takes", "bm"),
                         ("defaults", None)]:
        assert _stored_plan(dict(good, **{field: value})) is None, field
