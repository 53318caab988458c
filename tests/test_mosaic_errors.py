"""Every Mosaic error kind explained at its source line, with the rule and the fix.

Offline: the messages libtpu 0.0.42.1 gave for samples/mosaic_errors.py (tests/data/mosaic_errors,
tests/data/make_mosaic_errors.py remakes them) classified and located. On a TPU target: each
sample kernel compiled on the chip where it fails gives its finding at the right line, and
compiles with the fix (--set fixed=True).
"""
import json

import pytest

from conftest import DATA, ROOT, line_of, lines_of_function
from inspector.base.chips import get_chip
from inspector.base.findings import CODES
from inspector.mosaic.error_kinds import BY_NAME, KINDS, classify
from inspector.mosaic.explain import explain_capture, explain_failure

SAMPLE = "samples/mosaic_errors.py"
MESSAGES = DATA / "mosaic_errors"


def message(name: str) -> str:
    return next(MESSAGES.glob(f"{name}.*.txt")).read_text()


@pytest.mark.parametrize("name, kind, error_code", [
    ("unaligned_rows", "unproven-alignment", "E2003"),
    ("unaligned_lanes", "unproven-alignment", "E2003"),
    ("sort_rows", "unimplemented-primitive", None),
    ("cumsum_rows", "unimplemented-primitive", None),
    ("mask_column", "shape-cast", None),
    ("int8_rows", "layout", "E2002"),
    ("block_100", "layout", None),
    ("fp8_matmul", "dtype", "E2001"),
    ("fp8_add", "dtype", None),
    ("int8_double", "dtype", None),
    ("too_big_blocks", "vmem-oom", "E1001"),
])
def test_each_captured_message_has_its_kind(name, kind, error_code):
    found, captured = classify(message(name))
    assert found.name == kind
    assert captured.get("error_code") == error_code


def test_the_table_is_complete():
    """Each kind: a finding code registered for the Mosaic view, a rule, a fix and where it was seen."""
    for kind in KINDS:
        assert kind.code in CODES and kind.rule and kind.fix and "libtpu 0.0.42.1" in kind.seen, kind.name
        assert kind.name == "vmem-oom" or CODES[kind.code].view == "mosaic"
    assert CODES[BY_NAME["unknown"].code].view == "mosaic"


def test_alignment_names_the_line_the_dimension_and_the_fix():
    f = explain_failure(message("unaligned_rows"), chip=get_chip("tpu-v5e"))
    assert f.source == f"{SAMPLE}:{line_of(SAMPLE, 'o_ref[...] = x_ref[pl.ds(start, 16), :]')}" and f.source_of == "op"
    assert (f.details["dim"], f.details["multiple"]) == ("0", "8")
    assert "pl.multiple_of(start, 8)" in f.fix and "multiple of 8" in f.rule
    assert f.op.startswith('%3 = "tpu.vector_load"')
    assert "at location" not in f.compiler and "E2003" in f.compiler  # the compiler's words, without the loc line
    lanes = explain_failure(message("unaligned_lanes"))
    assert (lanes.details["dim"], lanes.details["multiple"]) == ("1", "128")
    assert lanes.source == f"tests/data/make_mosaic_errors.py:{line_of('tests/data/make_mosaic_errors.py', 'pl.ds(start_ref[0], 128)')}"


def test_unimplemented_primitive_lists_what_lowers_and_an_alternative():
    f = explain_failure(message("cumsum_rows"))
    assert f.details["primitive"] == "cumsum" and "triangular" in f.details["alternative"]
    lowerable = f.details["lowerable"]
    assert "dot_general" in lowerable and "cumsum" not in lowerable and "sort" not in lowerable
    assert str(len(lowerable)) in f.rule
    other = explain_failure("Unimplemented primitive in Pallas TPU lowering for tc: lgamma.")
    assert "outside the kernel" in other.fix


def test_shape_cast_says_which_dimensions_change():
    f = explain_failure(message("mask_column"))
    assert "bool[32] -> bool[32,1]" in f.rule and "(32,) to (32, 1)" in f.rule
    assert f.source == f"{SAMPLE}:{line_of(SAMPLE, 'mask = (jnp.arange(rows) < keep)[:, None]')}"


def test_dtype_names_the_type_and_the_chip():
    f = explain_failure(message("fp8_matmul"), chip=get_chip("tpu-v4"))
    assert "float8_e5m2 matmul RHS operand" in f.rule and "tpu-v4" in f.rule
    assert "astype(jnp.bfloat16)" in f.fix
    assert "int8" in explain_failure(message("int8_double")).rule


def test_an_unknown_error_keeps_the_compiler_words_and_its_line():
    text = ('INTERNAL: Mosaic failed to compile TPU kernel: something new happened\n\n'
            'at location: loc("mul:"(callsite("k"("/home/u/kern.py":12:8 to :20) at "k"("/home/u/kern.py":12:8 to :20))))\n\n'
            'The MLIR operation involved:\n  %5 = "arith.mulf"(%3, %4)\n\nPlease report a bug at: https://x')
    f = explain_failure(text)
    assert f.kind == "unknown" and f.code == "mosaic-error"
    assert f.source == "/home/u/kern.py:12" and f.source_of == "op"
    assert "something new happened" in f.headline and "Please report" not in f.compiler
    finding = f.finding("tpu-v5e")
    assert finding.severity == "error" and finding.view == "mosaic" and finding.data["source"] == "/home/u/kern.py:12"


def test_finding_data_keys_are_declared():
    for name in ("unaligned_rows", "cumsum_rows", "int8_rows", "fp8_matmul"):
        f = explain_failure(message(name), chip=get_chip("tpu-v5e")).finding("tpu-v5e")
        assert set(f.data) <= set(CODES[f.code].fields), set(f.data) - set(CODES[f.code].fields)
        assert json.dumps(f.data)  # plain data


