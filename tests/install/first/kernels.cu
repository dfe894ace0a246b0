// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The first program's kernels (docs/first-program.md): compiled by nvcc, which embeds their code in
// the program; the install test (tests/install/first_program.sh) builds exactly this file.
#include "kernels.hpp"

__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

tether::Kernel<float, const float*, float*, int> saxpy_kernel(const tether::Context& ctx) {
  return tether::kernel(&saxpy, ctx);  // typed by saxpy's own parameters
}

void register_twins() {
  // What the simulator runs in saxpy's place (a GPU ignores it): the whole grid's work.
  tether::sim::register_kernel(&saxpy, "saxpy",
                               [](const tether::sim::LaunchInfo&, float a, const float* x, float* y, int n) {
                                 for (int i = 0; i < n; ++i) y[i] += a * x[i];
                               });
}
