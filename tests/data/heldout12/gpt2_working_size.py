"""tests/data/gpt2_plain.py (a GPT-2 step in plain jax.numpy) at a working size: GPT-2 small's
widths, two layers, a 32k vocabulary, 8 sequences of 512 tokens. Only the sizes are ours: the
model code is gpt2_plain's, read at these sizes (its attention reads the module's HEADS)."""
import pathlib
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import gpt2_plain  # noqa: E402

LAYERS, D, HEADS, FF, VOCAB, CTX, BATCH, SEQ = 2, 768, 12, 3072, 32768, 1024, 8, 512
gpt2_plain.HEADS = HEADS


def _shapes():
    s = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    blk = {"ln1_g": s(D), "ln1_b": s(D), "c_attn_w": s(D, 3 * D), "c_attn_b": s(3 * D), "c_proj_w": s(D, D),
           "c_proj_b": s(D), "ln2_g": s(D), "ln2_b": s(D), "fc_w": s(D, FF), "fc_b": s(FF), "proj_w": s(FF, D),
           "proj_b": s(D)}
    params = {"wte": s(VOCAB, D), "wpe": s(CTX, D), "blocks": [dict(blk) for _ in range(LAYERS)],
              "lnf_g": s(D), "lnf_b": s(D)}
    return params, jax.ShapeDtypeStruct((BATCH, SEQ + 1), jnp.int32)


def train_step(params, tokens):
    return gpt2_plain.train_step(params, tokens)


def loss_fn(params, tokens):
    return gpt2_plain.loss_fn(params, tokens)


INSPECT = {"train_step": {"args": _shapes}, "loss_fn": {"args": _shapes}}
