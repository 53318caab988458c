"""inspector tune without compiling: the candidates, the ranking, the tuning table, the journal's
file signatures, the command line's usage errors (tests/test_tune_tpu.py compiles)."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from inspector.base.errors import UsageError
from inspector.tuning import fingerprint
from inspector.tuning.candidates import TunePlan, candidates, default_params, parse_grid, parse_sets, swept_values
from inspector.tuning.model import FAILED, NOT_RUN, PRUNED, RANKED, REFUSED, UNTIMED, TuneResult, TuneRow
from inspector.tuning.rank import rank_all, rank_rows
from inspector.tuning.table import lookup, read_table, update_table


def _plan(**choices):
    defaults = {name: values[0] for name, values in choices.items()}
    return TunePlan(spec="k.py:mm", choices=choices, defaults={**defaults, "flag": False}, takes=["a", "b", *choices, "flag"], shapes=[("f32[8]", None)])


def test_grid_values_are_typed_and_repeats_dropped():
    assert parse_grid(["bm=128,256,128", "flag=true", "name=x"]) == {"bm": [128, 256], "flag": [True], "name": ["x"]}
    assert parse_sets(["bk=512"]) == {"bk": 512}
    for bad in (["bm"], ["bm="], ["=128"]):
        with pytest.raises(UsageError, match="--grid"):
            parse_grid(bad)


def test_grid_replaces_inspects_list_and_set_fixes():
    plan = _plan(bm=[256, 128], bk=[512, 256])
    values = swept_values(plan, parse_grid(["bm=64,512"]), {"bk": 512})
    assert values == {"bm": [64, 512]}
    with pytest.raises(UsageError, match="takes no parameter 'bq'"):
        swept_values(plan, {"bq": [1]}, {})
    with pytest.raises(UsageError, match="bm takes an int"):
        swept_values(plan, {"bm": ["big"]}, {})
    with pytest.raises(UsageError, match="nothing to sweep"):
        swept_values(_plan(), {}, {})


def test_the_default_is_swept_even_when_the_grid_leaves_it_out():
    plan = _plan(bm=[256, 128])
    values = swept_values(plan, {"bm": [64, 128]}, {})
    found = candidates(values, default_params(plan, values, {}))
    assert found == [({"bm": 64}, False), ({"bm": 128}, False), ({"bm": 256}, True)]
    inside = candidates({"bm": [256, 128]}, {"bm": 256})
    assert inside == [({"bm": 256}, True), ({"bm": 128}, False)]
    with pytest.raises(UsageError, match="candidates"):
        candidates({f"p{i}": list(range(8)) for i in range(5)}, {})


def _row(status, seconds=None, **params):
    return TuneRow(shape="f32[8]", chip="tpu-v5e", params=params, status=status, estimated_seconds=seconds)


def test_ranking_orders_by_time_then_by_status():
    rows = [_row(PRUNED, bm=1), _row(RANKED, 3e-3, bm=2), _row(FAILED, bm=3), _row(RANKED, 1e-3, bm=4),
            _row(REFUSED, bm=5), _row(RANKED, 3e-3, bm=6), _row(NOT_RUN, bm=7), _row(UNTIMED, bm=8)]
    rows[5] = dataclasses.replace(rows[5], default=True)
    ranking = rank_rows("tpu-v5e", rows)
    assert [r.params["bm"] for r in ranking.rows] == [4, 2, 6, 8, 5, 1, 3, 7]  # ties keep the sweep's order
    assert [r.rank for r in ranking.rows] == [1, 2, 3, None, None, None, None, None]
    assert ranking.best.params == {"bm": 4} and ranking.set_line == "--set bm=4"
    assert ranking.rows[1].ratio == pytest.approx(3.0) and ranking.default_ratio == pytest.approx(3.0)
    assert ranking.count(RANKED) == 3
    nothing = rank_rows("tpu-v5e", [_row(PRUNED, bm=1)])
    assert nothing.best is None and nothing.set_line is None


def test_measured_rows_rank_first_by_device_time_in_a_new_result(monkeypatch):
    """tune --measure: the rows run on the chip rank first by their device time, the other ranked
    rows after them by estimate (ratio to the measured best's estimate); the default follows its
    row; the result measured is a new one, the sweep's own left as it was."""
    import inspector.tuning.measured as measured

    rows = [dataclasses.replace(_row(RANKED, t, bm=bm), default=bm == 2) for bm, t in ((1, 1e-3), (2, 2e-3), (3, 3e-3))]
    swept = TuneResult(target="k.py:mm", swept=["bm"], fixed={}, defaults={"bm": 2},
                       shapes=rank_all(["f32[8]"], ["tpu-v5e"], rows + [_row(PRUNED, bm=9)]), counts={})
    monkeypatch.setattr(measured, "run_isolated", lambda fn, spec, chip, jobs, env=None: [5e-3, 1e-3][:len(jobs)])
    monkeypatch.setattr(measured.environment, "chip_env", lambda: {})
    result = measured.measure_rankings(swept, "k.py:mm", {"f32[8]": None}, {}, 2, "tpu-v5e")
    [ranking] = result.shapes[0].chips
    assert [(r.params["bm"], r.rank, r.ratio) for r in ranking.rows] == [(2, 1, 1.0), (1, 2, 5.0), (3, 3, 1.5), (9, None, None)]
    assert ranking.best.params == ranking.default.params == {"bm": 2} and result.measured_on == "tpu-v5e"
    assert [r.measured_seconds for r in swept.rows] == [None] * 4 and swept.measured_on is None


def _result(shape="f32[8]", best=1e-3, versions=None):
    rows = [TuneRow(shape=shape, chip="tpu-v5e", params={"bm": 128}, status=RANKED, estimated_seconds=best * 2, estimate_source="libtpu"),
            TuneRow(shape=shape, chip="tpu-v5e", params={"bm": 256}, status=RANKED, estimated_seconds=best, estimate_source="libtpu"),
            TuneRow(shape=shape, chip="tpu-v6e", params={"bm": 128}, status=PRUNED)]
    return TuneResult(target="k.py:mm", swept=["bm"], fixed={"bk": 512}, defaults={"bm": 128}, shapes=rank_all([shape], ["tpu-v5e", "tpu-v6e"], rows),
                      counts={"total": 3}, versions=versions or {"jax": "0.10.2", "libtpu": "0.0.42.1"})


def test_tuning_table_adds_a_shape_and_loads_at_run_time(tmp_path):
    path = str(tmp_path / "table.json")
    update_table(path, _result("f32[8]"))
    update_table(path, _result("f32[16]", best=5e-3))
    table = json.loads(open(path).read())
    assert set(table["entries"]) == {"f32[8]", "f32[16]"}
    entry = table["entries"]["f32[8]"]["tpu-v5e"]
    assert entry["params"] == {"bk": 512, "bm": 256} and entry["estimated_seconds"] == 1e-3
    assert entry["versions"]["libtpu"] == "0.0.42.1" and entry["candidates"] == 2 and entry["ranked"] == 2
    assert "tpu-v6e" not in table["entries"]["f32[8]"]  # nothing ranked there: no entry
    assert lookup(path, "f32[16]", "tpu-v5e") == {"bk": 512, "bm": 256}
    assert lookup(path, "f32[8]", "TPU v5 lite") == {"bk": 512, "bm": 256}  # jax's device kind works too
    assert lookup(path, "f32[32]", "tpu-v5e", {"bm": 64}) == {"bm": 64}
    update_table(path, _result("f32[8]", best=9e-3))  # swept again: replaced
    assert json.loads(open(path).read())["entries"]["f32[8]"]["tpu-v5e"]["estimated_seconds"] == 9e-3
    assert [p.name for p in tmp_path.iterdir()] == ["table.json"]  # no temporary file left
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(UsageError, match="not a tuning table"):
        read_table(str(tmp_path / "other.json"))


def test_result_json_and_html():
    result = _result()
    data = result.to_dict()
    assert data["shapes"][0]["chips"][0]["set_line"] == "--set bm=256" and data["ok"] is False  # v6e: none ranked
    json.dumps(data)
    page = result._repr_html_()
    assert page.count("height: 10px") == 2 and "--set bm=256" in page  # a bar per ranked row


def test_file_signatures_follow_edits(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("x = 1\n")
    files = [(str(path), fingerprint.signature(str(path)))]
    assert fingerprint.unchanged(files)
    path.write_text("x = 2\n")
    assert not fingerprint.unchanged(files)
    assert fingerprint.signature(str(tmp_path / "gone.py")) == "-"
    assert any(p.endswith(os.path.join("inspector", "tuning", "fingerprint.py")) for p in fingerprint.loaded_files())
    assert not any(p.endswith(os.path.join("", "json", "__init__.py")) for p in fingerprint.loaded_files())
    import pytest as installed  # a package of site-packages: signed by size and time

    assert os.path.realpath(installed.__file__) in fingerprint.loaded_files()


def _cli(*args, env=None):
    full = dict(os.environ, NO_COLOR="1", COLUMNS="120", **(env or {}))
    return subprocess.run([sys.executable, "-m", "inspector", "tune", *args], capture_output=True, text=True,
                          cwd=ROOT, env=full, timeout=300)


@pytest.mark.parametrize("args, says", [
    (["--target", "cpu"], "give TPU targets"),
    (["--target", "tpu-v5e:2x2"], "not a slice"),
    (["--grid", "bm"], "--grid 'bm'"),
    (["--workers", "0"], "give 1 or more"),
    (["--args", "bf16[8,"], "bf16[8,"),
])
def test_usage_errors_are_one_line(args, says):
    done = _cli("tests/data/tune_kernels.py:mm", *args)
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_ray_missing_is_one_line(tmp_path):
    fake = tmp_path / "ray"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    done = _cli("tests/data/tune_kernels.py:mm", "--ray", "127.0.0.1:6379", env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 2 and "pip install 'ray>=2.9'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_table_that_is_not_one_is_refused_before_the_sweep(tmp_path):
    other = tmp_path / "notes.json"
    other.write_text("[1, 2]")
    done = _cli("tests/data/tune_kernels.py:mm", "--table", str(other))
    assert done.returncode == 2 and "not a tuning table" in done.stderr and other.read_text() == "[1, 2]"


def test_ray_address_that_does_not_answer_is_one_line():
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = _cli("tests/data/tune_kernels.py:mm", "--ray", f"127.0.0.1:{port}")
    assert done.returncode == 2 and f"cannot reach the Ray cluster at 127.0.0.1:{port}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_row_made_by_other_inspector_code_is_a_miss(monkeypatch):
    """A row holds the estimate's verdict (a pruned candidate) and figures read from libtpu's output:
    code that changed them between commits of one version number must not be answered from it."""
    from inspector.tuning import store

    parts = lambda: store.request_parts("samples/matmul.py:tiled", "tpu-v5e", {})
    before = store.row_key("module", "tpu-v5e", {}), store.journal_key(parts(), None, {}, "")
    assert before == (store.row_key("module", "tpu-v5e", {}), store.journal_key(parts(), None, {}, ""))
    monkeypatch.setattr(store, "code_fingerprint", lambda: "another commit")
    after = store.row_key("module", "tpu-v5e", {}), store.journal_key(parts(), None, {}, "")
    assert after[0] != before[0] and after[1] != before[1]


def test_measure_runs_the_candidates_the_estimate_could_not_rank(monkeypatch):
    """Paged attention's page loop is counted by no estimate: its rows are untimed, and
    tune --measure runs them on the chip and ranks them by device time."""
    import inspector.tuning.measured as measured

    rows = [_row(UNTIMED, bm=bm) for bm in (1, 2, 3)]
    swept = TuneResult(target="k.py:mm", swept=["bm"], fixed={}, defaults={"bm": 1},
                       shapes=rank_all(["f32[8]"], ["tpu-v5e"], rows), counts={})
    monkeypatch.setattr(measured, "run_isolated", lambda fn, spec, chip, jobs, env=None: [3e-3, 1e-3, 2e-3][:len(jobs)])
    monkeypatch.setattr(measured.environment, "chip_env", lambda: {})
    [ranking] = measured.measure_rankings(swept, "k.py:mm", {"f32[8]": None}, {}, 8, "tpu-v5e").shapes[0].chips
    assert [(r.params["bm"], r.rank) for r in ranking.rows] == [(2, 1), (3, 2), (1, 3)]
    assert ranking.best.params == {"bm": 2}


def test_the_best_line_after_measuring_untimed_candidates_gives_the_chips_figures(monkeypatch):
    """On the v5e: "best: --set pages_per_compute_block=16  (-); the default ... is untimed", though
    both had been measured; now the measured time and the default's rank by it."""
    import inspector.tuning.measured as measured
    from inspector.views.tune import best_lines

    rows = [dataclasses.replace(_row(UNTIMED, bm=bm), default=bm == 2, reason="a loop") for bm in (1, 2, 3)]
    swept = TuneResult(target="k.py:mm", swept=["bm"], fixed={}, defaults={"bm": 2},
                       shapes=rank_all(["f32[8]"], ["tpu-v5e"], rows), counts={})
    monkeypatch.setattr(measured, "run_isolated", lambda fn, spec, chip, jobs, env=None: [3e-3, 2e-3, 1e-3][:len(jobs)])
    monkeypatch.setattr(measured.environment, "chip_env", lambda: {})
    [ranking] = measured.measure_rankings(swept, "k.py:mm", {"f32[8]": None}, {}, 8, "tpu-v5e").shapes[0].chips
    line = best_lines(ranking).plain
    assert "best: --set bm=3  (1 ms measured)" in line and "the default (bm=2) is rank 2 of 3, 2.00x" in line, line
