# Held-out kernel for jax-inspector (round nine), vendored from:
#   https://github.com/ArjunSom9/Pallas-Unbound/blob/436c70a478bb63c587fedb2608f286193aa3497b/src/pallas_flash/ops/interface.py
# with what it calls, from the same commit:
#   https://github.com/ArjunSom9/Pallas-Unbound/blob/436c70a478bb63c587fedb2608f286193aa3497b/src/pallas_flash/kernels/attention.py
#   https://github.com/ArjunSom9/Pallas-Unbound/blob/436c70a478bb63c587fedb2608f286193aa3497b/src/pallas_flash/kernels/pipeline.py
#   https://github.com/ArjunSom9/Pallas-Unbound/blob/436c70a478bb63c587fedb2608f286193aa3497b/src/pallas_flash/low_level/intrinsics.py
#   https://github.com/ArjunSom9/Pallas-Unbound/blob/436c70a478bb63c587fedb2608f286193aa3497b/src/pallas_flash/kernels/layout.py
# Licence: Apache License 2.0 (the repository's LICENSE and pyproject.toml; the files have no
# header of their own). Copyright Arjun Som (pyproject.toml's author); the LICENSE names no holder.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# Verbatim: mxu_matmul, vpu_stable_exp, cast_to_fp32 (intrinsics.py), get_padded_dim,
# pad_tensor, unpad_tensor (layout.py, docstrings cut, MXU_SIZE set to the 128 its fallback gives),
# pipeline_kv_loop (pipeline.py), flash_attention_kernel (attention.py), pallas_flash_attention
# (interface.py). Edits, so that it runs on jax 0.10: pl.load(ref, idx) written ref[idx] and
# pl.store(ref, idx, v) written ref[idx] = v (pl.load and pl.store are gone); the module's
# BLOCK_Q and BLOCK_KV static keywords of pallas_flash_attention, their defaults the module's.
# Ours, below the "ours" line: a wrapper, a reference, INSPECT.
# Style: non-causal attention for training: a (batch, heads, q blocks) grid, no
# dimension_semantics, no compiler_params; q and o as (1, 1, BLOCK_Q, head_dim) blocks, the WHOLE
# padded K and V of a head as one (1, 1, seq, head_dim) block each (double-buffered), the body a
# fori_loop over BLOCK_KV-row slices of them (pl.Slice), k transposed with swapaxes before the
# matmul, an online softmax with (BLOCK_Q, head_dim) f32 and (BLOCK_Q, 1) carries, the
# exponentials cast to bf16 before the second matmul. q scaled by XLA just before the kernel.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from functools import partial
from typing import Tuple, Sequence


# ----------------------------------------------------------------- intrinsics.py (verbatim)

def mxu_matmul(lhs: jax.Array, rhs: jax.Array, trans_rhs: bool = False) -> jax.Array:
    """
    Directly targets the TPU v5e Matrix Multiplication Unit (MXU).
    """
    lhs_bf16 = lhs.astype(jnp.bfloat16)
    rhs_bf16 = rhs.astype(jnp.bfloat16)

    if trans_rhs:
        # Contract LHS last dim with RHS last dim (equivalent to Q @ K^T)
        dn = (((len(lhs.shape) - 1,), (len(rhs.shape) - 1,)), ((), ()))
    else:
        # Contract LHS last dim with RHS first dim (equivalent to P @ V)
        dn = (((len(lhs.shape) - 1,), (0,)), ((), ()))

    return jax.lax.dot_general(
        lhs_bf16,
        rhs_bf16,
        dimension_numbers=dn,
        precision=jax.lax.Precision.DEFAULT,
        preferred_element_type=jnp.float32
    )

def vpu_stable_exp(x: jax.Array, max_val: jax.Array) -> jax.Array:
    x_f32 = x.astype(jnp.float32)
    max_f32 = max_val.astype(jnp.float32)
    res = jnp.exp(x_f32 - max_f32)
    return res.astype(jnp.bfloat16)

def cast_to_fp32(x: jax.Array) -> jax.Array:
    return x.astype(jnp.float32)


# ----------------------------------------------------------------- layout.py (verbatim, docstrings cut)

MXU_SIZE = 128

def get_padded_dim(dim: int, alignment: int = MXU_SIZE) -> int:
    return (dim + alignment - 1) // alignment * alignment

