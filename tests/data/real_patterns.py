"""Kernels in the shapes real kernels take (manual DMA, no grid, a grid sized at run time, vmap,
a nested emit_pipeline over HBM refs, pl.when branches), small enough for the tests."""
import functools
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as plgpu

def manual_dma(x):  # x f32[8*4, 128] in HBM; copy row blocks into VMEM scratch, double the values
    def kernel(x_hbm, o_ref, buf, sem):
        i = pl.program_id(0)
        cp = pltpu.make_async_copy(x_hbm.at[pl.ds(i * 8, 8)], buf, sem)
        cp.start(); cp.wait()
        o_ref[...] = buf[...] * 2
    return pl.pallas_call(kernel, grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])(x)

def no_grid(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

def dyn_grid(x, n):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    return pl.pallas_call(kernel, grid=(n[0],), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

dyn_grid_abstract = dyn_grid


def vmapped(x):  # x f32[4, 64, 128]
    def one(x):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 3
        return pl.pallas_call(kernel, grid=(x.shape[0] // 8,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return jax.vmap(one)(x)

def vmapped_parallel(x):  # as vmapped, with dimension_semantics: libtpu compiles it, the 0.10 interpreter cannot run it
    def one(x):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 3
        return pl.pallas_call(kernel, grid=(x.shape[0] // 8,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)
    return jax.vmap(one)(x)

def nested(x):  # x f32[512, 512] HBM; outer grid of 2 over rows, inner emit_pipeline over (256,128) blocks
    def kernel(x_hbm, o_hbm):
        i = pl.program_id(0)
        def inner(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        pltpu.emit_pipeline(inner, grid=(2, 4),
            in_specs=[pl.BlockSpec((128, 128), lambda a, b: (a, b), pipeline_mode=pl.Buffered(3))],
            out_specs=[pl.BlockSpec((128, 128), lambda a, b: (a, b))])(
                x_hbm.at[pl.ds(i * 256, 256)], o_hbm.at[pl.ds(i * 256, 256)])
    return pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)

def nested_half_written(x):  # as nested, but its pipeline's grid covers only the first half of each slice's columns
    def kernel(x_hbm, o_hbm):
        i = pl.program_id(0)
        def inner(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        pltpu.emit_pipeline(inner, grid=(2, 2),
            in_specs=[pl.BlockSpec((128, 128), lambda a, b: (a, b))],
            out_specs=[pl.BlockSpec((128, 128), lambda a, b: (a, b))])(
                x_hbm.at[pl.ds(i * 256, 256)], o_hbm.at[pl.ds(i * 256, 256)])
    return pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

def nested_in_vmem(x, w):  # x f32[16,2048], w f32[2048,256]: a (1, 2) grid of VMEM blocks spanning the
    # whole reduction; the body pipelines 512-wide slices of those blocks (VMEM to VMEM, nothing from HBM)
    def kernel(x_ref, w_ref, o_ref, acc):
        acc[...] = jnp.zeros_like(acc)
        def step(x_blk, w_blk):
            acc[...] += jnp.dot(x_blk[...], w_blk[...], preferred_element_type=jnp.float32)
        pltpu.emit_pipeline(step, grid=(4,), in_specs=[pl.BlockSpec((16, 512), lambda k: (0, k)),
                                                       pl.BlockSpec((512, 128), lambda k: (k, 0))])(x_ref, w_ref)
        o_ref[...] = acc[...]
    return pl.pallas_call(kernel, grid=(1, 2), in_specs=[pl.BlockSpec((16, 2048), lambda i, j: (i, 0)),
        pl.BlockSpec((2048, 128), lambda i, j: (0, j))], out_specs=pl.BlockSpec((16, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((16, 256), x.dtype),
        scratch_shapes=[pltpu.VMEM((16, 128), jnp.float32)])(x, w)

def nested_given_buffers(x):  # as nested, in one step, on buffers the kernel allocates and hands to the pipeline
    def kernel(x_hbm, o_hbm):
        def inner(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        spec = pl.BlockSpec((128, 128), lambda a, b: (a, b))
        pipe = pltpu.emit_pipeline(inner, grid=(4, 4), in_specs=[spec], out_specs=[spec])
        @pl.with_scoped(allocations=(pltpu.BufferedRef.input(spec, x.dtype, buffer_count=2),
                                     pltpu.BufferedRef.output(spec, x.dtype, buffer_count=2)))
        def run(allocations):
            pipe(x_hbm, o_hbm, allocations=allocations)
        run()
    return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

def dynamic_rows_copy(x, n):  # x f32[64,128] in HBM; n i32[1] (<= 8): the first n rows through an (8, 128) VMEM buffer
    def kernel(n_ref, x_hbm, o_hbm, buf, sem):
        rows = n_ref[0]
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, rows)], buf.at[pl.ds(0, rows)], sem).start()
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, rows)], buf.at[pl.ds(0, rows)], sem).wait()
        pltpu.sync_copy(buf.at[pl.ds(0, rows)], o_hbm.at[pl.ds(0, rows)])
    return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])(n, x)

def nested_body_dma(x):  # as nested, in one step; the pipeline's body also copies each block to a second output by hand
    def kernel(x_hbm, o_hbm, c_hbm, sem):
        def inner(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
            a, b = pl.program_id(0), pl.program_id(1)
            copy = pltpu.make_async_copy(x_ref, c_hbm.at[pl.ds(a * 128, 128), pl.ds(b * 128, 128)], sem)
            copy.start()
            copy.wait()
        spec = pl.BlockSpec((128, 128), lambda a, b: (a, b))
        pltpu.emit_pipeline(inner, grid=(4, 4), in_specs=[spec], out_specs=[spec])(x_hbm, o_hbm)
    return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2, out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype)] * 2,
        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)

