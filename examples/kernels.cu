// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Kernels of the examples, compiled by nvcc into kernels.fatbin. Host code imports tether; nvcc
// never sees the module. Each example registers simulator twins of the kernels it uses.
#include <cuda_runtime.h>

extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, int* counter) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int left = --*counter;
    cudaGraphSetConditional(handle, left > 0 ? 1u : 0u);
  }
}