def pad_tensor(x: jax.Array, axes: Sequence[int] = (-2, -1), alignment: int = MXU_SIZE) -> Tuple[jax.Array, Tuple[int, ...]]:
    original_shape = x.shape
    rank = len(original_shape)

    # Normalize negative axes to positive indices
    normalized_axes = [ax % rank for ax in axes]

    pad_widths = []
    requires_padding = False

    for i, dim in enumerate(original_shape):
        if i in normalized_axes:
            padded_dim = get_padded_dim(dim, alignment)
            pad_amount = padded_dim - dim
            pad_widths.append((0, pad_amount))
            if pad_amount > 0:
                requires_padding = True
        else:
            pad_widths.append((0, 0))

    if not requires_padding:
        return x, original_shape

    padded_x = jnp.pad(x, pad_widths, mode='constant', constant_values=0)
    return padded_x, original_shape

def unpad_tensor(x: jax.Array, original_shape: Tuple[int, ...]) -> jax.Array:
    if x.shape == original_shape:
        return x

    # Construct a tuple of slices spanning exactly the original dimensions
    slices = tuple(slice(0, dim) for dim in original_shape)
    return x[slices]


# ----------------------------------------------------------------- pipeline.py

def pipeline_kv_loop(
    q_block: jax.Array,
    k_ref,
    v_ref,
    padded_seq_len: int,
    original_seq_len: int,
    block_kv: int,
    head_dim: int
) -> Tuple[jax.Array, jax.Array, jax.Array]:
    block_q = q_block.shape[0]
    num_kv_steps = padded_seq_len // block_kv

    # Accumulators in FP32
    o_acc = jnp.zeros((block_q, head_dim), dtype=jnp.float32)
    m_i = jnp.full((block_q, 1), -jnp.inf, dtype=jnp.float32)
    l_i = jnp.zeros((block_q, 1), dtype=jnp.float32)

    def kv_step(j: int, carry: Tuple[jax.Array, jax.Array, jax.Array]):
        o_acc_prev, m_prev, l_prev = carry

        # Load blocks (batch and head are already isolated by BlockSpec, so we use 0)
        k_block = k_ref[0, 0, pl.Slice(j * block_kv, block_kv), slice(None)]
        v_block = v_ref[0, 0, pl.Slice(j * block_kv, block_kv), slice(None)]

        # Matrix Multiply
        s_ij = mxu_matmul(q_block, jnp.swapaxes(k_block, 0, 1))

        # Padding Masking: Set out-of-bounds logits to effectively -infinity
        kv_indices = j * block_kv + jnp.arange(block_kv)
        mask = kv_indices < original_seq_len
        s_ij = jnp.where(mask[None, :], s_ij, -1e10)

        # Online Softmax Update (VPU)
        m_curr = jnp.maximum(m_prev, jnp.max(cast_to_fp32(s_ij), axis=-1, keepdims=True))
        p_ij = vpu_stable_exp(s_ij, m_curr)

        scale_factor = jnp.exp(m_prev - m_curr)
        l_curr = l_prev * scale_factor + jnp.sum(p_ij, axis=-1, keepdims=True)
        o_acc_scaled = o_acc_prev * scale_factor

        # Accumulate Output
        o_acc_curr = o_acc_scaled + cast_to_fp32(mxu_matmul(p_ij, v_block))

        return (o_acc_curr, m_curr, l_curr)

    o_acc_final, m_final, l_final = jax.lax.fori_loop(0, num_kv_steps, kv_step, (o_acc, m_i, l_i))
    return o_acc_final / l_final, m_final, l_final


# ----------------------------------------------------------------- attention.py

def flash_attention_kernel(
    q_ref, k_ref, v_ref, o_ref,
    *,
    padded_seq_len: int,
    original_seq_len: int,
    block_kv: int,
    head_dim: int
):
    # Load Q block using 0 for batch/head as they are isolated by BlockSpec
    q_block = q_ref[0, 0, slice(None), slice(None)]
    # Ensure rank is normalized for the pipeline
    q_block_2d = q_block.reshape(-1, head_dim)

    # Execute hardware-pipelined loop
    o_acc_2d, _, _ = pipeline_kv_loop(
        q_block=q_block_2d,
        k_ref=k_ref,
        v_ref=v_ref,
        padded_seq_len=padded_seq_len,
        original_seq_len=original_seq_len,
        block_kv=block_kv,
        head_dim=head_dim
    )

    # Cast to match HBM ref dtype and store
    o_ref[0, 0, slice(None), slice(None)] = o_acc_2d.astype(jnp.bfloat16)


