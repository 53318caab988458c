"""A decoder-only transformer training step in plain jnp: a large program for the fusion view
and the benchmarks. 12 layers, unrolled (a Python loop, no scan), d_model 1024.

`inspector show samples/transformer.py:train_step --view hlo`; `train_step_24` has 24 layers.
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
