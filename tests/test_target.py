import sys

import jax
import pytest

from conftest import DATA
from inspector.base.errors import UsageError
from inspector.compilation.static_params import parse_value
from inspector.compilation.target import load_target

FUNCS = str(DATA / "funcs.py")


def shapes(args):
    return [(tuple(a.shape), str(a.dtype)) for a in jax.tree.leaves(args)]


def test_inspect_args_and_reference():
    t = load_target(f"{FUNCS}:matmul")
    assert shapes(t.args) == [((8, 16), "float32"), ((16, 4), "float32")]
    assert t.reference_name == "ref_matmul" and callable(t.reference)
    assert t.arg_names == ["x", "w"]
    assert t.line is not None and t.file.endswith("funcs.py")


def test_cli_args_win_over_inspect():
    t = load_target(f"{FUNCS}:matmul", args="bf16[2,3] bf16[3,5]")
    assert shapes(t.args) == [((2, 3), "bfloat16"), ((3, 5), "bfloat16")]


def test_keyword_inputs():
    t = load_target(f"{FUNCS}:kw_only")
    assert shapes(t.args) == [((4,), "float32")] and list(t.kwargs) == ["bias"]


def test_callable_args_with_arrays_and_pytrees():
    t = load_target(f"{FUNCS}:from_callable")
    assert shapes(t.args) == [((8, 16), "float32"), ((16, 4), "float32")]
    tree = load_target(f"{FUNCS}:tree_fn")
    assert sorted(shapes(tree.args)) == [((2, 2), "bfloat16"), ((4,), "float32")]


def test_params_first_choice_is_default_and_set_wins():
    t = load_target(f"{FUNCS}:with_params")
    assert t.params == {"power": 3, "shift": 1.5}
    assert t.param_choices["power"] == [3, 2]
    t = load_target(f"{FUNCS}:with_params", sets=["power=2", "flag=true", "mode=b", "shift=-1e-3"])
    assert t.params == {"power": 2, "shift": -1e-3, "flag": True, "mode": "b"}


@pytest.mark.parametrize("text, value", [("3", 3), ("2.5", 2.5), ("True", True), ("false", False), ("abc", "abc"), ("none", None)])
def test_parse_value(text, value):
    assert parse_value(text) == value


def test_jitted_function_with_static_params():
    t = load_target(f"{FUNCS}:jitted", sets=["scale=3.0"])
    assert t.params == {"scale": 3.0}


def test_package_module_target():
    sys.path.insert(0, str(DATA))
    try:
        t = load_target("pkg_demo.ops:double", args="f32[3]")
    finally:
        sys.path.remove(str(DATA))
    assert t.name == "double" and shapes(t.args) == [((3,), "float32")]


def bad(spec, match, **kw):
    with pytest.raises(UsageError, match=match) as err:
        load_target(spec, **kw)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_missing_file():
    bad("nowhere/missing.py:f", "no such file")


def test_not_a_target_spec():
    bad(FUNCS, "must be path/to/file.py:function")


def test_syntax_error_shows_the_users_line(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("def f(x):\n    return x +\n")
    msg = bad(f"{f}:f", "SyntaxError")
    assert "broken.py:2" in msg


def test_import_error_shows_the_users_line(tmp_path):
    f = tmp_path / "boom.py"
    f.write_text("import math\n\nX = 1 / 0\n")
    msg = bad(f"{f}:f", "ZeroDivisionError")
    assert "boom.py:3" in msg


def test_missing_function_lists_the_real_ones():
    msg = bad(f"{FUNCS}:nope", "no function named 'nope'")
    assert "matmul" in msg and "jitted" in msg


def test_not_callable():
    bad(f"{FUNCS}:NOT_CALLABLE", "not a function")


def test_no_inputs_shows_both_ways(tmp_path):
    f = tmp_path / "bare.py"
    f.write_text("def f(a, b):\n    return a + b\n")
    msg = bad(f"{f}:f", "no example inputs")
    assert "--args" in msg and "INSPECT" in msg


def test_wrong_number_of_args():
    bad(f"{FUNCS}:matmul", "needs 2 inputs", args="f32[8,16]")


def test_set_unknown_param():
    msg = bad(f"{FUNCS}:matmul", "takes no parameter 'tile'", sets=["tile=4"])
    assert "x, w" in msg


def test_set_without_equals():
    bad(f"{FUNCS}:with_params", "--set name=value", sets=["power"])


def test_unknown_module():
    bad("no_such_pkg_xyz.mod:f", "cannot import module")
