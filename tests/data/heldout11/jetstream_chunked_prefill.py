# Held-out kernel for jax-inspector (round eleven), vendored from AI-Hypercomputer/JetStream (its
# experimental JAX inference engine; the repository is archived, Apache-2.0):
#   https://github.com/AI-Hypercomputer/JetStream/blob/acd4f5ad50ed2fb38e0e5bd7defd81e34a62706c/experimental/jax/inference/kernel/attention/tpu/chunked_prefill_attention.py
# (last changed upstream in 1d6b4563b94f9221650f6cfd06b18369a697f366), with the class
# MultiPageAsyncCopyDescriptor and `from_int8` it calls inlined from the same commit's
#   experimental/jax/inference/kernel/attention/tpu/paged_attention.py and .../quantization_utils.py
# (those two files are copies of JAX's paged attention, "Copyright 2024 The JAX Authors", Apache-2.0)
# in place of the file's `from inference.kernel.attention.tpu.paged_attention import *` (marked "inlined").
# Licence: Apache License 2.0 (the file's header, kept below, and the repository's LICENSE).
# Copyright 2024 Google LLC (chunked_prefill_attention.py); Copyright 2024 The JAX Authors (the inlined helpers).
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
# Verbatim: chunked_prefill_attention_impl and chunked_prefill_attention. Edits: the star import
# replaced by what the file takes from it (the descriptor class, from_int8 and MAX_INT8, and
# `from jax import lax`, which the loop bound uses); pltpu.TPUMemorySpace.ANY written pl.ANY
# (twice: jax 0.10 has no TPUMemorySpace, and its pltpu.MemorySpace no ANY). Ours, below the "ours" line: a
# wrapper, a reference (the same causal attention over the pages the kernel loads, in jnp), INSPECT.
# Style: a 1-D grid over the KV heads; three scalar-prefetch operands (the context length, the page
# table, a DMA buffer index the body rewrites); the GQA group's (group, chunk, head_dim) q block;
# K and V pages left in HBM (memory_space ANY) and copied by hand, page by page, into two
# double-buffered (2, pages_per_chunk, page_size, head_dim) VMEM scratch buffers, the next chunk's
# copy started before this one is waited on; the body a ROLLED jax.lax.fori_loop over the KV chunks
# (its trip count computed from the prefetched length) with no carries, the state in the output
# refs (out, and the (group, chunk, 1) f32 row max and sum, outputs whose block never moves); in it
# a (chunk, chunk) causal mask built with iotas, and a second rolled fori_loop over the group's
# heads, each step an f32 (chunk, chunk) score matmul, its max, exp and row sum, and p @ v into the
# output block; the last chunk divides by the sum.
"""
Copyright 2024 Google LLC

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

     https://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
"""

"""Chunked prefill TPU kernel with paged kv cache."""

import jax
from jax import numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# --- inlined (see the header): `from inference.kernel.attention.tpu.paged_attention import *` ---
from jax import lax

MAX_INT8 = 127.5  # from quantization_utils.py


def from_int8(
    x: jnp.ndarray, h: jnp.ndarray, dtype: jnp.dtype = jnp.bfloat16
) -> jnp.ndarray:
  """Converts an int8 array to a float array with a scale (quantization_utils.py)."""
  return x.astype(dtype) * h / MAX_INT8


