"""A GPT-2-style training step written the way most model code is: plain jax.numpy, a Python
loop over the layers, no jax.named_scope anywhere. 24 layers at small widths so it compiles in
seconds; the kernel graph groups it by source lines and by the loop's repetitions."""
import jax
import jax.numpy as jnp

LAYERS, D, HEADS, FF, VOCAB, CTX = 24, 64, 4, 256, 512, 64
BATCH, SEQ = 2, 32


def layer_norm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * g + b


def attention(x, p):
    b, t, d = x.shape
    qkv = x @ p["c_attn_w"] + p["c_attn_b"]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q, k, v = (a.reshape(b, t, HEADS, d // HEADS).transpose(0, 2, 1, 3) for a in (q, k, v))
    att = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(d // HEADS)
    att = jnp.where(jnp.tril(jnp.ones((t, t), bool)), att, -1e9)
    y = jax.nn.softmax(att, axis=-1) @ v
    return y.transpose(0, 2, 1, 3).reshape(b, t, d) @ p["c_proj_w"] + p["c_proj_b"]


def mlp(x, p):
    h = jax.nn.gelu(x @ p["fc_w"] + p["fc_b"])
    return h @ p["proj_w"] + p["proj_b"]


def block(x, p):
    x = x + attention(layer_norm(x, p["ln1_g"], p["ln1_b"]), p)
    return x + mlp(layer_norm(x, p["ln2_g"], p["ln2_b"]), p)


def loss_fn(params, tokens):
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    x = params["wte"][inputs] + params["wpe"][: inputs.shape[1]]
    for p in params["blocks"]:
        x = block(x, p)
    x = layer_norm(x, params["lnf_g"], params["lnf_b"])
    logits = x @ params["wte"].T
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def train_step(params, tokens, lr=1e-3):
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    return loss, jax.tree.map(lambda w, g: w - lr * g, params, grads)


def _shapes(layers=LAYERS):
    s = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    blk = {"ln1_g": s(D), "ln1_b": s(D), "c_attn_w": s(D, 3 * D), "c_attn_b": s(3 * D), "c_proj_w": s(D, D),
           "c_proj_b": s(D), "ln2_g": s(D), "ln2_b": s(D), "fc_w": s(D, FF), "fc_b": s(FF), "proj_w": s(FF, D),
           "proj_b": s(D)}
    params = {"wte": s(VOCAB, D), "wpe": s(CTX, D), "blocks": [dict(blk) for _ in range(layers)],
              "lnf_g": s(D), "lnf_b": s(D)}
    return params, jax.ShapeDtypeStruct((BATCH, SEQ + 1), jnp.int32)


train_step_4 = train_step  # the same step with 4 layers: a CPU compile in seconds

INSPECT = {
    "train_step": {"args": _shapes},
    "train_step_4": {"args": lambda: _shapes(4)},
    "loss_fn": {"args": _shapes},
}
