"""An output block a kernel leaves unwritten is an error only where the program can read it before
anything writes it: a later kernel that loads the block but writes all of it before reading it
(axlearn's Mamba scan backward, which zeroes the state before the first chunk at its last step)
reads nothing of it, and the finding names that kernel instead (issue 64)."""
import pytest

from conftest import DATA

CASES = f"{DATA}/overwritten_before_read.py"
MAMBA = "tests/data/heldout13/axlearn_mamba_scan.py:mamba_scan_grad"


def _unwritten(spec: str) -> dict:
    from inspector.base.chips import get_chip
    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target
    from inspector.pallas.analysis import analyse_pallas

    program = capture(load_target(spec), Backend(get_chip("cpu")), compile=False).program
    reports, unread = analyse_pallas(program, [], [get_chip("tpu-v5e")])
    return {f.code: f for r in reports for f in r.findings + unread if f.code.startswith("output-")}


@pytest.mark.parametrize("entry", ["zeroed_first", "zeroed_every_step"])
def test_a_block_the_next_kernel_writes_before_reading_is_no_error(entry):
    found = _unwritten(f"{CASES}:{entry}")
    assert list(found) == ["output-unwritten-unread"], found
    finding = found["output-unwritten-unread"]
    assert finding.severity == "info" and finding.data["count"] == 1
    assert "writes it at tests/data/overwritten_before_read.py:" in finding.message and "before reading it" in finding.message


@pytest.mark.parametrize("entry", ["read_first", "zeroed_at_the_wrong_step", "partly_zeroed"])
def test_a_block_read_before_it_is_written_is_still_an_error(entry):
    found = _unwritten(f"{CASES}:{entry}")
    assert list(found) == ["output-not-written"] and found["output-not-written"].data["count"] == 1, found


@pytest.mark.libtpu
def test_mambas_backward_passes_check(cli):
    code, out, err = cli("check", MAMBA, "--estimate-only", "--target", "tpu-v5e")
    assert code == 0 and "output-not-written" not in out, out + err
    assert "_backward_kernel writes it at" in out
