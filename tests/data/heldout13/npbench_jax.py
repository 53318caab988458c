# Held-out programs for jax-inspector (round thirteen; the chip's fourth held-out round), vendored from
# NPBench (SPCL, ETH Zurich), the JAX versions of three of its benchmarks (seen 2026-12-06):
#   https://github.com/spcl/npbench/blob/50d22d74753dbed3817f002ce3cc394596b1b88a/npbench/benchmarks/deep_learning/lenet/lenet_jax.py
#   https://github.com/spcl/npbench/blob/ea2986dfa5dd9fa94d0aa81de0ec95e550c7bfb7/npbench/benchmarks/deep_learning/resnet/resnet_jax.py
#   https://github.com/spcl/npbench/blob/591f79f7057645600e98ca71b6359ea422d9c040/npbench/benchmarks/spmv/spmv_jax.py
# Licence: BSD 3-Clause License (the repository's LICENSE at cdea20efb5b0946aae16d628be15d5b05a531b3a,
# reproduced below; the files have no header of their own).
# NOT Apache: BSD-3-Clause, a permissive licence; its notice and disclaimer are kept below.
#
# Verbatim: lenet_jax.py's relu, conv2d, maxpool2d, lenet5; resnet_jax.py's batchnorm2d and
# resnet_basicblock (its relu and conv2d are the same as lenet_jax.py's, so they appear once);
# spmv_jax.py's spmv. Ours, below the "ours" line: wrappers that read the static sizes from the
# input shapes, INSPECT (the sizes: NPBench's initialize() functions make random inputs of these
# shapes; ours are the inspector's seeded ones).
# Style: plain XLA with loops: the convolutions are nested lax.scan loops (while loops in HLO) over
# output rows and columns, each step a dynamic_slice of an (N, K, K, C) window, a broadcast
# multiply with the weights and a sum, and a dynamic_update_slice of one output pixel; the 2x2 max
# pool likewise. LeNet-5 is two such convolutions and pools and three dense layers; the ResNet
# block three convolutions (1x1, 3x3, 1x1), batch norms and a residual add. The SpMV is a
# lax.fori_loop over CSR rows, each step masking the whole nonzero list to its row and gathering
# x at the column indices (x[cols]).
#
# BSD 3-Clause License
#
# Copyright (c) 2021, SPCL
# All rights reserved.
#
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions are met:
#
# 1. Redistributions of source code must retain the above copyright notice, this
#    list of conditions and the following disclaimer.
#
# 2. Redistributions in binary form must reproduce the above copyright notice,
#    this list of conditions and the following disclaimer in the documentation
#    and/or other materials provided with the distribution.
#
# 3. Neither the name of the copyright holder nor the names of its
#    contributors may be used to endorse or promote products derived from
#    this software without specific prior written permission.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
# AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
# IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
# DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE
# FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
# DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
# SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
# CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
# OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
# OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

import jax.numpy as jnp
import jax
from jax import lax
from functools import partial

# ----------------------------------------------------------------------------- lenet_jax.py

@jax.jit
def relu(x):
    return jnp.maximum(x, 0)


# Deep learning convolutional operator (stride = 1)
@jax.jit
def conv2d(input, weights):
    K = weights.shape[0]  # Assuming square kernel
    N = input.shape[0]
    H_out = input.shape[1] - K + 1
    W_out = input.shape[2] - K + 1
    C_out = weights.shape[3]
    output = jnp.empty((N, H_out, W_out, C_out), dtype=jnp.float32)

    def row_update(output, i):
        def col_update(output, j):
            input_slice = lax.dynamic_slice(
                input, 
                (0, i, j, 0), 
                (N, K, K, input.shape[-1])
            )
            conv_result = jnp.sum(
                input_slice[:, :, :, :, None] * weights[None, :, :, :], 
                axis=(1, 2, 3)
            )
            output = lax.dynamic_update_slice(
                output, 
                conv_result[:, None, None, :], 
                (0, i, j, 0)
            )
            return output, None

        output, _ = lax.scan(col_update, output, jnp.arange(W_out))
        return output, None

    output, _ = lax.scan(row_update, output, jnp.arange(H_out))

    return output


