"""Programs written the way users write them, not the way the samples are: an MLP step with a
hand-written Adam update, and a residual stack as jax.lax.scan over stacked layer weights."""
import jax
import jax.numpy as jnp


def _mlp(params, x):
    for i, (w, b) in enumerate(params):
        with jax.named_scope(f"dense{i}"):
            x = x @ w + b
            if i < len(params) - 1:
                x = jax.nn.relu(x)
    return x


def mlp_adam_step(params, m, v, x, y, step):
    def loss(p):
        return jnp.mean((_mlp(p, x) - y) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    b1, b2, lr = 0.9, 0.999, 1e-3
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    t = step + 1
    upd = jax.tree.map(lambda m, v: lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + 1e-8), m, v)
    return l, jax.tree.map(lambda p, u: p - u, params, upd), m, v


def _mlp_args():
    s = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    p = [(s(128, 256), s(256)), (s(256, 256), s(256)), (s(256, 128), s(128))]
    return p, p, p, s(32, 128), s(32, 128), s()


def scan_step(w1, w2, x):
    def loss(w1, w2):
        def layer(h, ws):
            a, b = ws
            return h + jax.nn.gelu(h @ a) @ b, None
        h, _ = jax.lax.scan(layer, x, (w1, w2))
        return jnp.mean(h * h)
    return jax.grad(loss, argnums=(0, 1))(w1, w2)


def embed_rows(table, ids, scale):
    """An embedding lookup: a gather of 512 rows of a 32k-row table (reads the rows, not the table)."""
    return jnp.take(table, ids, axis=0) * scale


def f32_dot(a, b, precision="default"):
    """An f32 matmul at a precision: on a TPU, HIGH takes 3 bf16 MXU passes and HIGHEST 6."""
    return jnp.dot(a, b, precision=jax.lax.Precision[precision.upper()])


INSPECT = {
    "mlp_adam_step": {"args": _mlp_args},
    "scan_step": {"args": "f32[4,128,256] f32[4,256,128] f32[16,128]"},
    "embed_rows": {"args": "f32[32768,256] i32[512] f32[256]"},
    "f32_dot": {"args": "f32[1024,1024] f32[1024,1024]", "params": {"precision": ["default", "high", "highest"]}},
}
