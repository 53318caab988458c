"""The VMEM out-of-memory parser on messages captured from libtpu 0.0.42.1 (tests/data)."""
from conftest import DATA
from inspector.compilation.compile_errors import parse_compile_error, parse_size

MiB = 2**20


def test_sizes_are_powers_of_1024():
    assert parse_size("20.00M") == 20 * MiB
    assert parse_size("512B") == 512
    assert parse_size("1.5K") == 1536
    assert parse_size("2G") == 2 * 2**30


def test_scoped_limit_message():
    err = parse_compile_error((DATA / "vmem_oom_flash_v5e.txt").read_text())
    assert (err.status, err.code) == ("RESOURCE_EXHAUSTED", "E1001")
    v = err.vmem
    assert (v.used_bytes, v.limit_bytes, v.exceeded_by_bytes, v.scope) == (20 * MiB, 16 * MiB, 4 * MiB, "scoped")
    assert v.kernel == "flash_attention_fwd.1"
    assert v.op_name.endswith("flash_attention_fwd/pallas_call")
    assert "20 MiB of 16 MiB" in err.headline


def test_capacity_message_with_largest_allocations():
    err = parse_compile_error((DATA / "vmem_oom_add_7x_limit.txt").read_text())
    v = err.vmem
    assert (v.used_bytes, v.limit_bytes, v.exceeded_by_bytes, v.scope) == (96 * MiB, 64 * MiB, 32 * MiB, "capacity")
    assert [(a.role, a.operand_index, a.buffering, a.size_bytes) for a in v.allocations] == [
        ("input", 0, 2, 32 * MiB), ("input", 1, 2, 32 * MiB), ("output", 0, 2, 32 * MiB)]
    assert v.allocations[0].window_shape == "f32[4096,1024]"
    assert v.allocations[0].full_shape == "f32[16384,1024]"
    assert "type.googleapis.com" not in err.message  # the serialized status proto is dropped


def test_other_errors_keep_the_compiler_message():
    err = parse_compile_error("INVALID_ARGUMENT: Mosaic failed to compile TPU kernel: bad tiling\nmore")
    assert err.vmem is None and err.status == "INVALID_ARGUMENT"
    assert err.headline == "INVALID_ARGUMENT: Mosaic failed to compile TPU kernel: bad tiling"
