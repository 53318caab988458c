"""diff on a GPU target without a GPU: the Pallas-Triton kernels run in jax's Pallas interpreter on
the CPU against their references, said as that (not as a simulated TPU); a GPU known only by its
figures still cannot run anything. Tiny shapes: the interpreter runs the grid one step at a time."""
from __future__ import annotations

import json

MATMUL = "samples/gpu_matmul.py:matmul"
SMALL = ("--args", "bf16[32,32] bf16[32,32]", "--set", "bm=16")  # a 2x2 grid of 16x16 tiles, K in 2 steps


def test_a_triton_matmul_runs_against_its_reference_on_the_cpu_for_a_gpu_target(cli):
    code, out, err = cli("diff", MATMUL, *SMALL, "--target", "h100", "--runs", "1")
    assert code == 0, err
    out = " ".join(out.split())  # the header wraps at the terminal's width
    assert "Pallas interpret mode on the CPU for the h100 (Triton kernels, one grid step at a time" in out
    assert "TPU" not in out and "tpu-v5e" not in out  # nothing is simulated: the words are a GPU's
    assert "not representative of GPU speed" in out


def test_the_json_names_no_simulated_tpu_and_the_default_target_words_it_for_a_gpu_too(cli):
    code, out, err = cli("diff", MATMUL, *SMALL, "--runs", "0", "--json")  # no --target: the kernels say it is a GPU's
    assert code == 0, err
    result = json.loads(out)
    assert result["ok"] and result["chip"] is None
    assert result["mode"].startswith("Pallas interpret mode on the CPU (Triton kernels")


def test_rows_no_program_writes_are_caught_as_never_written(cli):
    # 48 rows in 32-row tiles: the grid is 48 // 32 = 1 step per axis, rows and columns 32..47 are never written
    code, out, _ = cli("diff", MATMUL, "--args", "bf16[48,48] bf16[48,48]", "--set", "bm=32", "--set", "bk=16",
                       "--target", "h100", "--runs", "0", "--json")
    assert code == 1
    result = json.loads(out)
    leaf = result["outputs"][0]
    assert not result["ok"] and leaf["nan_kernel"] == 48 * 48 - 32 * 32
    assert any(f["code"] == "mismatch" and "never written" in f["message"] for f in result["findings"])


def test_flash_attention_runs_against_its_reference(cli):
    code, out, err = cli("diff", "samples/gpu_attention.py:flash", "--args",
                         "bf16[1,32,1,16] bf16[1,32,1,16] bf16[1,32,1,16]", "--set", "block_q=16", "--set", "block_k=16",
                         "--target", "h100", "--runs", "0")
    assert code == 0, err
    assert "for the h100 (Triton kernels" in out and "ok" in out.splitlines()[-1]


def test_a_spec_only_gpu_is_still_refused(cli):
    code, _, err = cli("diff", MATMUL, *SMALL, "--target", "b200")
    assert code == 2 and "diff runs on this machine, not on b200" in err and "h100" in err
