"""The TPU's default layout of the program's arguments and results (jax_internals/tpu_layout.py),
as libtpu's compile-only client gives it: which a kernel gets through a copy XLA can place in VMEM."""
import random

import pytest

from inspector.jax_internals.tpu_layout import copied_for_a_kernel, default_signature

TOPOLOGIES = ("v4:2x2x1", "v5e:2x2", "v5p:2x2x1", "v6e:2x2", "tpu7x:2x2x1")


class _Aval:
    def __init__(self, shape, dtype="float32"):
        import numpy as np
        import ml_dtypes

        self.shape = shape
        self.dtype = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


@pytest.mark.libtpu
@pytest.mark.parametrize("shape, dtype, kernel_shape, copied", [
    ((2, 16384, 64), "float32", None, True),  # head_dim 64: S minor, no lane wasted
    ((4, 4096, 128), "bfloat16", None, False),
    ((16384, 192), "float32", None, True),  # 192 lanes pad to 256; 16384 does not pad
    ((64, 64), "float32", None, False),  # the same padding either way: row-major
    ((1024, 1, 8192), "bfloat16", (1024, 8192), False),  # the kernel's (1024, 8192), a dim of size 1 added: a bitcast
    ((1, 2, 1, 128), "bfloat16", None, True),  # tiled over its 2 ({3,1,2,0}), the kernel's over a 1: XLA copies
    ((4096,), "int8", None, False),
    # GDN-2's inputs reshaped to (1, 1, 2, 256, D) chunks: bf16 is tiled over its 512 ({3,1,2,0}), a
    # bitcast; f32 is tiled T(1,128) over the 1 ({3,2,1,0}), which XLA copies (S(1) on v5e)
    ((1, 512, 1, 4096), "bfloat16", (1, 1, 2, 256, 4096), False),
    ((1, 512, 1, 1536), "float32", (1, 1, 2, 256, 1536), True),
])
def test_the_default_layout_as_libtpu_gives_it(shape, dtype, kernel_shape, copied):
    assert copied_for_a_kernel(default_signature(shape, dtype), _Aval(kernel_shape or shape, dtype)) is copied


@pytest.mark.libtpu
def test_the_default_layout_is_the_same_on_every_generation():
    """The module asks one topology; the layouts of 200 shapes in four dtypes agreed on all five."""
    import ml_dtypes
    import numpy as np

    from inspector.jax_internals.aot import start_backend

    rng = random.Random(0)
    sizes = [1, 2, 3, 7, 8, 24, 63, 64, 100, 128, 130, 192, 256, 500, 1024, 4096]
    shapes = [tuple(rng.choice(sizes) for _ in range(rng.choice([2, 3, 4]))) for _ in range(200)]
    devices = [start_backend(t).devices[0] for t in TOPOLOGIES]
    for dtype in (np.float32, ml_dtypes.bfloat16, np.int8, np.int32):
        for shape in shapes:
            layouts = {str(d.client.get_default_layout(np.dtype(dtype), shape, d)) for d in devices}
            assert len(layouts) == 1, (shape, dtype, layouts)


def test_without_libtpu_nothing_is_guessed(monkeypatch):
    """Where libtpu cannot say, the answer is None: the operand's origin stays as the program has it."""
    from inspector.jax_internals import tpu_layout

    def fail():
        raise RuntimeError("no libtpu")

    monkeypatch.setattr(tpu_layout, "_client", fail)
    assert tpu_layout.default_signature.__wrapped__((2, 77, 64), "float32") is None
    assert not copied_for_a_kernel(None, _Aval((2, 77, 64)))
