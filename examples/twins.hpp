// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator twins of the kernels in kernels.cu: host functions the simulated driver runs in place
// of each kernel (the real driver ignores them). A twin must be registered before its kernel is
// looked up (Module::kernel), so every example calls examples::register_twins() first. It imports
// tether itself, before its own includes (the order docs/modules.md recommends).
#pragma once

import tether;

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace examples {

// On the simulator, `devices` simulated devices unless TETHER_SIM_DEVICES says otherwise (the real
// driver ignores it): the multi-GPU examples run their ranks there too.
inline void simulate_devices(int devices) {
  if (!std::getenv("TETHER_SIM_DEVICES")) tether::sim::configure(tether::sim::Options{.devices = devices});
}

inline void register_twins() {
  using tether::sim::LaunchInfo;
  // scale(float* x, float a, int n): x[i] *= a.
  tether::sim::register_kernel<float*, float, int>("scale", [](const LaunchInfo&, float* x, float a, int n) {
    for (int i = 0; i < n; ++i) x[i] *= a;
  });
  // countdown(handle, int* counter): decrements the counter; the condition stays set while it is positive.
  tether::sim::register_kernel<unsigned long long, int*>("countdown", [](const LaunchInfo&, unsigned long long h, int* c) {
    tether::sim::set_conditional(h, --*c > 0 ? 1u : 0u);
  });
  // jacobi(A, b, x, x_new, residual, n, rows): the kernel's algorithm block by block, with the
  // launch's dynamic shared memory as the block's partial sums, so a launch that asks for less
  // than rows * blockDim.x doubles fails here as it would on the GPU (there: out of bounds).
  tether::sim::register_kernel<const double*, const double*, const double*, double*, double*, int, int>(
      "jacobi", [](const LaunchInfo& info, const double* A, const double* b, const double* x, double* x_new,
                   double* residual, int n, int rows) {
        const std::size_t threads = info.block[0], cols = static_cast<std::size_t>(n);
        std::vector<double> partial(info.shared_mem_bytes / sizeof(double));  // one block's extern __shared__
        if (partial.size() < static_cast<std::size_t>(rows) * threads)
          throw std::length_error("jacobi needs rows * blockDim.x doubles of dynamic shared memory");
        for (std::size_t block = 0; block < info.grid[0]; ++block) {
          const std::size_t row0 = block * static_cast<std::size_t>(rows);
          for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
            for (std::size_t t = 0; t < threads; ++t) {
              double s = 0;
              for (std::size_t j = t; row0 + r < cols && j < cols; j += threads)
                if (j != row0 + r) s += A[(row0 + r) * cols + j] * x[j];
              partial[r * threads + t] = s;
            }
          for (std::size_t half = threads / 2; half > 0; half /= 2)
            for (std::size_t t = 0; t < half; ++t)
              for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
                partial[r * threads + t] += partial[r * threads + t + half];
          double delta = 0;
          for (std::size_t r = 0; r < static_cast<std::size_t>(rows) && row0 + r < cols; ++r) {
            const std::size_t i = row0 + r;
            x_new[i] = (b[i] - partial[r * threads]) / A[i * cols + i];
            delta += std::fabs(x_new[i] - x[i]);
          }
          *residual += delta;  // the kernel's atomicAdd
        }
      });
  // reduce_blocks(in, partial, n) and reduce_final(partial, result, count): the kernels' sums,
  // block by block, with their limit of 512 threads a block (a static shared array there).
  auto threads_of = [](const LaunchInfo& info) {
    const std::size_t t = info.block[0];
    if (t == 0 || t > 512 || (t & (t - 1)))
      throw std::length_error("the reductions need a power-of-two blockDim.x of at most 512");
    return t;
  };
  tether::sim::register_kernel<const float*, double*, int>(
      "reduce_blocks", [threads_of](const LaunchInfo& info, const float* in, double* partial, int n) {
        const std::size_t threads = threads_of(info), stride = info.grid[0] * threads;
        const std::size_t count = static_cast<std::size_t>(n);
        for (std::size_t block = 0; block < info.grid[0]; ++block) {
          double sum = 0;
          for (std::size_t t = 0; t < threads; ++t)
            for (std::size_t i = block * threads + t; i < count; i += stride) sum += in[i];
          partial[block] += sum;
        }
      });
  tether::sim::register_kernel<const double*, double*, int>(
      "reduce_final", [threads_of](const LaunchInfo& info, const double* partial, double* result, int count) {
        (void)threads_of(info);
        double sum = 0;
        for (int i = 0; i < count; ++i) sum += partial[i];
        *result += sum;
      });
  // condition_from(handle, value): the condition becomes *value.
  tether::sim::register_kernel<unsigned long long, const int*>(
      "condition_from", [](const LaunchInfo&, unsigned long long h, const int* v) {
        tether::sim::set_conditional(h, static_cast<unsigned>(*v));
      });
  // add_to(x, v): *x += v.
  tether::sim::register_kernel<int*, int>("add_to", [](const LaunchInfo&, int* x, int v) { *x += v; });
  // reverse_chunks(x, chunk, cluster_blocks): each block reverses its chunk of x through `chunk`
  // floats of dynamic shared memory (a launch with less fails here, as it would on the GPU: out of
  // bounds) and records the number of blocks of its cluster.
  tether::sim::register_kernel<float*, int, unsigned*>(
      "reverse_chunks", [](const LaunchInfo& info, float* x, int chunk, unsigned* cluster_blocks) {
        const std::size_t c = static_cast<std::size_t>(chunk);
        if (info.shared_mem_bytes < c * sizeof(float))
          throw std::length_error("reverse_chunks needs chunk floats of dynamic shared memory");
        for (std::size_t b = 0; b < info.grid[0]; ++b) {
          float* mine = x + b * c;
          for (std::size_t i = 0; i < c / 2; ++i) {
            const float t = mine[i];
            mine[i] = mine[c - 1 - i];
            mine[c - 1 - i] = t;
          }
          cluster_blocks[b] = info.cluster[0] * info.cluster[1] * info.cluster[2];
        }
      });
  // add_scaled(y, x, a, n): y[i] += a * x[i].
  tether::sim::register_kernel<float*, const float*, float, int>(
      "add_scaled", [](const LaunchInfo&, float* y, const float* x, float a, int n) {
        for (int i = 0; i < n; ++i) y[i] += a * x[i];
      });
  // square_array(in, out, n), negate_array(in, out, n): out[i] = in[i]^2, out[i] = -in[i].
  tether::sim::register_kernel<const float*, float*, int>(
      "square_array", [](const LaunchInfo&, const float* in, float* out, int n) {
        for (int i = 0; i < n; ++i) out[i] = in[i] * in[i];
      });
  tether::sim::register_kernel<const float*, float*, int>(
      "negate_array", [](const LaunchInfo&, const float* in, float* out, int n) {
        for (int i = 0; i < n; ++i) out[i] = -in[i];
      });
  // validate_close(got, want, n, failed): *failed = 1 where (got - want)^2 / want^2 > 1e-6.
  tether::sim::register_kernel<const float*, const float*, int, int*>(
      "validate_close", [](const LaunchInfo&, const float* got, const float* want, int n, int* failed) {
        for (int i = 0; i < n; ++i) {
          const float d = got[i] - want[i];
          if (d * d / (want[i] * want[i]) > 1e-6f) *failed = 1;
        }
      });
}

}  // namespace examples

// examples::picture(name, graph_or_exec): the tutorial's pictures (docs/tutorial/img/).
#include "pictures.hpp"
