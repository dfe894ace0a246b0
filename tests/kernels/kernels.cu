// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Kernels of the test suite, compiled by nvcc into kernels.fatbin (sm_90 code + compute_90 PTX).
// Their simulator twins are in tests/support/kernels.hpp: keep both in step.
#include <cuda_runtime.h>

extern "C" __global__ void fill(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

// Decrements *counter and keeps a while/if condition true while it is positive.
extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, int* counter) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int left = --*counter;
    cudaGraphSetConditional(handle, left > 0 ? 1u : 0u);
  }
}

// Sets the condition to `value` (for switch and if/else nodes).
extern "C" __global__ void set_condition(cudaGraphConditionalHandle handle, unsigned value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, value);
}

// Busy-waits `ns` nanoseconds (keeps a launch in flight).
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
