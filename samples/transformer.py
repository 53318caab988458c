"""A decoder-only transformer training step in plain jnp: a large program for the fusion view
and the benchmarks. 12 layers, unrolled (a Python loop, no scan), d_model 1024.

`inspector show samples/transformer.py:train_step --view hlo`; `train_step_24` has 24 layers;
`train_step_sharded` is a 2-layer bf16 step sharded FSDP x TP over a TPU topology (see below).
"""
import jax
import jax.numpy as jnp

D_MODEL, HEADS, D_FF, VOCAB = 1024, 8, 4096, 8192
BATCH, SEQ = 2, 256


def init_shapes(layers: int = 12, dtype=jnp.float32):
    """Parameter shapes as ShapeDtypeStructs: compiling needs no weights."""
    s = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)
    layer = {"ln1": s(D_MODEL), "wqkv": s(D_MODEL, 3 * D_MODEL), "wo": s(D_MODEL, D_MODEL),
             "ln2": s(D_MODEL), "w1": s(D_MODEL, D_FF), "w2": s(D_FF, D_MODEL)}
    return {"embed": s(VOCAB, D_MODEL), "layers": [dict(layer) for _ in range(layers)], "ln_f": s(D_MODEL)}


def _rms_norm(x, scale):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def _attention(x, p):
    b, s, d = x.shape
    qkv = x @ p["wqkv"]
    q, k, v = (t.reshape(b, s, HEADS, d // HEADS) for t in jnp.split(qkv, 3, axis=-1))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // HEADS).astype(x.dtype)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, d)
    return out @ p["wo"]


def _block(x, p):
    x = x + _attention(_rms_norm(x, p["ln1"]), p)
    h = jax.nn.gelu(_rms_norm(x, p["ln2"]) @ p["w1"])
    return x + h @ p["w2"]


def loss_fn(params, tokens):
    x = params["embed"][tokens[:, :-1]]
    for i, p in enumerate(params["layers"]):
        with jax.named_scope(f"layer{i}"):
            x = _block(x, p)
    logits = _rms_norm(x, params["ln_f"]) @ params["embed"].T
    labels = jax.nn.one_hot(tokens[:, 1:], VOCAB, dtype=logits.dtype)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))


def train_step(params, tokens, lr: float = 1e-3):
    """One SGD step: loss, gradients through every layer, parameter update."""
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    return loss, jax.tree.map(lambda w, g: w - lr * g, params, grads)


train_step_24 = train_step  # same code; INSPECT gives it 24 layers


def _inputs(layers):
    return lambda: (init_shapes(layers), jax.ShapeDtypeStruct((BATCH, SEQ + 1), jnp.int32))


INSPECT = {
    "train_step": {"args": _inputs(12)},
    "train_step_24": {"args": _inputs(24)},
    "loss_fn": {"args": _inputs(12)},
}


# ----------------------------------------------------------------------------- sharded (pods)
# FSDP over "data" (weights split on their d_model dim, gathered per layer; the batch split too)
# and tensor parallelism over "model" (attention heads and the MLP's hidden dim), in bf16.
# `inspector check samples/transformer.py:train_step_sharded --target tpu-v5e:16x16 --mesh data=64,model=4`
# answers "does it fit on a v5e-256?" without a TPU.

SHARDED = {"layers": 2, "d_model": 2048, "heads": 16, "d_ff": 8192, "vocab": 32768, "batch": 256, "seq": 2048}


def sharded_shapes(layers=SHARDED["layers"], d=SHARDED["d_model"], d_ff=SHARDED["d_ff"], vocab=SHARDED["vocab"],
                   batch=SHARDED["batch"], seq=SHARDED["seq"], dtype=jnp.bfloat16):
    s = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)
    layer = {"ln1": s(d), "wqkv": s(d, 3 * d), "wo": s(d, d), "ln2": s(d), "w1": s(d, d_ff), "w2": s(d_ff, d)}
    params = {"embed": s(vocab, d), "layers": [dict(layer) for _ in range(layers)], "ln_f": s(d)}
    return params, jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32)


def sharded_specs(mesh):
    """FSDP x TP: each weight's d_model dim over "data", its heads / hidden dim over "model"."""
    from jax.sharding import PartitionSpec as P

    layer = {"ln1": P(), "wqkv": P("data", "model"), "wo": P("model", "data"), "ln2": P(),
             "w1": P("data", "model"), "w2": P("model", "data")}
    params = {"embed": P("model", "data"), "layers": [dict(layer) for _ in range(SHARDED["layers"])], "ln_f": P()}
    return params, P("data", None)


def _attention_sharded(x, p, heads):
    from jax.sharding import PartitionSpec as P

    b, s, d = x.shape
    qkv = x @ p["wqkv"]
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in jnp.split(qkv, 3, axis=-1))
    q, k, v = (jax.lax.with_sharding_constraint(t, P("data", None, "model", None)) for t in (q, k, v))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // heads).astype(x.dtype)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e9).astype(jnp.float32), axis=-1).astype(x.dtype)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, d)
    return out @ p["wo"]


def loss_sharded(params, tokens, heads: int = SHARDED["heads"]):
    from jax.sharding import PartitionSpec as P

    act = lambda t: jax.lax.with_sharding_constraint(t, P("data", None, None))
    x = act(params["embed"][tokens[:, :-1]])
    for i, p in enumerate(params["layers"]):
        with jax.named_scope(f"layer{i}"):
            x = act(x + _attention_sharded(_rms_norm(x, p["ln1"]), p, heads))
            h = jax.nn.gelu(jax.lax.with_sharding_constraint(_rms_norm(x, p["ln2"]) @ p["w1"], P("data", None, "model")))
            x = act(x + h @ p["w2"])
    logits = jax.lax.with_sharding_constraint(_rms_norm(x, params["ln_f"]) @ params["embed"].T, P("data", None, "model"))
    logz = jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logits, tokens[:, 1:, None], axis=-1)[..., 0].astype(jnp.float32)
    return jnp.mean(logz - picked)


def train_step_sharded(params, tokens, lr: float = 1e-3):
    """One SGD step of the sharded transformer (bf16 weights; the loss in f32)."""
    loss, grads = jax.value_and_grad(loss_sharded)(params, tokens)
    return loss, jax.tree.map(lambda w, g: w - lr * g, params, grads)


INSPECT["train_step_sharded"] = {"args": sharded_shapes, "mesh": {"data": -1, "model": 4}, "shardings": sharded_specs}
