"""Capture the compiler's messages for samples/mosaic_errors.py (tests/data/mosaic_errors/*.txt).

Run with the inspector's venv when jax or libtpu change: `python tests/data/make_mosaic_errors.py`.
Each file is the message as the inspector keeps it (stages.compile_error.message: with its MLIR
location), the checkout's absolute path made relative so the files do not depend on where it is.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "samples"))

from inspector.base import environment  # noqa: E402

environment.prepare()

import mosaic_errors  # noqa: E402
from inspector.compilation.backends import Backend  # noqa: E402
from inspector.base.chips import get_chip  # noqa: E402
from inspector.compilation.stages import capture  # noqa: E402
from inspector.compilation.target import load_target  # noqa: E402

# More messages of the same kinds, from kernels that are not samples (this file is their target)
EXTRA = {"fp8_add": "tpu-v5e", "int8_double": "tpu-v5e", "unaligned_lanes": "tpu-v5e", "block_100": "tpu-v5e"}


def fp8_add(x):
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + x_ref[...]
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def int8_double(x):
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def unaligned_lanes(starts, x):
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(start_ref, x_ref, o_ref):
        o_ref[...] = x_ref[:, pl.ds(start_ref[0], 128)]
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype), grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(1,), in_specs=[pl.BlockSpec((8, 512), lambda i, s: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0))))(starts, x)


def block_100(x):
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                          in_specs=[pl.BlockSpec((8, 100), lambda i: (0, i))],
                          out_specs=pl.BlockSpec((8, 100), lambda i: (0, i)))(x)


INSPECT = {"fp8_add": {"args": "f8e4m3fn[32,128]"}, "int8_double": {"args": "s8[32,128]"},
           "unaligned_lanes": {"args": "s32[1] f32[8,512]"}, "block_100": {"args": "f32[8,200]"}}

if __name__ == "__main__":
    out = Path(__file__).parent / "mosaic_errors"
    out.mkdir(exist_ok=True)
    here = Path(__file__).resolve().relative_to(ROOT)
    specs = [(f"samples/mosaic_errors.py:{n}", n, c) for n, c in mosaic_errors.FAILS_ON.items()]
    specs += [(f"{here}:{n}", n, c) for n, c in EXTRA.items()]
    for spec, name, chip in specs:
        error = capture(load_target(spec), Backend(get_chip(chip)), use_cache=False, memo=False,
                        jaxpr_text=False).stages.compile_error
        if error.status == "BLOCK_INDEX_OUT_OF_RANGE":  # the inspector's own words, not the compiler's
            continue
        text = error.message.replace(str(ROOT) + "/", "")
        (out / f"{name}.{chip}.txt").write_text(text + "\n")
        print(name, chip, text.splitlines()[0][:100])