# 2x2 maxpool operator, as used in LeNet-5
@jax.jit
def maxpool2d(x):
    output = jnp.empty(
        [x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3]],
        dtype=x.dtype)
    
    def row_update(output, i):
        def col_update(output, j):
            input_slice = lax.dynamic_slice(
                x,
                (0, 2 * i, 2 * j, 0),
                (x.shape[0], 2, 2, x.shape[3])
            )
            output = lax.dynamic_update_slice(
                output, 
                jnp.max(input_slice, axis=(1, 2))[:, None, None, :], 
                (0, i, j, 0)
            )
            return output, None

        output, _ = lax.scan(col_update, output, jnp.arange(x.shape[2] // 2))
        return output, None
    
    output, _ = lax.scan(row_update, output, jnp.arange(x.shape[1] // 2))

    return output


# LeNet-5 Convolutional Neural Network (inference mode)
@partial(jax.jit, static_argnums=(11, 12))
def lenet5(input, conv1, conv1bias, conv2, conv2bias, fc1w, fc1b, fc2w, fc2b,
           fc3w, fc3b, N, C_before_fc1):
    x = relu(conv2d(input, conv1) + conv1bias)
    x = maxpool2d(x)
    x = relu(conv2d(x, conv2) + conv2bias)
    x = maxpool2d(x)
    x = jnp.reshape(x, (N, C_before_fc1))
    x = relu(x @ fc1w + fc1b)
    x = relu(x @ fc2w + fc2b)
    return x @ fc3w + fc3b

# ----------------------------------------------------------------------------- resnet_jax.py

# Batch normalization operator, as used in ResNet
@jax.jit
def batchnorm2d(x, eps=1e-5):
    mean = jnp.mean(x, axis=0, keepdims=True)
    std = jnp.std(x, axis=0, keepdims=True)
    return (x - mean) / jnp.sqrt(std + eps)


# Bottleneck residual block (after initial convolution, without downsampling)
# in the ResNet-50 CNN (inference)
@jax.jit
def resnet_basicblock(input, conv1, conv2, conv3):
    # Pad output of first convolution for second convolution
    padded = jnp.zeros((input.shape[0], input.shape[1] + 2, input.shape[2] + 2,
                       conv1.shape[3]), dtype=jnp.float32)
    padded = lax.dynamic_update_slice(
        padded,
        conv2d(input, conv1),
        (0, 1, 1, 0)
    )
    x = batchnorm2d(padded)
    x = relu(x)

    x = conv2d(x, conv2)
    x = batchnorm2d(x)
    x = relu(x)
    x = conv2d(x, conv3)
    x = batchnorm2d(x)
    return relu(x + input)

# ----------------------------------------------------------------------------- spmv_jax.py

# Matrix-Vector Multiplication with the matrix given in Compressed Sparse Row
# (CSR) format
@jax.jit
def spmv(A_row, A_col, A_val, x):
    y = jnp.empty(A_row.size - 1, dtype=A_val.dtype)

    def row_update(i, y):
        mask = (jnp.arange(A_col.size) >= A_row[i]) & (jnp.arange(A_col.size) < A_row[i + 1])

        cols = jnp.where(mask, A_col, 0)
        vals = jnp.where(mask, A_val, 0)
        y = y.at[i].set(vals @ x[cols])

        return y

    y = lax.fori_loop(0, A_row.size - 1, row_update, y)
    return y


# ----------------------------------------------------------------------------- ours


def npbench_lenet5(input, conv1, conv1bias, conv2, conv2bias, fc1w, fc1b, fc2w, fc2b, fc3w, fc3b):
    return lenet5(input, conv1, conv1bias, conv2, conv2bias, fc1w, fc1b, fc2w, fc2b, fc3w, fc3b,
                  input.shape[0], fc1w.shape[0])


def npbench_resnet_block(input, conv1, conv2, conv3):
    return resnet_basicblock(input, conv1, conv2, conv3)


def npbench_spmv(A_row, A_col, A_val, x):
    return spmv(A_row, A_col, A_val, x)


# LeNet-5 on 256 32x32 images (NHWC, one channel): 16 * 5 * 5 = 400 features before fc1.
# The ResNet block on 8 14x14 maps of 256 channels, a 64-channel bottleneck.
# SpMV: 512 rows, 65,536 nonzeros (128 a row on average), a 4,096-long x; the row pointers are
# seeded random offsets (their order only moves which nonzeros a row takes, not the work a row does).
INSPECT = {
    "npbench_lenet5": {
        "args": "f32[256,32,32,1] f32[5,5,1,6] f32[6] f32[5,5,6,16] f32[16] f32[400,120] f32[120] "
                "f32[120,84] f32[84] f32[84,10] f32[10]",
    },
    "npbench_resnet_block": {"args": "f32[8,14,14,256] f32[1,1,256,64] f32[3,3,64,64] f32[1,1,64,256]"},
    "npbench_spmv": {
        "args": "s32[513] s32[65536] f32[65536] f32[4096]",
        "int_ranges": {"A_row": (0, 65536), "A_col": (0, 4096)},
    },
}