class MultiPageAsyncCopyDescriptor:
  """Descriptor for async copy of multiple K/V pages from HBM."""

  def __init__(
      self,
      pages_hbm_ref,
      scales_pages_hbm_ref,
      vmem_buffer,
      scales_vmem_buffer,
      sem,
      page_indices,
      page_indices_start_offset,
      num_pages_to_load,
      head_index,
  ):
    self._vmem_buffer = vmem_buffer
    self._scales_vmem_buffer = scales_vmem_buffer
    self._num_pages_to_load = num_pages_to_load
    if head_index is not None:
      self._pages_hbm_ref = pages_hbm_ref.at[head_index]
      if scales_pages_hbm_ref is not None:
        self._scales_pages_hbm_ref = scales_pages_hbm_ref.at[head_index]
      else:
        self._scales_pages_hbm_ref = None
    else:
      self._pages_hbm_ref = pages_hbm_ref
      self._scales_pages_hbm_ref = scales_pages_hbm_ref
    self._sem = sem
    self._page_indices = page_indices
    self._page_indices_start_offset = page_indices_start_offset
    self._async_copies = [
        self._make_async_copy(i) for i in range(self._num_pages_to_load)
    ]
    if (
        self._scales_pages_hbm_ref is not None
        and self._scales_vmem_buffer is not None
    ):
      self._async_copies += [
          self._make_scales_async_copy(i)
          for i in range(self._num_pages_to_load)
      ]

  def _make_async_copy(self, i):
    page_index = self._page_indices[self._page_indices_start_offset + i]
    return pltpu.make_async_copy(
        self._pages_hbm_ref.at[page_index], self._vmem_buffer.at[i], self._sem
    )

  def _make_scales_async_copy(self, i):
    page_index = self._page_indices[self._page_indices_start_offset + i]
    return pltpu.make_async_copy(
        self._scales_pages_hbm_ref.at[
            page_index
        ],  # pytype: disable=attribute-error
        self._scales_vmem_buffer.at[i],  # pytype: disable=attribute-error
        self._sem,
    )

  def start(self):
    """Starts the async copies."""
    for async_copy in self._async_copies:
      async_copy.start()

  def _maybe_dequantize(self, x, x_scale, dtype=jnp.bfloat16):
    if x_scale is None:
      return x.astype(dtype)
    return from_int8(x, x_scale, dtype=dtype)

  def wait_and_get_loaded(self) -> jax.Array:
    """Wait async copies and gets the loaded buffer as a jax.Array."""
    for async_copy in self._async_copies:
      async_copy.wait()
    head_dim = self._vmem_buffer.shape[-1]
    jax_array = self._vmem_buffer[...].astype(jnp.float32)
    if self._scales_vmem_buffer is not None:
      scales_jax_array = self._scales_vmem_buffer[...].astype(jnp.float32)
    else:
      scales_jax_array = None
    jax_array = self._maybe_dequantize(jax_array, scales_jax_array)
    return jax_array.reshape(-1, head_dim)
# --- end of inlined helpers ---


DEFAULT_MASK_VALUE = -2.3819763e38  # Set to a large negative number.


