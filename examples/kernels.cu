// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Kernels of the examples, compiled by nvcc into kernels.fatbin (kernels.ptx is the same source
// as `nvcc -ptx -arch=sm_90`, for builds without nvcc). Host code imports tether; nvcc never sees
// the module. twins.hpp, beside this file, holds the simulator twin of each kernel.
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

// One Jacobi sweep, x_new = D^-1 (b - (A - D) x), for `rows` consecutive rows of the n x n matrix
// A per block, and the block's share of sum |x_new - x| added to *residual. Each thread sums a
// strided slice of every row (coalesced reads of A) into dynamic shared memory, rows * blockDim.x
// doubles (64 KiB for 32 rows of 256 threads: above the 48 KiB default, so the launch raises the
// kernel's limit), and the block reduces them. blockDim.x is a power of two, rows <= blockDim.x.
extern "C" __global__ void jacobi(const double* A, const double* b, const double* x, double* x_new,
                                  double* residual, int n, int rows) {
  extern __shared__ double partial[];  // [rows][blockDim.x]
  const int t = threadIdx.x, threads = blockDim.x, row0 = blockIdx.x * rows;
  for (int r = 0; r < rows; ++r) {
    const int i = row0 + r;
    double s = 0;
    if (i < n)
      for (int j = t; j < n; j += threads)
        if (j != i) s += A[(size_t)i * n + j] * x[j];
    partial[r * threads + t] = s;
  }
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (t < half)
      for (int r = 0; r < rows; ++r) partial[r * threads + t] += partial[r * threads + t + half];
    __syncthreads();
  }
  double delta = 0;  // thread t finishes row row0 + t
  if (t < rows && row0 + t < n) {
    const int i = row0 + t;
    const double xi = (b[i] - partial[t * threads]) / A[(size_t)i * n + i];
    x_new[i] = xi;
    delta = fabs(xi - x[i]);
  }
  __syncthreads();  // the row sums are read: reuse the memory for the residual
  partial[t] = delta;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) atomicAdd(residual, partial[0]);
}

// The first step of a sum of n floats: each block sums a grid-stride slice into
// partial[blockIdx.x], in double (a float sum of 2^20 values loses digits). It adds to the partial
// sum rather than storing it, so a graph that did not clear the partials first sums wrongly.
// blockDim.x is a power of two, at most 512.
extern "C" __global__ void reduce_blocks(const float* in, double* partial, int n) {
  __shared__ double s[512];
  const int t = threadIdx.x;
  double sum = 0;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) sum += in[i];
  s[t] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] += s[0];
}

// The second step, one block: adds the `count` partial sums to *result (cleared first, likewise).
extern "C" __global__ void reduce_final(const double* partial, double* result, int count) {
  __shared__ double s[512];
  const int t = threadIdx.x;
  double sum = 0;
  for (int i = t; i < count; i += blockDim.x) sum += partial[i];
  s[t] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) *result += s[0];
}

// Sets the condition to *value: an if body runs when it is non-zero, a while body while it is, a
// switch runs body number *value (none when it is past the last).
extern "C" __global__ void condition_from(cudaGraphConditionalHandle handle, const int* value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, (unsigned)*value);
}

extern "C" __global__ void add_to(int* x, int v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *x += v;
}

// Reverses each block's chunk of x (`chunk` floats from blockIdx.x * chunk) through `chunk` floats
// of dynamic shared memory (64 KiB for 16384 floats: above the 48 KiB default, so the launch raises
// the kernel's limit), and records in cluster_blocks[blockIdx.x] how many blocks its cluster has
// (1 without a cluster attribute).
#include <cooperative_groups.h>
extern "C" __global__ void reverse_chunks(float* x, int chunk, unsigned* cluster_blocks) {
  extern __shared__ float tile[];  // [chunk]
  float* mine = x + (size_t)blockIdx.x * chunk;
  for (int i = threadIdx.x; i < chunk; i += blockDim.x) tile[i] = mine[i];
  __syncthreads();
  for (int i = threadIdx.x; i < chunk; i += blockDim.x) mine[i] = tile[chunk - 1 - i];
  if (threadIdx.x == 0) cluster_blocks[blockIdx.x] = cooperative_groups::this_cluster().num_blocks();
}

// y[i] += a * x[i].
extern "C" __global__ void add_scaled(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

// out[i] = in[i] * in[i] (NVIDIA's graphMemoryNodes sample: the first kernel).
extern "C" __global__ void square_array(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i];
}

// out[i] = -in[i] (the sample's second kernel).
extern "C" __global__ void negate_array(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = -in[i];
}

// Sets *failed to 1 where got[i] differs from want[i] by more than the graphMemoryNodes sample's
// tolerance, (got - want)^2 / want^2 > 1e-6 (the sample's check on the device).
extern "C" __global__ void validate_close(const float* got, const float* want, int n, int* failed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float d = got[i] - want[i];
    if (d * d / (want[i] * want[i]) > 1e-6f) *failed = 1;
  }
}
