// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What kernels.cu (compiled by nvcc, header mode) gives the test programs compiled by clang, in
// header mode (runtime_kernel_test.cpp) or through `import tether;` (import_test.cpp): ordinary
// functions that return tether types, the one safe way to hand a program's own kernels to code
// that cannot see `__global__` functions. Included after tether's headers or after
// `import tether;`, so it includes nothing of tether itself.
#pragma once

namespace tether_cuda {

/// __global__ void saxpy(float a, const float* x, float* y, int n): y[i] += a * x[i].
tether::Kernel<float, const float*, float*, int> saxpy(const tether::Context& ctx);
/// The same kernel through tether::kernel(&saxpy), the one-argument form.
tether::Kernel<float, const float*, float*, int> saxpy_in_default_context();
/// template <class T> __global__ void scale(T* x, T a, int n): x[i] *= a, for T = float and double.
tether::Kernel<float*, float, int> scale_float(const tether::Context& ctx);
tether::Kernel<double*, double, int> scale_double(const tether::Context& ctx);
/// __global__ void count_calls(int* counter): ++*counter by thread 0; it has no twin.
tether::Kernel<int*> count_calls(const tether::Context& ctx);
/// tether::kernel of a null `void (*)(int*)`.
tether::Kernel<int*> null_kernel(const tether::Context& ctx);

/// Registers the simulator's twins of saxpy and both scale specializations (named as the CUDA
/// runtime names them); count_calls gets none.
void register_twins();
/// Replaces saxpy's twin by one that computes y[i] = a (for the test of a replaced twin).
void replace_saxpy_twin();

}  // namespace tether_cuda
