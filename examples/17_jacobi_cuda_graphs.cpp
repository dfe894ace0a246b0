// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 17 — Jacobi with CUDA graphs: port of NVIDIA's jacobiCudaGraphs (641 lines in the original; this
// port: 99), written from its description: solve Ax = b (A diagonally dominant) with a graph built once
// (clear the residual, one sweep, copy the residual to pinned memory); each iteration updates the
// executable's kernel node to swap the two x buffers, launches, and stops below the tolerance. The
// sweep reduces in 64 KiB of dynamic shared memory per block: tether raises the kernel's 48 KiB limit.
import tether;

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  using Sweep = tether::KernelNode<const double*, const double*, const double*, double*, double*, int, int>;
  auto jacobi = mod.kernel<const double*, const double*, const double*, double*, double*, int, int>("jacobi");

  constexpr int n = 512, rows = 32, threads = 256, max_sweeps = 200;  // 16 blocks, 32 rows each
  constexpr double tolerance = 1e-12;
  std::vector<double> a(std::size_t{n} * n), b(n);
  auto at = [&](int i, int j) -> double& { return a[static_cast<std::size_t>(i) * n + j]; };
  unsigned seed = 12345;  // off-diagonal entries in [0, 1), the diagonal twice their row sum
  for (int i = 0; i < n; ++i) {
    double row = 0;
    for (int j = 0; j < n; ++j) {
      seed = seed * 1664525u + 1013904223u;
      if (j != i) row += at(i, j) = (seed >> 8) / 16777216.0;
    }
    at(i, i) = 2 * row;
    b[i] = 1.0 + i % 7;
  }
  tether::SharedBuffer<double> A = ctx.alloc<double>(a.size()).share(), B = ctx.alloc<double>(n).share();
  tether::SharedBuffer<double> x[2] = {ctx.alloc<double>(n).share(), ctx.alloc<double>(n).share()};
  tether::SharedBuffer<double> residual = ctx.alloc<double>(1).share();
  tether::SharedPinnedBuffer<double> host_residual = ctx.alloc_pinned<double>(1).share();
  A.copy_from(a);
  B.copy_from(b);
  x[0].fill_bytes(0);  // x0 = 0

  // [graph]
  const tether::Launch sweep =
      tether::Launch{tether::Grid{n / rows}, tether::Block{threads}}.shared_memory(rows * threads * sizeof(double));
  tether::Graph g{ctx};
  tether::Node<Sweep> k;
  g.edit([&](tether::Edit& e) {
    auto reset = e.memset(residual, 0u);  // two 32-bit zeros: 0.0
    k = e.after(reset).launch(jacobi, sweep, A, B, x[0], x[1], residual, n, rows);
    e.after(k).memcpy(host_residual, residual);
  });
  tether::GraphExec exec = g.instantiate();
  // [graph]

  // [loop]
  int sweeps = 0, in = 0;  // x[in]: the newest x
  double res = 1;
  for (; sweeps < max_sweeps && res >= tolerance; ++sweeps, in = 1 - in) {
    exec.update(k, sweep, A, B, x[in], x[1 - in], residual, n, rows);  // the executable only
    exec.launch(stream);
    stream.synchronize();
    res = host_residual.data()[0];
  }
  // [loop]
  std::printf("jacobi: n = %d, %d blocks x %d threads, %zu KiB dynamic shared memory per block\n", n, n / rows,
              threads, sweep.shared_memory_bytes() >> 10);
  std::printf("converged after %d sweeps: sum |x_new - x| = %.3g (tolerance %g)\n", sweeps, res, tolerance);

  std::vector<double> got(n), ref(n, 0.0), next(n);  // the same sweeps on the CPU
  x[in].copy_to(got);
  for (int s = 0; s < sweeps; ++s, std::swap(ref, next))
    for (int i = 0; i < n; ++i) {
      double sum = 0;
      for (int j = 0; j < n; ++j) sum += j == i ? 0 : at(i, j) * ref[j];
      next[i] = (b[i] - sum) / at(i, i);
    }
  double diff = 0, fit = 0;  // max |x - x_cpu| and max |Ax - b|
  for (int i = 0; i < n; ++i) {
    double ax = 0;
    for (int j = 0; j < n; ++j) ax += at(i, j) * got[j];
    diff = std::max(diff, std::fabs(got[i] - ref[i]));
    fit = std::max(fit, std::fabs(ax - b[i]));
  }
  std::printf("x[0] = %.12f, max |x - x_cpu| = %.3g, max |Ax - b| = %.3g\n", got[0], diff, fit);
  return res < tolerance && diff < 1e-12 && fit < 1e-9 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
