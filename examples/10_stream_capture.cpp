// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 10 — stream capture: tether::capture records the stream work a function issues into a new
// Graph whose nodes own their operands, so the function's local buffers may go when it returns.
// A second stream is forked into the capture and joined back (two branches that run
// concurrently); keeping() makes the graph keep what work tether did not issue would use. The
// graph runs from an executable, then from the executable alone, and everything is released.
import tether;

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream s1 = ctx.make_stream(), s2 = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");
  auto add_scaled = mod.kernel<float*, const float*, float, int>("add_scaled");

  constexpr int n = 4096;
  const tether::Launch launch{tether::Grid{n / 256}, tether::Block{256}};
  tether::SharedPinnedBuffer<float> out = ctx.alloc_pinned<float>(n).share();
  auto runs = std::make_shared<int>(0);  // counted by a host node on every launch
  const std::size_t graphs_before = tether::live_graphs();
  // [capture]
  tether::Graph g = tether::capture(s1, [&](tether::Capture& c) {
    tether::SharedBuffer<float> a = ctx.alloc<float>(n).share(), b = ctx.alloc<float>(n).share();
    s1.memset(a, 1.0f);                        // a = 1
    c.fork(s2);                                // s2 joins the capture, after the memset
    s2.memset(b, 2.0f);                        // the branch on s2: b = 10 ...
    s2.launch(scale, launch, b, 5.0f, n);
    s1.launch(scale, launch, a, 3.0f, n);      // ... while s1 makes a = 3
    c.join(s2);                                // s1 waits for the branch
    s1.launch(add_scaled, launch, a, b, 0.5f, n);  // a += 0.5 * b: 8
    s1.memcpy(out, a);
    s1.host([runs] { ++*runs; });
    tether::SharedBuffer<float> table = ctx.alloc<float>(n).share();
    c.keeping(tether::Owners{table});          // what a library's work on s1 would use
  });  // a, b and table are dropped here: the graph's nodes keep them
  // [capture]
  std::printf("captured %zu nodes; anonymous owners (from keeping): %zu\n", g.node_count(), g.anonymous_owners());

  // [run]
  tether::GraphExec exec = g.instantiate();
  for (int i = 0; i < 3; ++i) exec.launch(s1);
  s1.synchronize();
  std::printf("3 launches: out[0] = %g (3 * 1 + 0.5 * 10), host node ran %d times\n", out.data()[0], *runs);
  out.data()[0] = 0;
  g.reset();             // the executable keeps the definition and its owners
  exec.launch(s1);
  s1.synchronize();
  std::printf("graph dropped, executable launched: out[0] = %g, host node ran %d times\n", out.data()[0], *runs);
  // [run]

  // [release]
  const std::size_t graphs_alive = tether::live_graphs() - graphs_before;
  exec.reset();          // the last consumer: the owners go to tether's reclaimer
  const bool released = tether::wait_released(ctx, std::chrono::seconds(5));
  std::printf("graphs alive: %zu with the executable, %zu without; owners released: %s; runs.use_count() = %ld\n",
              graphs_alive, tether::live_graphs() - graphs_before, released ? "yes" : "no", runs.use_count());
  // [release]
  const bool right = std::count(out.data(), out.data() + n, 8.0f) == n;  // every element, not just [0]
  return right && *runs == 4 && released && runs.use_count() == 1 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
