"""The compile cache: what its key covers, what a bad entry does, failures and temp files."""
import json
import os

import pytest

from conftest import DATA

from inspector.compilation import compile_cache
from inspector.compilation import stages as stages_mod, xla_compile
from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.cli import main
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

FUNCS = str(DATA / "funcs.py")
GOOD = {"hlo": "HloModule m\n\nENTRY %main (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}\n", "cost": {"flops": 4.0}, "memory": {"temp_size_in_bytes": 0}, "error": None}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache and no in-process memo, so every capture asks the disk."""
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("INSPECTOR_NO_CACHE", raising=False)
    monkeypatch.setattr(stages_mod, "_MEMO", {})
    return tmp_path / "cache"


def _capture(spec: str, cache_dir, monkeypatch, chip: str = "cpu", use_cache=True):
    monkeypatch.setattr(stages_mod, "_MEMO", {})
    return capture(load_target(spec), Backend(get_chip(chip)), use_cache=use_cache).stages


# ----------------------------------------------------------------------------- the key


@pytest.mark.parametrize("name, value", [
    ("LIBTPU_INIT_ARGS", "--xla_tpu_scoped_vmem_limit_kib=65536"),
    ("XLA_FLAGS", "--xla_cpu_enable_fast_math=true"),
    ("TPU_SOME_FUTURE_OPTION", "1"),
])
def test_compiler_environment_is_in_the_key(monkeypatch, name, value):
    monkeypatch.delenv(name, raising=False)
    before = compile_cache.key("module", "tpu-v5e")
    monkeypatch.setenv(name, value)
    assert compile_cache.key("module", "tpu-v5e") != before


def test_what_libtpu_sets_itself_is_not_in_the_key(monkeypatch):
    """libtpu sets TPU_PREMAPPED_BUFFER_SIZE in its own process (the string is in libtpu.so; a
    process that compiled has it, one that only lowered may not): a key made before the compile
    must find what a process that compiled stored (check's per-chip processes)."""
    monkeypatch.delenv("TPU_PREMAPPED_BUFFER_SIZE", raising=False)
    before = compile_cache.key("module", "tpu-v5e")
    monkeypatch.setenv("TPU_PREMAPPED_BUFFER_SIZE", "4294967296")
    assert compile_cache.key("module", "tpu-v5e") == before


@pytest.mark.parametrize("name", ["TPU_LOG_DIR", "TPU_STDERR_LOG_LEVEL", "TPU_MIN_LOG_LEVEL", "HOME"])
def test_logging_and_unrelated_variables_are_not(monkeypatch, name):
    before = compile_cache.key("module", "tpu-v5e")
    monkeypatch.setenv(name, "/somewhere/else")
    assert compile_cache.key("module", "tpu-v5e") == before


def test_versions_chip_schema_and_module_are_in_the_key(monkeypatch):
    base = compile_cache.key("module", "tpu-v5e")
    assert compile_cache.key("module", "tpu-v6e") != base
    assert compile_cache.key("module ", "tpu-v5e") != base
    monkeypatch.setattr(compile_cache, "SCHEMA", compile_cache.SCHEMA + 1)
    assert compile_cache.key("module", "tpu-v5e") != base
    monkeypatch.undo()
    for dist in ("jax", "jaxlib", "libtpu", "jax-inspector"):
        real = compile_cache.dist_version
        monkeypatch.setattr(compile_cache, "dist_version", lambda d, dist=dist, real=real: "9.9" if d == dist else real(d))
        assert compile_cache.key("module", "tpu-v5e") != base, dist
        monkeypatch.undo()


def test_a_moved_function_is_a_new_entry_with_its_own_lines(tmp_path, cache, monkeypatch):
    """The same code three lines lower, or in another file: the HLO's source lines are its own."""
    body = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.tanh(x) * 2\n\nINSPECT = {'f': {'args': 'f32[8]'}}\n"
    (tmp_path / "a.py").write_text(body)
    (tmp_path / "b.py").write_text("\n\n\n" + body)
    # One call site: the locations (the key) include the frames that call capture.
    first, moved, again = (_capture(f"{tmp_path}/{name}:f", cache, monkeypatch) for name in ("a.py", "b.py", "b.py"))
    assert not moved.compile_cached
    assert _kernel_sources(first) == {"a.py:4"}
    assert _kernel_sources(moved) == {"b.py:7"}
    assert again.compile_cached and again.hlo == moved.hlo


def _kernel_sources(stages) -> set[str]:
    from inspector.hlo.fusions import analyse_fusions

    analysis = analyse_fusions(stages.hlo, get_chip("cpu"), stages.cost, None)
    return {os.path.basename(s) for k in analysis.kernels for s in k.sources}


# ----------------------------------------------------------------------------- entries


def _entry(result=GOOD, **over):
    return {"schema": compile_cache.SCHEMA, "key": "K", "result": result, **over}


BAD_ENTRIES = {
    "empty file": b"",
    "truncated": json.dumps(_entry()).encode()[:-9],
    "not utf-8": b"\xff\xfe{}",
    "a list": b"[]",
    "old schema": json.dumps(_entry(schema=1)).encode(),
    "no schema": json.dumps({"hlo": "x", "cost": None, "memory": None, "error": None}).encode(),
    "another key": json.dumps(_entry(key="other")).encode(),
    "result a string": json.dumps(_entry(result="hlo")).encode(),
    "hlo a number": json.dumps(_entry(result={**GOOD, "hlo": 1})).encode(),
    "hlo empty": json.dumps(_entry(result={**GOOD, "hlo": ""})).encode(),
    "cost of strings": json.dumps(_entry(result={**GOOD, "cost": {"flops": "4"}})).encode(),
    "memory of floats": json.dumps(_entry(result={**GOOD, "memory": {"temp_size_in_bytes": 1.5}})).encode(),
    "a stored failure": json.dumps(_entry(result={**GOOD, "hlo": None, "error": "OOM"})).encode(),
    "an extra field": json.dumps(_entry(result={**GOOD, "extra": 1})).encode(),
}


@pytest.mark.parametrize("what", BAD_ENTRIES)
def test_a_bad_entry_is_a_miss(cache, what):
    key = "0" * 64
    cache.mkdir(parents=True)
    raw = BAD_ENTRIES[what].replace(b'"K"', json.dumps(key).encode())
    (cache / f"{key}.json").write_bytes(raw)
    assert compile_cache.load(key) is None


def test_an_entry_that_is_a_folder_is_a_miss_and_a_store_leaves_no_temp_file(cache):
    key = "1" * 64
    (cache / f"{key}.json").mkdir(parents=True)
    assert compile_cache.load(key) is None
    assert compile_cache.store(key, GOOD) is False
    assert not list(cache.glob("*.tmp"))


def test_store_and_load_round_trip(cache):
    key = "2" * 64
    assert compile_cache.store(key, GOOD) is True
    assert compile_cache.load(key) == GOOD
    assert not list(cache.glob("*.tmp"))


def test_failures_are_not_stored(cache):
    assert compile_cache.store("3" * 64, {"hlo": None, "cost": None, "memory": None, "error": "RESOURCE_EXHAUSTED"}) is False
    assert not cache.exists() or not list(cache.iterdir())


class _Lowered:
    """A lowering whose compile fails, as libtpu's VMEM out-of-memory does."""

    def as_text(self, debug_info=False):
        return "module @failing {}"

    def compile(self, options=None):  # jax's Lowered.compile takes compiler options
        raise RuntimeError("RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem")


def test_a_failed_compile_is_not_cached(cache):
    result, cached = xla_compile.compile_lowered(_Lowered(), Backend(get_chip("cpu")), True)
    assert result["error"].startswith("RESOURCE_EXHAUSTED") and not cached
    assert not cache.exists() or not list(cache.iterdir())


def test_a_full_disk_leaves_no_temp_file(cache, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    from inspector.base import atomic

    monkeypatch.setattr(atomic.os, "replace", full)  # the temporary file is written, then the disk is full
    assert compile_cache.store("4" * 64, GOOD) is False
    assert not list(cache.glob("*.tmp")) and not list(cache.glob(".*"))


def test_stale_temp_files_of_a_killed_store_are_removed(cache):
    cache.mkdir(parents=True)
    stale, fresh = cache / "tmpabc.tmp", cache / ".0123456789abcdef.x.tmp"
    stale.write_text("half")
    fresh.write_text("half")
    os.utime(stale, (1, 1))
    compile_cache.store("5" * 64, GOOD)
    assert not stale.exists() and fresh.exists()  # a store in progress elsewhere is left alone


def test_a_corrupt_entry_is_overwritten_and_no_cache_refreshes(cache, monkeypatch):
    plan = [  # (use_cache, what to do to the entry first), then whether that run came from the cache
        (True, None, False),  # compile and store
        (True, '{"schema": %d, "result": {"hlo": 3}}' % compile_cache.SCHEMA, False),  # valid JSON, wrong structure: a miss
        (True, None, True),  # overwritten by the fresh result: a hit
        (compile_cache.REFRESH, "[]", False),  # --no-cache compiles and stores
        (True, None, True),
    ]
    cached = []
    for use_cache, corrupt, _ in plan:  # one call site (line and column): the key includes the calling frames
        if corrupt:
            next(cache.glob("*.json")).write_text(corrupt)
        cached.append(_capture(f"{FUNCS}:matmul", cache, monkeypatch, use_cache=use_cache).compile_cached)
    assert cached == [hit for *_, hit in plan]
    assert len(list(cache.glob("*.json"))) == 1 and not list(cache.glob("*.tmp"))


def test_dumping_passes_turns_the_cache_off(monkeypatch):
    monkeypatch.delenv("INSPECTOR_NO_CACHE", raising=False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/dump")
    assert not compile_cache.enabled()
    monkeypatch.setenv("XLA_FLAGS", "")
    assert compile_cache.enabled()
    monkeypatch.setenv("INSPECTOR_NO_CACHE", "1")
    assert not compile_cache.enabled()


# ----------------------------------------------------------------------------- `inspector cache`


def test_cache_verb_shows_where_and_how_big_then_clears(cache, capsys):
    compile_cache.store("6" * 64, GOOD)
    compile_cache.store("7" * 64, GOOD)
    (cache / "notes.txt").write_text("not ours")
    assert main(["cache", "--json"], isolate=False) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["path"] == str(cache) and shown["entries"] == 2 and shown["bytes"] > 100
    assert main(["cache"], isolate=False) == 0
    out = capsys.readouterr().out
    assert str(cache) in out and "2 entries" in out
    assert main(["cache", "clear"], isolate=False) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert compile_cache.info().entries == 0
    assert (cache / "notes.txt").exists()  # only our own files go
