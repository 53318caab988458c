import pytest

from inspector.base.errors import UsageError
from inspector.base.specs import ArgSpec, parse_specs


def test_positional_and_keyword_specs():
    specs = parse_specs("bf16[4,2048,128] f32[] k=i32[16]")
    assert specs == [ArgSpec("bfloat16", (4, 2048, 128)), ArgSpec("float32", ()), ArgSpec("int32", (16,), "k")]
    assert [str(s) for s in specs] == ["bf16[4,2048,128]", "f32[]", "k=s32[16]"]


def test_commas_between_specs_and_spaces_inside_brackets():
    assert parse_specs("f32[8, 128],s8[2]") == [ArgSpec("float32", (8, 128)), ArgSpec("int8", (2,))]


@pytest.mark.parametrize("text, points_at", [
    ("f32[2,x]", "'x'"),
    ("q32[2]", "'q32'"),
    ("f32(2)", "'f32(2)'"),
    ("f32[2", "'f32[2'"),
    ("f32[-1]", "'-1'"),
    ("", "empty"),
])
def test_bad_specs_name_the_bad_token(text, points_at):
    with pytest.raises(UsageError) as err:
        parse_specs(text)
    assert points_at in str(err.value)
    assert "\n" not in str(err.value)


def test_positional_after_keyword_is_refused():
    with pytest.raises(UsageError, match="keyword"):
        parse_specs("k=f32[2] f32[2]")
