"""A misspelt verb or option is named as such, with the closest ones; `--version` answers."""
from __future__ import annotations

from importlib import metadata

import pytest


@pytest.mark.parametrize("argv, said", [
    (["chekc", "samples/matmul.py:tiled"], "unknown verb 'chekc' (did you mean check"),
    (["shwo"], "unknown verb 'shwo' (did you mean show?)"),
    (["tiled"], "unknown verb 'tiled': the verbs are show, check"),
])
def test_a_misspelt_verb_is_named_not_taken_for_a_target(cli, argv, said):
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv, said", [
    (["show", "samples/matmul.py:tiled", "--viwe", "fusions"], "unrecognized arguments: --viwe fusions (did you mean --view?)"),
    (["check", "samples/matmul.py:tiled", "--tolerence", "time=5%"], "(did you mean --tolerance?)"),
    (["show", "samples/matmul.py:tiled", "--zzzzzz"], "unrecognized arguments: --zzzzzz (see `inspector show --help`)"),
])
def test_an_unknown_option_names_the_closest_the_verb_takes(cli, argv, said):
    code, out, err = cli(*argv)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv, said", [
    # a new user's next try after the README: show's options on the UI's line (`--time` once got "did you mean --mesh?")
    (["samples/matmul.py:tiled", "--view", "hlo"], "unrecognized arguments: --view hlo (--view is an option of show, not of the UI: "
                                                  "inspector show TARGET --view ...)"),
    (["samples/matmul.py:tiled", "--time"], "(--time is an option of show, export, compare, not of the UI: inspector show TARGET --time ...)"),
    (["samples/matmul.py:tiled", "--viwe", "hlo"], "(did you mean show's --view?)"),
    (["check", "samples/matmul.py:tiled", "--grid", "bm=128"], "(--grid is an option of tune, not of check: inspector tune TARGET --grid ...)"),
])
def test_an_option_of_another_verb_names_that_verb(cli, argv, said):
    code, out, err = cli(*argv)
    assert code == 2 and said in err and "did you mean --mesh" not in err and len(err.strip().splitlines()) == 1, err


def test_a_target_is_still_a_target(cli):
    """A word with a path or a colon is a target, as before: its own message, not a verb's."""
    code, _, err = cli("samples/nosuchfile.py")
    assert code == 2 and "must be path/to/file.py:function" in err and "unknown verb" not in err


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_ours_and_the_compilers(cli, flag):
    code, out, err = cli(flag)
    assert code == 0 and err == ""
    assert out.strip() == (f"inspector {metadata.version('jax-inspector')} (jax {metadata.version('jax')}, "
                           f"jaxlib {metadata.version('jaxlib')}, libtpu {metadata.version('libtpu')})")


def test_a_relative_path_not_found_names_the_folder_it_was_looked_for_in(cli, tmp_path, monkeypatch):
    """From the folder above the clone, README's `samples/matmul.py:tiled` is no file there: the message
    says which folder a relative path was read from."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("show", "samples/matmul.py:tiled")
    assert code == 2 and f"samples/matmul.py: no such file in {tmp_path} (" in err and len(err.strip().splitlines()) == 1, err