def limit_of_a_larger_chip(x, *, block=2048):  # x f32[4096, 1024]: 32 MiB of blocks under a 96 MiB vmem_limit_bytes
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    return pl.pallas_call(kernel, grid=(x.shape[0] // block,), in_specs=[pl.BlockSpec((block, 1024), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block, 1024), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=96 * 2**20))(x)

def resident_input(x):  # x f32[64,128] whole in VMEM (memory_space given, no block); grid of 4 over the output rows
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 16, 16), :] + 1
    return pl.pallas_call(kernel, grid=(4,), in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec((16, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

def aligned_offsets(x, starts):  # x f32[64,128]; starts i32[3], multiples of 8: a 16-row window each, element-indexed
    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 8), :] * 2
    return pl.pallas_call(kernel, grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(3,),
        in_specs=[pl.BlockSpec((pl.Element(16), pl.Element(128)), lambda i, s: (pl.multiple_of(s[i], 8), 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, s: (pl.multiple_of(i * 1, 1), 0))),
        out_shape=jax.ShapeDtypeStruct((24, 128), x.dtype))(starts, x)

def with_cond(x):
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.dot(x_ref[...], x_ref[...])
        @pl.when(pl.program_id(0) != 0)
        def _():
            o_ref[...] = x_ref[...]
    return pl.pallas_call(kernel, grid=(4,), in_specs=[pl.BlockSpec((128, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct((512, 128), x.dtype))(x)

def in_place_rows(cache, pos):  # cache f32[4, 64, 128] aliased to the output; one 8-row tile per sequence rewritten
    def kernel(pos_ref, c_ref, o_ref):
        o_ref[...] = c_ref[...] + 1
    tile = lambda b, pos: (b, pos[b] // 8, 0)
    return pl.pallas_call(kernel, grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(cache.shape[0],),
        in_specs=[pl.BlockSpec((None, 8, 128), tile)], out_specs=pl.BlockSpec((None, 8, 128), tile)),
        out_shape=jax.ShapeDtypeStruct(cache.shape, cache.dtype), input_output_aliases={1: 0})(pos, cache)

def interpret_flag(x):  # the kernel's author passed interpret=True, as test code often does
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    return pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True)(x)

def accumulate_rows(x):  # x f32[16,256]: row sums accumulated over a K axis with pl.program_id; no custom_vjp
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[...] += jnp.broadcast_to(jnp.sum(x_ref[...], axis=1, keepdims=True), o_ref.shape)
    return pl.pallas_call(kernel, grid=(2, 2), in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)), out_shape=jax.ShapeDtypeStruct((16, 128), x.dtype))(x)[:, 0]

def accumulate_rows_ref(x):
    return jnp.sum(x, axis=1)

def in_cond(x, flag):  # two kernels in the branches of a program-level lax.cond (a decode / prefill switch)
    def scale(x, s, bm):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * s
        return pl.pallas_call(kernel, grid=(x.shape[0] // bm,), in_specs=[pl.BlockSpec((bm, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((bm, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return jax.lax.cond(flag[0] > 0, lambda x: scale(x, 2.0, 64), lambda x: scale(x, 3.0, 128), x)

def revisit_any(x):  # x f32[16,128]: out block k written at steps (0, k) and (1, k), legal with RevisitMode.ANY
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = x_ref[...]
        @pl.when(pl.program_id(0) == 1)
        def _():
            o_ref[...] += x_ref[...]
    return pl.pallas_call(kernel, grid=(2, 2), in_specs=[pl.BlockSpec((8, 128), lambda i, k: (k, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (k, 0), pipeline_mode=pl.Buffered(1, revisit=pl.RevisitMode.ANY)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

def revisit_any_ref(x):
    return 2 * x

def int4_weights(x, w):  # x bf16[128,512], w s4[512,256]: 4-bit weights packed 8 to a word, dequantized in the kernel
    def kernel(x_ref, w_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)
        acc_ref[...] += jnp.dot(x_ref[...], w_ref[...].astype(jnp.bfloat16), preferred_element_type=jnp.float32)
        o_ref[...] = acc_ref[...]
    return pl.pallas_call(kernel, grid=(w.shape[1] // 128, x.shape[1] // 256),
        in_specs=[pl.BlockSpec((128, 256), lambda j, k: (0, k)), pl.BlockSpec((256, 128), lambda j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda j, k: (0, j)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)])(x, w)

def bool_mask(m, x):  # a bool block of 8 rows: Mosaic keeps bool as int32, so 8 rows tile (no packing)
    def kernel(m_ref, x_ref, o_ref):
        o_ref[...] = jnp.where(m_ref[...], x_ref[...], 0.0)
    return pl.pallas_call(kernel, grid=(m.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)), pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(m, x)

def bool_mask_ref(m, x):
    return jnp.where(m, x, 0.0)

def two_outputs_list(x):  # out_shape as a list, as many kernels write it: pallas_call returns a tuple
    def kernel(x_ref, a_ref, b_ref):
        a_ref[...] = jnp.abs(x_ref[...])
        b_ref[...] = x_ref[...] * 2
    return pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype)] * 2)(x)

def two_outputs_list_ref(x):
    return [jnp.abs(x), x * 2]

def triton_add(x, y):  # a GPU kernel with Triton's compiler params, as jax's own GPU kernels give them
    spec = pl.BlockSpec((16, 128), lambda i: (i, 0))
    return pl.pallas_call(lambda x_ref, y_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 2 * y_ref[...]),
        grid=(x.shape[0] // 16,), in_specs=[spec, spec], out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2))(x, y)

def triton_add_ref(x, y):
    return x + 2 * y

def sharded_rows(x):  # a kernel per shard under shard_map over the program's mesh, then a psum
    def rowsum(s):
        def kernel(x_ref, o_ref):
            @pl.when(pl.program_id(0) == 0)
            def _():
                o_ref[...] = jnp.zeros_like(o_ref)
            o_ref[...] += x_ref[...]
        return pl.pallas_call(kernel, grid=(s.shape[0] // 8,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)), out_shape=jax.ShapeDtypeStruct((8, 128), s.dtype))(s)
    P = jax.sharding.PartitionSpec
    return jax.shard_map(lambda s: jax.lax.psum(rowsum(s), "data"), mesh=jax.sharding.get_abstract_mesh(),
                         in_specs=P("data", None), out_specs=P(), check_vma=False)(x)

def sharded_rows_ref(x):
    return x.reshape(-1, 8, 128).sum(axis=0)

INSPECT = {
    "sharded_rows": {"args": "f32[64,128]", "reference": "sharded_rows_ref", "mesh": {"data": 4},
                     "shardings": "P('data',None)", "atol": 1e-4, "rtol": 1e-5},
    "triton_add": {"args": "f32[64,128] f32[64,128]", "reference": "triton_add_ref"},
    "two_outputs_list": {"args": "f32[16,128]", "reference": "two_outputs_list_ref"},
    "bool_mask": {"args": "pred[64,128] f32[64,128]", "reference": "bool_mask_ref"},
    "int4_weights": {"args": "bf16[128,512] s4[512,256]"},
    "revisit_any": {"args": "f32[16,128]", "reference": "revisit_any_ref"},
    "manual_dma": {"args": "f32[32,128]"},
    "no_grid": {"args": "f32[8,128]"},
    "in_cond": {"args": "f32[256,128] i32[1]"},
    "accumulate_rows": {"args": "f32[16,256]", "reference": "accumulate_rows_ref", "atol": 1e-4, "rtol": 1e-4},
    "interpret_flag": {"args": "f32[16,128]"},
    "aligned_offsets": {"args": lambda: (jnp.ones((64, 128)), jnp.array([0, 8, 48], jnp.int32))},
    "resident_input": {"args": "f32[64,128]"},
    "dyn_grid": {"args": lambda: (jnp.ones((32, 128)), jnp.array([4], jnp.int32))},
    "dyn_grid_abstract": {"args": "f32[32,128] i32[1]"},
    "vmapped": {"args": "f32[4,64,128]"},
    "vmapped_parallel": {"args": "f32[2,16,128]"},
    "nested": {"args": "f32[512,512]"},
    "nested_half_written": {"args": "f32[512,512]"},
    "limit_of_a_larger_chip": {"args": "f32[4096,1024]"},
    "nested_in_vmem": {"args": "f32[16,2048] f32[2048,256]"},
    "nested_given_buffers": {"args": "f32[512,512]"},
    "dynamic_rows_copy": {"args": "f32[64,128] i32[1]"},
    "nested_body_dma": {"args": "f32[512,512]"},
    "with_cond": {"args": "f32[128,128]"},
    "in_place_rows": {"args": lambda: (jnp.zeros((4, 64, 128)), jnp.array([0, 9, 40, 63], jnp.int32))},
}
