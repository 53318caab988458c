"""INSPECTOR_CORES: the cores the inspector's parallel compiles and tune workers take."""
import os

import pytest

from inspector.base import cores
from inspector.base.errors import UsageError


def test_all_the_cpus_unless_the_variable_says_fewer(monkeypatch):
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.delenv("INSPECTOR_CORES", raising=False)
    assert cores.available() == cpus
    monkeypatch.setenv("INSPECTOR_CORES", "1")
    assert cores.available() == 1
    monkeypatch.setenv("INSPECTOR_CORES", str(cpus + 7))  # never more than there are
    assert cores.available() == cpus


def test_the_compiles_side_by_side_and_the_tune_workers_follow_it(monkeypatch):
    from inspector.libtpu.parallel import workers

    monkeypatch.setenv("INSPECTOR_CORES", "1")
    assert workers() == 1


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "1e3"])
def test_a_bad_value_is_one_line_that_says_what_to_give(monkeypatch, value):
    monkeypatch.setenv("INSPECTOR_CORES", value)
    with pytest.raises(UsageError, match=r"INSPECTOR_CORES=.*give a whole number of 1 or more"):
        cores.available()


def test_the_cli_says_it_without_a_traceback(cli, monkeypatch):
    monkeypatch.setenv("INSPECTOR_CORES", "none")
    code, out, err = cli("tune", "samples/matmul.py:tiled", "--target", "tpu-v5e", "--grid", "bm=256", "--no-cache")
    assert code == 2 and "INSPECTOR_CORES='none'" in err and "Traceback" not in err, err
