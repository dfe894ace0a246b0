// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// `tether::kernel(&fn, ctx)`: a typed Kernel of the program's own `__global__` function, for .cu
// files compiled by nvcc (header mode). tether.hpp includes it only where __CUDACC__ is defined;
// the module (`import tether;`) cannot name a `__global__` function, so it does not export it, but
// an importer may receive the Kernel it makes (docs/first-program.md, "Mixing with import tether").
#pragma once

#include <cuda_runtime.h>

#include "../config.hpp"
#include "../prelude.hpp"
#include "../resources/context.hpp"
#include "../resources/module.hpp"
#include "../runtime/runtime.hpp"

namespace tether::detail {

// Why these are inline functions of this header: they run in the user's translation unit, which
// links the CUDA runtime (nvcc links libcudart_static by default); the library links no CUDA
// library and calls them only on the real driver.
inline int cudart_get_kernel(const void* fn, CUkernel* out) {
  cudaKernel_t k = nullptr;
  cudaError_t e = ::cudaGetKernel(&k, fn);
  *out = reinterpret_cast<CUkernel>(k);
  return static_cast<int>(e);
}
inline int cudart_get_function(const void* fn, CUfunction* out) {
  cudaFunction_t f = nullptr;
  cudaError_t e = ::cudaGetFuncBySymbol(&f, fn);
  *out = reinterpret_cast<CUfunction>(f);
  return static_cast<int>(e);
}
inline int cudart_function_name(const void* fn, const char** out) {
  return static_cast<int>(::cudaFuncGetName(out, fn));
}
inline const char* cudart_error_name(int e) {
  return ::cudaGetErrorName(static_cast<cudaError_t>(e));
}
inline const char* cudart_error_string(int e) {
  return ::cudaGetErrorString(static_cast<cudaError_t>(e));
}

inline constexpr RuntimeLookup cudart_lookup{&cudart_get_kernel, &cudart_get_function, &cudart_function_name,
                                             &cudart_error_name, &cudart_error_string};

}  // namespace tether::detail

namespace tether {

/// The kernel of the `__global__` function `fn` in `ctx`, typed by `fn`'s own parameter list:
/// `tether::kernel(&saxpy, ctx)` for `__global__ void saxpy(float, const float*, float*, int)` is
/// a `Kernel<float, const float*, float*, int>`, and `tether::kernel(&scale<float>, ctx)` works
/// for a template's specialization. No `extern "C"`, no image file, no lookup by name: on the real
/// driver the CUDA runtime of the calling program finds the kernel (`cudaGetKernel`, then
/// `cuKernelGetFunction` with `ctx` pushed; `cudaGetFuncBySymbol` where the driver predates
/// `cuKernelGetFunction`) and names it (`cudaFuncGetName`); on the simulator nothing calls the
/// runtime: the Kernel runs the twin registered for `fn` (`tether::sim::register_kernel(&fn,
/// body)`). Where the driver describes parameters, they are checked as `Module::kernel` checks
/// them.
///
/// What keeps the code alive: it is part of the program (or shared library) that defines `fn`;
/// the CUDA runtime registers it when the program starts and unregisters it when it exits (or the
/// library is unloaded), and loads it into `ctx` on first use. The Kernel keeps `ctx` retained,
/// so the function the driver made of it in `ctx` stays valid while any copy (or a graph node
/// using it) lives; it cannot keep the runtime's registration alive past the program's exit or a
/// `dlclose`. Only in a translation unit compiled by nvcc (`__CUDACC__`), which links the CUDA
/// runtime.
///
/// Throws UsageError for a null `fn`, for a function without a twin on the simulator, for a
/// lookup the CUDA runtime refuses ("tether::kernel(saxpy): the CUDA runtime's cudaGetKernel
/// failed with cudaErrorInvalidDeviceFunction ...", for example when the binary has no code for
/// the GPU) and for a parameter mismatch; DriverError if `cuKernelGetFunction` fails.
/// Thread safety: safe to call concurrently.
template <class... Args>
Kernel<Args...> kernel(void (*fn)(Args...), const Context& ctx) {
  return detail::KernelAccess::make<Args...>(detail::registered_kernel_info(
      ctx, reinterpret_cast<const void*>(fn), detail::declared_params<Args...>, detail::cudart_lookup));
}

/// `kernel(fn, ctx)` in the primary context of device 0 of `Runtime::open()` (the context a
/// program that opens its runtime that way gets from `rt.context(0)`). Throws what
/// `Runtime::open()`, `Runtime::context` and `kernel(fn, ctx)` throw. Thread safety: safe to call
/// concurrently.
template <class... Args>
Kernel<Args...> kernel(void (*fn)(Args...)) {
  return kernel(fn, Runtime::open().context(0));
}

}  // namespace tether
