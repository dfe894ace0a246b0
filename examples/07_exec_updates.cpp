// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 07 — executable updates: 1000 per-node updates of an executable, each with an owner of its own,
// each followed by a launch; the program waits after every 100. Every launch runs the version its
// update made (the sum proves it), the graph never changes, and superseded versions are released as
// their launches complete: the versions alive are bounded by the launches in flight, not by the
// number of updates.
import tether;

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <span>
#include <string>

#include "twins.hpp"  // examples::register_twins(): what the simulator runs for each kernel of kernels.cu

struct Tracked {  // an owner that counts its live objects: each version below keeps one
  static inline std::atomic<int> alive{0};
  Tracked() { ++alive; }
  Tracked(Tracked&&) noexcept { ++alive; }
  ~Tracked() { --alive; }
};

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];  // kernels.fatbin sits next to the program
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto add_to = mod.kernel<int*, int>("add_to");
  const tether::Launch one{tether::Grid{1}, tether::Block{1}};
  tether::SharedBuffer<int> sum = ctx.alloc<int>(1).share();
  sum.fill_bytes(0);
  auto read = [&] {
    stream.synchronize();
    int v = 0;
    sum.copy_to(std::span<int>(&v, 1));
    return v;
  };

  // [loop]
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<int*, int>> k;
  g.edit([&](tether::Edit& e) { k = e.launch(add_to, one, sum, 0); });  // *sum += 0
  tether::GraphExec exec = g.instantiate();
  constexpr int updates = 1000, batch = 100;
  std::size_t most = 0, at_waits = 0;
  for (int i = 1; i <= updates; ++i) {
    // this executable only: *sum += i
    exec.update(k, tether::kernel(add_to, one, sum, i).keeping(tether::Owners{Tracked{}}));
    exec.launch(stream);                                               // no wait: launches queue up
    most = std::max(most, exec.live_node_versions());
    if (i % batch == 0) {  // wait for the batch's launches, then for the releases they allow
      stream.synchronize();
      tether::wait_released(ctx);
      at_waits = std::max(at_waits, exec.live_node_versions());
    }
  }
  const int total = read();
  std::printf("%d updates, a launch each: sum = %d (1 + 2 + ... + %d = %d)\n", updates, total, updates,
              updates * (updates + 1) / 2);
  // [loop]

  // [bound]
  std::fprintf(stderr, "versions alive between waits, at most: %zu\n", most);  // timing: not on stdout
  std::printf("versions alive: %s 1 + %d between waits (one per launch since the last), %zu at each wait\n",
              most <= 1 + batch ? "at most" : "MORE THAN", batch, at_waits);
  std::printf("tracked owners alive: %d (the current version's)\n", Tracked::alive.load());
  // [bound]

  // [graph]
  sum.fill_bytes(0);
  tether::GraphExec fresh = g.instantiate();  // the graph's node still adds 0
  fresh.launch(stream);
  exec.launch(stream);  // the executable's: adds 1000
  const int both = read();
  std::printf("a new executable of the graph and the updated one: sum = %d (0 + 1000)\n", both);
  // [graph]
  const bool bounded = most <= 1 + batch && at_waits == 1 && Tracked::alive == 1;
  return total == updates * (updates + 1) / 2 && bounded && both == 1000 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
