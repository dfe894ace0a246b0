// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 15 — simple CUDA graphs: port of NVIDIA's simpleCudaGraphs (413 lines in the original; this port: 99),
// written from its description: the sum of 2^20 floats by two kernels (block partial sums, then one
// block over the partials), with the copy in, the memsets of both outputs and the copy out, built twice: (a) node by node in an edit, (b) by capturing the same
// work on three streams (the memsets forked to two more streams while the first copies the input,
// joined before the kernels). Each graph ends in a host node that checks the sum of every launch
// against the host's. Each graph and a clone of each is launched 100 times.
import tether;

#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  std::fprintf(stderr, "driver: %s\n", rt.describe().c_str());  // stdout stays deterministic
  tether::Context ctx = rt.context(0);
  tether::Stream s1 = ctx.make_stream(), s2 = ctx.make_stream(), s3 = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto reduce_blocks = mod.kernel<const float*, double*, int>("reduce_blocks");
  auto reduce_final = mod.kernel<const double*, double*, int>("reduce_final");

  constexpr int n = 1 << 20, blocks = 512, threads = 512, launches = 100;
  tether::SharedPinnedBuffer<float> in_h = ctx.alloc_pinned<float>(n).share();
  double expected = 0;  // the host's sum of the same floats
  unsigned seed = 2026;
  for (int i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    expected += in_h.data()[i] = static_cast<float>(seed >> 8) / 16777216.0f;
  }
  tether::SharedBuffer<float> in_d = ctx.alloc<float>(n).share();
  tether::SharedBuffer<double> partial = ctx.alloc<double>(blocks).share(), result_d = ctx.alloc<double>(1).share();
  tether::SharedPinnedBuffer<double> result_h = ctx.alloc_pinned<double>(1).share();
  std::atomic<int> good{0}, bad{0};
  // The host node: runs on the driver's thread once the sum is copied out; it keeps result_h.
  auto check = [result_h, expected, &good, &bad] {
    (std::fabs(result_h.data()[0] - expected) <= 1e-9 * expected ? good : bad).fetch_add(1);
  };
  const tether::Launch first{tether::Grid{blocks}, tether::Block{threads}};  // the partial sums
  const tether::Launch last{tether::Grid{1}, tether::Block{threads}};        // the sum of the partials
  // [nodes]
  tether::Graph by_nodes{ctx};  // (a)
  by_nodes.edit([&](tether::Edit& e) {
    auto copy_in = e.memcpy(in_d, in_h);
    auto clear_partial = e.memset(partial, 0u);  // two 32-bit zeros per double: 0.0
    auto clear_result = e.memset(result_d, 0u);
    auto sums = e.after(copy_in, clear_partial).launch(reduce_blocks, first, in_d, partial, n);
    auto total = e.after(sums, clear_result).launch(reduce_final, last, partial, result_d, blocks);
    auto copy_out = e.after(total).memcpy(result_h, result_d);
    e.after(copy_out).host(check);
  });
  // [nodes]

  // [capture]
  tether::Graph captured = tether::capture(s1, [&](tether::Capture& c) {  // (b)
    c.fork(s2);
    c.fork(s3);
    s1.memcpy(in_d, in_h);
    s2.memset(partial, 0u);
    s3.memset(result_d, 0u);
    c.join(s2);
    c.join(s3);
    s1.launch(reduce_blocks, first, in_d, partial, n);
    s1.launch(reduce_final, last, partial, result_d, blocks);
    s1.memcpy(result_h, result_d);
    s1.host(check);
  });
  // [capture]

  // [run]
  auto run = [&](const char* name, const tether::Graph& g) {
    const int before = good.load();
    tether::GraphExec exec = g.instantiate();
    for (int i = 0; i < launches; ++i) exec.launch(s1);
    s1.synchronize();
    const int passed = good.load() - before;
    std::printf("%-26s %zu nodes, %d launches: sum %.6f (host %.6f), %d launches checked good\n", name,
                g.node_count(), launches, result_h.data()[0], expected, passed);
    return passed == launches;
  };
  examples::picture("15-by-nodes", by_nodes), examples::picture("15-captured", captured);
  bool ok = run("(a) explicit nodes:", by_nodes);
  ok = run("(a) its clone:", by_nodes.clone()) && ok;
  ok = run("(b) stream capture:", captured) && ok;
  ok = run("(b) its clone:", captured.clone()) && ok;
  std::printf("%s: %d launches checked bad\n", ok && bad.load() == 0 ? "PASS" : "FAIL", bad.load());
  // [run]
  return ok && bad.load() == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
