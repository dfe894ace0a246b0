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

// ------------------------------------------------------------------ launch attributes (docs/launch-attributes.md)
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// Proves that `n` floats of dynamic shared memory are usable: every thread writes its share, the
// block synchronises, and every thread reads back another thread's values (reversed order).
// result[0] += mismatches, result[1] = n (written by thread 0 of block 0 once the block checked).
extern "C" __global__ void dyn_smem(int* result, int n) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = static_cast<float>(i) * 3.0f + 1.0f;
  __syncthreads();
  int bad = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    int j = n - 1 - i;
    if (buf[j] != static_cast<float>(j) * 3.0f + 1.0f) ++bad;
  }
  if (bad) atomicAdd(&result[0], bad);
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x == 0) result[1] = n;
}

// Reports the cluster the launch ran with: block (0,0,0) writes out[0..2] = the cluster's
// dimensions in blocks ({1,1,1} without a cluster) and out[3] = blocks per cluster; every block
// adds 1 to out[4] (the number of blocks that ran).
extern "C" __global__ void cluster_dims(unsigned* out) {
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
      dim3 d = cluster.dim_blocks();
      out[0] = d.x;
      out[1] = d.y;
      out[2] = d.z;
      out[3] = cluster.num_blocks();
    }
    atomicAdd(&out[4], 1u);
  }
}

// A grid-wide barrier: every block adds 1 to *counter, the grid synchronises, then block 0 reads
// the counter, which equals the number of blocks only if the barrier held. out[0] = that count,
// out[1] = 1 after a barrier, -1 when the launch was not cooperative (the grid cannot sync).
extern "C" __global__ void coop_sync(int* counter, int* out) {
  cg::grid_group grid = cg::this_grid();
  if (!grid.is_valid()) {
    if (blockIdx.x == 0 && threadIdx.x == 0) out[1] = -1;
    return;
  }
  if (threadIdx.x == 0) atomicAdd(counter, 1);
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = atomicAdd(counter, 0);
    out[1] = 1;
  }
}

// Parameter layouts for cuFuncGetParamInfo (fill is the (float*, float, int) case). The bodies
// are empty: a kernel's parameter list is part of its signature whether or not the body reads it.
struct Param24 {
  double a;
  int b;
  float c;
  long long d;
};
static_assert(sizeof(Param24) == 24 && alignof(Param24) == 8, "Param24 is 24 bytes, 8-aligned");

extern "C" __global__ void param_mix(double, char, long long) {}
extern "C" __global__ void param_struct(Param24) {}
extern "C" __global__ void param_align(char, short, int, char, double) {}
extern "C" __global__ void no_params() {}
