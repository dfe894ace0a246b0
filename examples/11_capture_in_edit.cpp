// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 11 — capture inside an edit: e.capture, e.after(n).capture and e.in(body).capture record stream
// work as child graph nodes of the graph being edited, in the edit's transaction. The three
// regions (a root one, one after it, one in the body of an IF node) keep their operands; an
// edit that throws after capturing rolls back whole, and the captured owners are released once.
import tether;

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");
  auto condition_from = mod.kernel<unsigned long long, const int*>("condition_from");

  constexpr int n = 1024;
  const tether::Launch launch{tether::Grid{n / 256}, tether::Block{256}}, one{tether::Grid{1}, tether::Block{1}};
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();
  tether::SharedBuffer<int> flag = ctx.alloc<int>(1).share();  // the IF's condition, read on the device
  tether::Graph g{ctx};
  std::string refused;
  // [regions]
  g.edit([&](tether::Edit& e) {
    tether::CaptureResult fill = e.capture(stream, [&] {         // a root region
      tether::SharedBuffer<float> ones = ctx.alloc<float>(n).share();  // kept by the region's nodes
      stream.memset(ones, 1.0f);
      stream.memcpy(x, ones);
    });
    tether::CaptureResult twice = e.after(fill.node).capture(stream, [&] {  // after the first region
      stream.launch(scale, launch, x, 2.0f, n);
      try {
        e.empty();                                                 // refused while the edit captures
      } catch (const tether::UsageError& err) {
        refused = err.what();
      }
    });
    tether::Condition c = e.condition(0);
    auto decide = e.after(twice.node).launch(condition_from, one, c.handle(), flag);
    tether::IfResult branch = e.after(decide).if_(c);
    e.in(branch.then_).capture(stream, [&] { stream.launch(scale, launch, x, 10.0f, n); });  // in a body
    std::printf("regions: %zu + %zu nodes\n", fill.graph.node_count(), twice.graph.node_count());
  });
  // [regions]
  std::printf("while capturing, e.empty() threw: %s\n", refused.c_str());
  std::printf("top level: %zu nodes (two regions, the kernel that decides, the IF; its body holds the third)\n",
              g.node_count());

  // [run]
  examples::picture("11-captured-regions", g);  // docs/tutorial/img/11-captured-regions.svg
  tether::GraphExec exec = g.instantiate();
  bool right = true;
  for (int f : {0, 1}) {  // x = 1 * 2, then * 10 if the flag is set
    flag.copy_from(std::span<const int>(&f, 1));
    exec.launch(stream);
    stream.synchronize();
    std::vector<float> h(n);
    x.copy_to(h);
    right = right && std::count(h.begin(), h.end(), f ? 20.0f : 2.0f) == n;
    std::printf("flag %d: x[0] = %g\n", f, h[0]);
  }
  // [run]

  // [rollback]
  auto state = std::make_shared<int>(0);
  try {
    g.edit([&](tether::Edit& e) {
      e.capture(stream, [&] { stream.host([state] { ++*state; }); });
      throw std::runtime_error("the edit changed its mind");
    });
  } catch (const std::runtime_error& err) {
    tether::wait_released(ctx, std::chrono::seconds(5));
    std::printf("%s: the graph still has %zu nodes; the captured callback's state: use_count() = %ld, ran %d times\n",
                err.what(), g.node_count(), state.use_count(), *state);
  }
  // [rollback]
  return right && g.node_count() == 4 && state.use_count() == 1 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
