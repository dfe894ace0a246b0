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