# ----------------------------------------------------------------- interface.py

# v5e Optimized Block Sizes
BLOCK_Q = 1024
BLOCK_KV = 128

@partial(jax.jit, static_argnames=("BLOCK_Q", "BLOCK_KV"))
def pallas_flash_attention(q: jax.Array, k: jax.Array, v: jax.Array, BLOCK_Q: int = BLOCK_Q, BLOCK_KV: int = BLOCK_KV) -> jax.Array:
    # 0. Early cast to prevent late-stage XLA setup copies
    q = q.astype(jnp.bfloat16)
    k = k.astype(jnp.bfloat16)
    v = v.astype(jnp.bfloat16)

    # 1. Capture original metadata
    orig_batch, orig_heads, orig_seq, orig_dim = q.shape

    # 2. Hardware Alignment (Padding)
    q_pad_h, q_orig_shape = pad_tensor(q, axes=(-1,), alignment=128)
    k_pad_h, _ = pad_tensor(k, axes=(-1,), alignment=128)
    v_pad_h, _ = pad_tensor(v, axes=(-1,), alignment=128)

    q_pad, _ = pad_tensor(q_pad_h, axes=(-2,), alignment=BLOCK_Q)
    k_pad, _ = pad_tensor(k_pad_h, axes=(-2,), alignment=BLOCK_KV)
    v_pad, _ = pad_tensor(v_pad_h, axes=(-2,), alignment=BLOCK_KV)

    batch_size, num_heads, padded_seq_q, head_dim_pad = q_pad.shape
    _, _, padded_seq_kv, _ = k_pad.shape

    # 3. Kernel Configuration
    scale = 1.0 / jnp.sqrt(head_dim_pad)
    q_scaled = q_pad * scale

    grid = (batch_size, num_heads, padded_seq_q // BLOCK_Q)

    # 4. Define BlockSpecs (Restored to match inputs PyTree perfectly)
    in_specs = (
        pl.BlockSpec(
            index_map=lambda b, h, q_idx: (b, h, q_idx, 0),
            block_shape=(1, 1, BLOCK_Q, head_dim_pad)
        ),
        pl.BlockSpec(
            index_map=lambda b, h, q_idx: (b, h, 0, 0),
            block_shape=(1, 1, padded_seq_kv, head_dim_pad)
        ),
        pl.BlockSpec(
            index_map=lambda b, h, q_idx: (b, h, 0, 0),
            block_shape=(1, 1, padded_seq_kv, head_dim_pad)
        ),
    )

    out_spec = pl.BlockSpec(
        index_map=lambda b, h, q_idx: (b, h, q_idx, 0),
        block_shape=(1, 1, BLOCK_Q, head_dim_pad)
    )

    # 5. Invoke Pallas
    pallas_op = pl.pallas_call(
        partial(
            flash_attention_kernel,
            padded_seq_len=padded_seq_kv,
            original_seq_len=orig_seq,
            block_kv=BLOCK_KV,
            head_dim=head_dim_pad
        ),
        out_shape=jax.ShapeDtypeStruct(q_scaled.shape, jnp.bfloat16),
        in_specs=in_specs,
        out_specs=out_spec,
        grid=grid
    )

    o_pad = pallas_op(q_scaled, k_pad, v_pad)
    return unpad_tensor(o_pad, q_orig_shape)


# ----------------------------------------------------------------------------- ours


def unbound_flash_attention(q, k, v, block_q=1024, block_kv=128):
    return pallas_flash_attention(q, k, v, BLOCK_Q=block_q, BLOCK_KV=block_kv)


def unbound_flash_attention_reference(q, k, v, block_q=1024, block_kv=128):
    """Non-causal attention, softmax(q k^T / sqrt(d)) v, in f32."""
    q32, k32, v32 = (x.astype(jnp.float32) for x in (q, k, v))
    s = jnp.einsum("bhqd,bhkd->bhqk", q32, k32) / (q.shape[-1] ** 0.5)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v32).astype(jnp.bfloat16)


INSPECT = {
    "unbound_flash_attention": {
        "args": "bf16[1,2,1024,128] bf16[1,2,1024,128] bf16[1,2,1024,128]",
        "params": {"block_q": [256, 512], "block_kv": [128, 256]},
        "reference": "unbound_flash_attention_reference",
    },
}