def chunked_prefill_attention_impl(
    length_ref,  # shape: (1,), smem,
    page_indices_ref,  # shape: (max_seq_len // page_size), smem,
    buffer_index_ref,  # shape: (1,), smem,
    q_ref,  # shape: (group_size, chunk, head_dim), vmem,
    k_pages_hbm_ref,  # shape: (num_kv_heads, num_pages, page_size, head_dim), hbm
    v_pages_hbm_ref,  # shape: (num_kv_heads, num_pages, page_size, head_dim), hbm
    out_ref,  # shape: (group_size, chunk, head_dim), vmem,
    l_ref,  # shape: (group_size, chunk, 1), vmem,
    m_ref,  # shape: (group_size, chunk, 1), vmem,
    k_vmem_buffer,  # shape: (2, page_per_chunk, page_size, head_dim), vmem,
    v_vmem_buffer,  # shape: (2, page_per_chunk, page_size, head_dim), vmem,
    sem,
):
  h = pl.program_id(0)
  page_size = k_pages_hbm_ref.shape[2]
  head_dim = k_pages_hbm_ref.shape[3]
  group_size = q_ref.shape[0]
  num_kv_heads = k_pages_hbm_ref.shape[0]
  chunk_size = q_ref.shape[1]
  length = length_ref[0]
  q_chunk_idx = jax.lax.div(length, chunk_size)
  reminder = jax.lax.rem(length, chunk_size)
  q_chunk_idx -= jnp.where(reminder > 0, 0, 1)
  out_ref[...] = jnp.zeros_like(out_ref)

  def create_kv_async_copy_descriptors(h, i, buffer_index):
    pages_to_load = chunk_size // page_size
    page_offset = i * pages_to_load
    async_copy_k = MultiPageAsyncCopyDescriptor(
        k_pages_hbm_ref,
        None,
        k_vmem_buffer.at[buffer_index],
        None,
        sem,
        page_indices_ref,
        page_offset,
        pages_to_load,
        head_index=h,
    )
    async_copy_v = MultiPageAsyncCopyDescriptor(
        v_pages_hbm_ref,
        None,
        v_vmem_buffer.at[buffer_index],
        None,
        sem,
        page_indices_ref,
        page_offset,
        pages_to_load,
        head_index=h,
    )
    return async_copy_k, async_copy_v

  def next_block_indice(h, i):
    return jax.lax.cond(
        (i + 1) * chunk_size < length, lambda: (h, i + 1), lambda: (h + 1, 0)
    )

  def per_kv_chunk_body(i, _):
    @pl.when((i * chunk_size) < length)
    def body():
      buffer_index = buffer_index_ref[0]

      @pl.when(i == 0)
      def init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)

        @pl.when(h == 0)
        def prefetch_first_kv():
          # prefetch the first kv chunk.
          async_copy_k, async_copy_v = create_kv_async_copy_descriptors(
              h, i, buffer_index
          )
          async_copy_k.start()
          async_copy_v.start()

      next_h, next_i = next_block_indice(h, i)

      @pl.when((next_h < num_kv_heads) & (next_i <= q_chunk_idx))
      def prefetch_next_block():
        # prefetch the kv chunk for next iteration.
        next_buffer_index = jnp.where(buffer_index == 0, 1, 0)
        async_copy_next_k, async_copy_next_v = create_kv_async_copy_descriptors(
            next_h, next_i, next_buffer_index
        )

        async_copy_next_k.start()
        async_copy_next_v.start()
        buffer_index_ref[0] = next_buffer_index

      async_copy_k, async_copy_v = create_kv_async_copy_descriptors(
          h, i, buffer_index
      )

      k = async_copy_k.wait_and_get_loaded()
      v = async_copy_v.wait_and_get_loaded()

      mask_shape = (chunk_size, chunk_size)
      row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
      row_ids += q_chunk_idx * chunk_size
      col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
      col_ids += i * chunk_size
      causal_mask = col_ids <= row_ids
      causal_mask_value = jnp.where(causal_mask, 0.0, DEFAULT_MASK_VALUE)

      def per_group_body(group_idx, _):
        q = q_ref[group_idx]
        s = (
            jnp.einsum("td,sd->ts", q, k, preferred_element_type=jnp.float32)
            + causal_mask_value
        )
        # mask.
        s_max = jnp.max(s, axis=1, keepdims=True)

        prev_m = m_ref[group_idx]
        prev_l = l_ref[group_idx]

        cur_m = jnp.maximum(prev_m, s_max)
        cur_m_to_attn_size = jax.lax.broadcast_in_dim(
            cur_m, (chunk_size, chunk_size), (0, 1)
        )

        p = jnp.exp(s - cur_m_to_attn_size)

        cur_l = jnp.exp(prev_m - cur_m) * prev_l + jnp.sum(
            p, axis=1, keepdims=True
        )

        out = out_ref[group_idx]

        out_ref[group_idx, :, :] = (
            out
            * jax.lax.broadcast_in_dim(
                jnp.exp(prev_m - cur_m), (chunk_size, head_dim), (0, 1)
            )
            + p @ v
        ).astype(
            out_ref.dtype
        )  # p @ v  "ts,sd->td"

        m_ref[group_idx, :, :] = cur_m
        l_ref[group_idx, :, :] = cur_l
        return ()

      jax.lax.fori_loop(0, group_size, per_group_body, ())

    @pl.when(((i + 1) * chunk_size) >= length)
    def rescale():
      l = jax.lax.broadcast_in_dim(
          l_ref[...], (group_size, chunk_size, head_dim), (0, 1, 2)
      )
      out_ref[...] = (out_ref[...] / l).astype(out_ref.dtype)

    return ()

  # loop over k, v cache chunk.
  jax.lax.fori_loop(
      0, lax.div(length + chunk_size - 1, chunk_size), per_kv_chunk_body, ()
  )


