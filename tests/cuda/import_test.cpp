// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The one safe way to mix the two: kernels.cu, compiled by nvcc in header mode, returns typed
// Kernels from ordinary functions (test_kernels.hpp); this file, compiled by clang, imports the
// module and uses them. Both see the same entities because the module attaches tether's to the
// global module (extern "C++" in modules/tether.cppm). Textual includes come before the import;
// test_kernels.hpp, which includes nothing of tether, comes after it. Both drivers.
#include <doctest/doctest.h>

#include <chrono>
#include <span>
#include <vector>

import tether;

#include "cuda/test_kernels.hpp"

using namespace std::chrono_literals;

TEST_CASE("a Kernel made by nvcc-compiled code runs in a graph built by code that imports the module") {
  tether::Runtime rt = tether::Runtime::open();
  const bool sim = rt.kind() == tether::DriverKind::simulated;
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  tether_cuda::register_twins();
  if (sim) tether::sim::clear_violations();
  {
    tether::Kernel<float, const float*, float*, int> saxpy = tether_cuda::saxpy(ctx);
    CHECK(saxpy.name() == "saxpy");
    CHECK_FALSE(saxpy.has_module());
    constexpr int n = 512;
    std::vector<float> x(n, 2.0f), y(n, 1.0f);
    tether::SharedBuffer<float> dx = ctx.alloc<float>(n).share(), dy = ctx.alloc<float>(n).share();
    dx.copy_from(std::span<const float>(x));
    dy.copy_from(std::span<const float>(y));
    tether::Graph g{ctx};
    g.edit([&](tether::Edit& e) {
      e.launch(saxpy, tether::Launch{tether::Grid{n / 128}, tether::Block{128}}, 3.0f, dx, dy, n);
    });
    tether::GraphExec exec = g.instantiate();
    exec.launch(stream);
    exec.launch(stream);
    stream.synchronize();
    dy.copy_to(std::span<float>(y));
    CHECK(y.front() == 13.0f);  // 1 + 3 * 2, twice
    CHECK(y.back() == 13.0f);
  }
  CHECK(tether::wait_reclaimed(5000ms));
  if (sim) CHECK(tether::sim::violations().empty());
}
