// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// Compiled by nvcc (not clang) to prove that header mode works for .cu files.
#include "tether.hpp"

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

std::string_view header_mode_nvcc_name() { return tether::result_name(0); }
