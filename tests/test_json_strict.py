"""Every JSON the tool writes is RFC 8259 (no NaN, no Infinity): `diff --json` on an output the
kernel leaves NaN wrote `"max_abs": Infinity`, which strict parsers refuse. The rule
(inspector/base/json_text.py, docs/api.md): null, and "<key>_nonfinite" beside it."""
import json
import math

import pytest

from conftest import DATA

NAIVE = ["samples/attention.py:naive", "--args", "f32[1,64,32] f32[1,64,32] f32[1,64,32]"]
TAIL = ["samples/bugs.py:dropped_tail"]


def strict(text: str):
    def refuse(constant):
        raise ValueError(f"not JSON (RFC 8259): {constant}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_are_null_with_what_they_were_beside_them():
    from inspector.base.json_text import dumps, loads

    data = {"max_abs": math.inf, "rows": [1.0, math.nan, [2.0, -math.inf]], "inner": {"x": float("nan")}, "ok": 1.5}
    text = dumps(data)
    assert strict(text) == {"max_abs": None, "max_abs_nonfinite": "inf", "rows": [1.0, None, [2.0, None]],
                            "rows_nonfinite": {"1": "nan", "2.1": "-inf"}, "inner": {"x": None, "x_nonfinite": "nan"}, "ok": 1.5}
    back = loads(text)
    assert back["max_abs"] == math.inf and math.isnan(back["rows"][1]) and back["rows"][2][1] == -math.inf
    assert math.isnan(back["inner"]["x"]) and set(back) == set(data)


@pytest.mark.parametrize("argv", [
    ["show", *NAIVE, "--json"], ["show", *TAIL, "--json", "--view", "pallas"], [*NAIVE, "--json"],
    ["diff", *TAIL, "--json", "--runs", "0"], ["diff", *NAIVE, "--json", "--runs", "0", "--ref", "samples/attention.py:naive"],
    ["compare", "samples/matmul.py:tiled", "samples/matmul.py:xla", "--args", "bf16[256,256] bf16[256,256]", "--json"], ["chips", "--json"], ["cache", "--json"],
], ids=lambda a: " ".join(a[:2]))
def test_every_verbs_json_is_strict(cli, argv):
    code, out, err = cli(*argv)
    assert code in (0, 1), err
    strict(out)


def test_diff_json_says_what_a_nan_only_block_was(cli):
    code, out, err = cli("diff", *TAIL, "--json", "--runs", "0")
    [leaf] = strict(out)["outputs"]
    assert leaf["worst_kernel"] is None and leaf["worst_kernel_nonfinite"] == "nan"
    [block] = leaf["error_map"]["bad_blocks"]
    assert block["max_abs"] is None and block["max_abs_nonfinite"] == "nan"  # no element of it is a number


def test_export_json_and_the_cache_files_are_strict(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))  # an empty cache: this run's entries only
    from inspector.compilation import stages

    monkeypatch.setattr(stages, "_MEMO", {})  # and no compile an earlier test of this process kept in memory
    code, out, err = cli("export", *TAIL, "--json", str(tmp_path / "report.json"))
    assert code in (0, 1) and (tmp_path / "report.json").exists(), err  # 1: the kernel's error finding
    strict((tmp_path / "report.json").read_text())
    written = list((tmp_path / "cache").rglob("*.json"))
    assert written
    for path in written:
        strict(path.read_text())


@pytest.mark.libtpu
@pytest.mark.parametrize("argv", [
    ["check", *TAIL, "--json"],
    ["doctor", "--target", "tpu-v5e", "--json"],
    ["tune", f"{DATA}/tune_kernels.py:mm", "--target", "tpu-v5e", "--set", "bm=256", "--set", "bn=256", "--set", "pad_mib=0", "--args", "bf16[256,512] bf16[512,256]", "--json"],
], ids=lambda a: a[0])
def test_every_tpu_verbs_json_is_strict(cli, argv):
    code, out, err = cli(*argv)
    assert code in (0, 1), err
    strict(out)
