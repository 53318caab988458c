"""Small sharded targets for the pods tests: a two-matmul step over a data x model mesh (FSDP-ish
weights, data-parallel batch), one too big for 16 GiB per device on v5e:2x2, and Pallas kernels
under shard_map."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.sharding import PartitionSpec as P


def _loss(w1, w2, x):
    h = jax.nn.relu(x @ w1)
    h = jax.lax.with_sharding_constraint(h, P("data", "model"))
    return jnp.mean((h @ w2) ** 2)


def step(w1, w2, x):
    g1, g2 = jax.grad(_loss, argnums=(0, 1))(w1, w2, x)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


big_step = step  # INSPECT gives it weights of 4 GiB per device each: 25 GiB needed of 15.75 usable on v5e


def _shardings(mesh):
    return P("data", "model"), P("model", "data"), P("data", None)


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _doubled(x):
    return pl.pallas_call(_copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // 8,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))(x)


def _whole(x):  # each device's shard as one block: a grid of one step
    return pl.pallas_call(_copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1,),
                          in_specs=[pl.BlockSpec(x.shape, lambda i: (0, 0))],
                          out_specs=pl.BlockSpec(x.shape, lambda i: (0, 0)))(x)


def whole_shard_kernel(x):
    mesh = jax.sharding.get_abstract_mesh()
    return jax.shard_map(_whole, mesh=mesh, in_specs=P("data", None), out_specs=P("data", None), check_vma=False)(x)


def sharded_kernel(x):
    mesh = jax.sharding.get_abstract_mesh()
    return jax.shard_map(_doubled, mesh=mesh, in_specs=P("data", None), out_specs=P("data", None),
                         check_vma=False)(x)


def _mixed_body(x):
    y = jax.lax.all_to_all(x, "data", 0, 0, tiled=True)
    z = jax.lax.ppermute(y, "data", [(i, (i + 1) % 4) for i in range(4)])
    return jax.lax.psum(jnp.tanh(z) @ z.T, "data")


def mixed_collectives(x):  # an all-to-all, a collective-permute (async on TPU) and an all-reduce
    return jax.shard_map(_mixed_body, mesh=jax.sharding.get_abstract_mesh(), in_specs=P("data", None), out_specs=P(),
                         check_vma=False)(x)


INSPECT = {
    "step": {"args": "f32[256,512] f32[512,256] f32[64,256]", "mesh": {"data": 2, "model": 2}, "shardings": _shardings},
    "big_step": {"args": "f32[32768,131072] f32[131072,32768] f32[4096,32768]", "mesh": {"data": 2, "model": 2},
                 "shardings": "P('data','model') P('model','data') P('data',None)"},
    "sharded_kernel": {"args": "f32[64,128]", "mesh": {"data": -1}, "shardings": "P('data',None)"},
    # 6 MiB blocks per device: 12 MiB single-buffered (what Mosaic gives a one-step grid), 24 double
    "mixed_collectives": {"args": "f32[1024,256]", "mesh": {"data": 4}, "shardings": "P('data',None)"},
    "whole_shard_kernel": {"args": "f32[49152,128]", "mesh": {"data": -1}, "shardings": "P('data',None)"},
}