# TODO: Change to firstly attend to the current chunk kv
# and then write to the KV Cache storage to avoid redundant
# KV Cache reading.
def chunked_prefill_attention(
    q: jax.Array,
    k_pages: jax.Array,
    v_pages: jax.Array,
    length: jax.Array,
    page_indices: jax.Array,
):
  """TPU chunked prefill attention."""
  chunk_size, num_attn_heads, head_dim = q.shape
  num_kv_heads, _, page_size, _ = k_pages.shape

  assert num_attn_heads % num_kv_heads == 0
  assert chunk_size % page_size == 0
  attn_group_size = num_attn_heads // num_kv_heads
  page_per_chunk = chunk_size // page_size

  # q shape as (num_attn_heads, chunk_size, head_dim)
  q = q.transpose((1, 0, 2))
  q = q / jnp.sqrt(head_dim)

  q_block_spec = pl.BlockSpec(
      (attn_group_size, chunk_size, head_dim), lambda i, *_: (i, 0, 0)
  )
  lm_block_spec = pl.BlockSpec(
      (attn_group_size, chunk_size, 1), lambda *_: (0, 0, 0)
  )
  lm_shape = jax.ShapeDtypeStruct(
      shape=(attn_group_size, chunk_size, 1), dtype=jnp.float32
  )
  # loop over Q chunk and num kv heads dimension.
  out, _, _ = pl.pallas_call(
      chunked_prefill_attention_impl,
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=3,
          in_specs=[
              q_block_spec,
              pl.BlockSpec(memory_space=pl.ANY),
              pl.BlockSpec(memory_space=pl.ANY),
          ],
          out_specs=[
              q_block_spec,
              lm_block_spec,
              lm_block_spec,
          ],
          scratch_shapes=[
              pltpu.VMEM(
                  (
                      2,  # For double buffering during DMA copies.
                      page_per_chunk,
                      page_size,
                      head_dim,
                  ),
                  k_pages.dtype,
              ),  # k_pages buffer
              pltpu.VMEM(
                  (
                      2,  # For double buffering during DMA copies.
                      page_per_chunk,
                      page_size,
                      head_dim,
                  ),
                  v_pages.dtype,
              ),  # v_pages buffer
              pltpu.SemaphoreType.DMA,
          ],
          grid=(num_kv_heads,),
      ),
      out_shape=[
          jax.ShapeDtypeStruct(q.shape, q.dtype),
          lm_shape,
          lm_shape,
      ],
      # interpret=True,
      # debug=True
  )(
      jnp.reshape(length, (1,)),
      page_indices,
      jnp.asarray([0], jnp.int32),
      q,
      k_pages,
      v_pages,
  )
  out = out.transpose((1, 0, 2)).reshape(chunk_size, -1).astype(q.dtype)

  return out


# ----------------------------------------------------------------------------- ours


def jetstream_chunked_prefill(q, k_pages, v_pages, length, page_indices):
  """q (chunk, heads, head_dim); k/v pages (kv_heads, pages, page_size, head_dim); length i32[]
  (the tokens so far, this chunk's included); page_indices i32[max_pages]."""
  return chunked_prefill_attention(q, k_pages, v_pages, length, page_indices)


def jetstream_chunked_prefill_reference(q, k_pages, v_pages, length, page_indices):
  """What the kernel computes, in jnp: the chunk's rows sit at positions q_chunk_idx * chunk + t;
  each attends (causally, by position) to the keys of the chunks the kernel loads, ceil(length /
  chunk) of them, gathered from the pages in page-table order, K and V rounded to bf16 as the
  kernel's copy does."""
  chunk, num_heads, head_dim = q.shape
  num_kv_heads, _, page_size, _ = k_pages.shape
  group = num_heads // num_kv_heads
  n_keys = page_indices.shape[0] * page_size
  length = jnp.reshape(length, ())
  q_chunk_idx = length // chunk - jnp.where(length % chunk > 0, 0, 1)
  loaded = (length + chunk - 1) // chunk * chunk
  k = k_pages[:, page_indices].reshape(num_kv_heads, n_keys, head_dim)
  v = v_pages[:, page_indices].reshape(num_kv_heads, n_keys, head_dim)
  k = k.astype(jnp.bfloat16).astype(jnp.float32)
  v = v.astype(jnp.bfloat16).astype(jnp.float32)
  qh = (q / jnp.sqrt(head_dim)).transpose(1, 0, 2).reshape(num_kv_heads, group, chunk, head_dim)
  s = jnp.einsum("hgtd,hsd->hgts", qh.astype(jnp.float32), k, precision=jax.lax.Precision.HIGHEST)
  rows = q_chunk_idx * chunk + jnp.arange(chunk)[:, None]
  cols = jnp.arange(n_keys)[None, :]
  s = jnp.where((cols <= rows) & (cols < loaded), s, -jnp.inf)
  p = jax.nn.softmax(s, axis=-1)
  o = jnp.einsum("hgts,hsd->hgtd", p, v, precision=jax.lax.Precision.HIGHEST)
  return o.reshape(num_heads, chunk, head_dim).transpose(1, 0, 2).reshape(chunk, -1).astype(q.dtype)


INSPECT = {
  "jetstream_chunked_prefill": {
    # chunk 128, 4 q heads over 2 kv heads, head_dim 128, 16 pages of 32 tokens (a 512-token
    # page table); length up to the table's 512 tokens.
    "args": "f32[128,4,128] f32[2,16,32,128] f32[2,16,32,128] i32[] i32[16]",
    "reference": "jetstream_chunked_prefill_reference",
    "int_ranges": {"length": (1, 513), "page_indices": (0, 16)},
    "rtol": 2e-2, "atol": 2e-2,
  },
}