def test_a_constant_block_index_past_the_end_is_caught_before_compiling():
    """libtpu aborts the process on it; the guard reads the BlockSpecs of the traced program (no TPU)."""
    from inspector.compilation.backends import Backend
    from inspector.jax_internals.pallas import block_specs
    from inspector.compilation.block_guard import bad_block_indices
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target

    def bad(fixed):
        program = capture(load_target(f"{SAMPLE}:past_the_end", sets=[f"fixed={fixed}"]), Backend(get_chip("cpu")),
                          compile=False).program
        return bad_block_indices(block_specs(program.closed_jaxpr))

    [found] = bad(False)
    assert (found.index, found.dim, found.blocks, found.operand, found.role) == ([2, 0], 0, 2, "x_ref", "input")
    assert found.index_map_source == f"{SAMPLE}:{line_of(SAMPLE, 'lambda i: (last, 0)')}"
    assert classify(found.message)[0].name == "block-index"
    assert bad(True) == []


# ----------------------------------------------------------------------------- on the real compiler

EXPECTED = {  # sample -> (finding code, the line of the failing op, or the function whose pallas_call stands in)
    "unaligned_rows": ("mosaic-unproven-alignment", "o_ref[...] = x_ref[pl.ds(start, 16), :]"),
    "sort_rows": ("mosaic-unimplemented", "x = jnp.sort(x, axis=-1)  # no Pallas"),
    "cumsum_rows": ("mosaic-unimplemented", "o_ref[...] = jnp.cumsum(x, axis=-1)"),
    "mask_column": ("mosaic-shape-cast", "mask = (jnp.arange(rows) < keep)[:, None]"),
    "int8_rows": ("mosaic-layout", "int8_rows"),
    "fp8_matmul": ("mosaic-dtype", "o_ref[...] = jnp.dot(a, b, preferred_element_type=jnp.float32)"),
    "past_the_end": ("mosaic-block-index", "lambda i: (last, 0)"),
    "too_big_blocks": ("compile-vmem-oom", "too_big_blocks"),
}


@pytest.fixture(scope="module")
def compiled():
    """The sample kernels compiled on their chips, each once (the tests share them)."""
    import sys

    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target

    sys.path.insert(0, str(ROOT / "samples"))
    import mosaic_errors

    cache = {}

    def get(name: str, fixed: bool = False):
        if (name, fixed) not in cache:
            chip = mosaic_errors.FAILS_ON[name]
            target = load_target(f"{SAMPLE}:{name}", sets=[f"fixed={fixed}"])
            captured = capture(target, Backend(get_chip(chip)), jaxpr_text=False, use_cache=False)
            cache[name, fixed] = chip, explain_capture(captured, get_chip(chip)).stages  # capture keeps, mosaic explains
        return cache[name, fixed]
    return get


@pytest.mark.libtpu
@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_kind_at_its_line_on_its_chip(compiled, name):
    code, where = EXPECTED[name]
    chip, stages = compiled(name)
    assert stages.compile_error is not None, f"{name} compiled on {chip}"
    finding = stages.compile_error.finding(chip, view="overview")
    assert finding.code == code and finding.severity == "error"
    source = finding.data["source"]
    assert source.startswith(SAMPLE + ":")
    line = int(source.rsplit(":", 1)[1])
    if "(" in where or "=" in where:  # a statement: that very line
        assert line == line_of(SAMPLE, where), (finding.data["source_of"], source)
    else:  # a pallas_call: its line in that function
        assert line in lines_of_function(SAMPLE, where) and finding.data["source_of"] == "pallas_call"
    assert finding.data["kernel"] and finding.data["rule"] and finding.data["fix"]
    assert set(finding.data) <= set(CODES[finding.code].fields)


@pytest.mark.libtpu
@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_fix_compiles(compiled, name):
    chip, stages = compiled(name, True)
    assert stages.compile_error is None, stages.compile_error.headline
    assert stages.hlo and "tpu_custom_call" in stages.hlo


@pytest.mark.libtpu
def test_vmem_oom_puts_the_estimate_beside_the_compiler(compiled):
    chip, stages = compiled("too_big_blocks")
    f = stages.compile_error.finding(chip, view="overview")
    assert (f.data["used_bytes"], f.data["limit_bytes"]) == (32 * 2**20, 16 * 2**20)
    assert f.data["estimate_bytes"] >= 32 * 2**20 and f.data["estimate_limit_bytes"] == 16 * 2**20
    assert "the inspector's estimate" in f.message and "vmem_limit_bytes" in f.data["fix"]


@pytest.mark.libtpu
def test_fp8_matmul_is_refused_on_v4_only():
    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target

    target = load_target(f"{SAMPLE}:fp8_matmul")
    assert capture(target, Backend(get_chip("tpu-v5e")), jaxpr_text=False).stages.compile_error is None


@pytest.mark.libtpu
@pytest.mark.slow
def test_check_exits_1_and_json_names_the_line(cli_run):
    done = cli_run("check", f"{SAMPLE}:mask_column", "--target", "tpu-v5e", "--json")
    assert done.returncode == 1, done.stderr
    found = [f for f in json.loads(done.stdout)["findings"] if f["code"] == "mosaic-shape-cast"]
    assert found and found[0]["data"]["source"] == f"{SAMPLE}:{line_of(SAMPLE, 'mask = (jnp.arange(rows) < keep)[:, None]')}"
    shown = cli_run("show", f"{SAMPLE}:mask_column", "--target", "tpu-v5e")
    assert "mosaic-shape-cast" in shown.stdout and "unsupported reshape" in shown.stdout
