// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The tests' own __global__ functions, compiled by nvcc in header mode, and the typed Kernels
// tether::kernel(&fn, ctx) makes of them (test_kernels.hpp). On a GPU the CUDA runtime finds the code
// nvcc embedded here; on the simulator the twins registered here run instead.
#include "tether.hpp"
#include "cuda/test_kernels.hpp"

__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

template <class T>
__global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void count_calls(int* counter) {
  if (blockIdx.x == 0 && threadIdx.x == 0) ++*counter;
}

namespace tether_cuda {

tether::Kernel<float, const float*, float*, int> saxpy(const tether::Context& ctx) {
  return tether::kernel(&::saxpy, ctx);
}
tether::Kernel<float, const float*, float*, int> saxpy_in_default_context() {
  return tether::kernel(&::saxpy);
}
tether::Kernel<float*, float, int> scale_float(const tether::Context& ctx) {
  return tether::kernel(&scale<float>, ctx);
}
tether::Kernel<double*, double, int> scale_double(const tether::Context& ctx) {
  return tether::kernel(&scale<double>, ctx);
}
tether::Kernel<int*> count_calls(const tether::Context& ctx) {
  return tether::kernel(&::count_calls, ctx);
}
tether::Kernel<int*> null_kernel(const tether::Context& ctx) {
  void (*none)(int*) = nullptr;
  return tether::kernel(none, ctx);
}

namespace {
template <class T>
void register_scale(const char* name) {
  tether::sim::register_kernel(&scale<T>, name, [](const tether::sim::LaunchInfo& info, T* x, T a, int n) {
    for (std::size_t i = 0; i < info.threads() && i < static_cast<std::size_t>(n); ++i) x[i] *= a;
  });
}
}  // namespace

void register_twins() {
  tether::sim::register_kernel(
      &::saxpy, "saxpy", [](const tether::sim::LaunchInfo& info, float a, const float* x, float* y, int n) {
        for (std::size_t i = 0; i < info.threads() && i < static_cast<std::size_t>(n); ++i) y[i] += a * x[i];
      });
  register_scale<float>("scale<float>");
  register_scale<double>("scale<double>");
}

void replace_saxpy_twin() {
  tether::sim::register_kernel(&::saxpy, "saxpy",
                               [](const tether::sim::LaunchInfo&, float a, const float*, float* y, int n) {
                                 for (int i = 0; i < n; ++i) y[i] = a;
                               });
}

}  // namespace tether_cuda
