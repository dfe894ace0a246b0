// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The test kernels (tests/kernels/kernels.cu) and their simulator twins. The module is loaded from
// kernels.fatbin next to the test executable (built by nvcc; the checked-in PTX where nvcc is
// missing), so the same tests run real kernels on a GPU and the twins on the simulator.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "support/paths.hpp"
#include "tether.hpp"

namespace tether_test {

/// The 24-byte struct parameter of the kernel param_struct (kernels.cu declares the same).
struct Param24 {
  double a;
  int b;
  float c;
  long long d;
};
static_assert(sizeof(Param24) == 24 && alignof(Param24) == 8);

inline void register_test_twins() {
  using tether::sim::LaunchInfo;
  tether::sim::register_kernel<float*, float, int>("fill", [](const LaunchInfo& l, float* x, float v, int n) {
    for (std::size_t i = 0; i < l.threads() && i < static_cast<std::size_t>(n); ++i) x[i] = v;
  });
  tether::sim::register_kernel<float*, float, int>("scale", [](const LaunchInfo& l, float* x, float a, int n) {
    for (std::size_t i = 0; i < l.threads() && i < static_cast<std::size_t>(n); ++i) x[i] *= a;
  });
  tether::sim::register_kernel<float*, const float*, float, int>(
      "axpy", [](const LaunchInfo& l, float* y, const float* x, float a, int n) {
        for (std::size_t i = 0; i < l.threads() && i < static_cast<std::size_t>(n); ++i) y[i] += a * x[i];
      });
  tether::sim::register_kernel<unsigned long long, int*>("countdown",
                                                         [](const LaunchInfo&, unsigned long long h, int* counter) {
                                                           int left = --*counter;
                                                           tether::sim::set_conditional(h, left > 0 ? 1u : 0u);
                                                         });
  tether::sim::register_kernel<unsigned long long, unsigned>(
      "set_condition",
      [](const LaunchInfo&, unsigned long long h, unsigned v) { tether::sim::set_conditional(h, v); });
  tether::sim::register_kernel<unsigned long long>("spin", [](const LaunchInfo&, unsigned long long ns) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
  });
  // Launch attributes (docs/launch-attributes.md): the twins report what the simulator tells them
  // about the launch, as the kernels report what the hardware gave them.
  tether::sim::register_kernel<int*, int>("dyn_smem", [](const LaunchInfo& l, int* result, int n) {
    // The dynamic shared memory the launch has; reading past it is what the kernel's check catches.
    std::size_t have = l.shared_mem_bytes / sizeof(float);
    int bad = n > 0 && static_cast<std::size_t>(n) > have ? n - static_cast<int>(have) : 0;
    result[0] += bad * static_cast<int>(l.grid[0] * l.grid[1] * l.grid[2]);
    result[1] = n;
  });
  tether::sim::register_kernel<unsigned*>("cluster_dims", [](const LaunchInfo& l, unsigned* out) {
    out[0] = l.cluster[0];
    out[1] = l.cluster[1];
    out[2] = l.cluster[2];
    out[3] = l.cluster[0] * l.cluster[1] * l.cluster[2];
    out[4] += l.grid[0] * l.grid[1] * l.grid[2];
  });
  tether::sim::register_kernel<int*, int*>("coop_sync", [](const LaunchInfo& l, int* counter, int* out) {
    if (!l.cooperative) {
      out[1] = -1;  // the grid cannot synchronise outside a cooperative launch
      return;
    }
    *counter += static_cast<int>(l.grid[0] * l.grid[1] * l.grid[2]);
    out[0] = *counter;
    out[1] = 1;
  });
  tether::sim::register_kernel<double, char, long long>("param_mix", [](const LaunchInfo&, double, char, long long) {});
  tether::sim::register_kernel<Param24>("param_struct", [](const LaunchInfo&, Param24) {});
  tether::sim::register_kernel<char, short, int, char, double>("param_align",
                                                               [](const LaunchInfo&, char, short, int, char, double) {});
  tether::sim::register_kernel<>("no_params", [](const LaunchInfo&) {});
}

/// The test module of `ctx` (loaded once per process per context).
inline tether::Module test_module(const tether::Context& ctx) {
  register_test_twins();
  return ctx.load_module(tether::Image::from_file(beside_executable("kernels.fatbin")));
}

struct TestKernels {
  tether::Kernel<float*, float, int> fill;
  tether::Kernel<float*, float, int> scale;
  tether::Kernel<float*, const float*, float, int> axpy;
  tether::Kernel<unsigned long long, int*> countdown;
  tether::Kernel<unsigned long long, unsigned> set_condition;
  tether::Kernel<unsigned long long> spin;
};

inline TestKernels test_kernels(const tether::Context& ctx) {
  tether::Module m = test_module(ctx);
  return {m.kernel<float*, float, int>("fill"),
          m.kernel<float*, float, int>("scale"),
          m.kernel<float*, const float*, float, int>("axpy"),
          m.kernel<unsigned long long, int*>("countdown"),
          m.kernel<unsigned long long, unsigned>("set_condition"),
          m.kernel<unsigned long long>("spin")};
}

}  // namespace tether_test
