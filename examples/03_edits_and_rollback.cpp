// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 03 — edits and rollback: an edit is a transaction. g.edit(fn) commits when fn returns; when fn
// throws, every change of the edit (an update, a new node and its owners) is undone and the graph
// is exactly as before; an Edit object commits with commit() and rolls back when dropped without
// it. At the end everything is dropped, and nothing is left alive.
import tether;

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "twins.hpp"  // examples::register_twins(): what the simulator runs for each kernel of kernels.cu

// [tracked]
struct Tracked {  // an owner that counts its live objects: what "released" means below
  static inline std::atomic<int> alive{0};
  Tracked() { ++alive; }
  Tracked(Tracked&&) noexcept { ++alive; }
  ~Tracked() { --alive; }
};
// [tracked]

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];  // kernels.fatbin sits next to the program
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");
  constexpr int n = 256;
  const tether::Launch launch{tether::Grid{1}, tether::Block{n}};
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();
  auto run = [&](const tether::Graph& g) {  // one launch of a new executable; returns x[0]
    tether::GraphExec exec = g.instantiate();
    exec.launch(stream);
    stream.synchronize();
    std::vector<float> h(n);
    x.copy_to(h);
    return h[0];
  };

  // [commit]
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, float, int>> k;
  g.edit([&](tether::Edit& e) {  // commits when the function returns
    auto fill = e.memset(x, 1.0f);
    k = e.after(fill).launch(scale, launch, x, 2.0f, n);
  });
  std::printf("committed: %zu nodes, x = %g\n", g.node_count(), run(g));
  // [commit]

  // [rollback]
  tether::Node<tether::KernelNode<float*, float, int>> added;
  try {
    g.edit([&](tether::Edit& e) {
      e.update(k, launch, x, 100.0f, n);  // a new version of k, then a new node with an owner
      added = e.after(k).keeping(tether::Owners{Tracked{}}).launch(scale, launch, x, 3.0f, n);
      std::printf("inside the edit: %d tracked owner alive\n", Tracked::alive.load());
      throw std::runtime_error("something failed halfway");
    });
  } catch (const std::runtime_error& err) {
    std::printf("the edit threw \"%s\" and was rolled back\n", err.what());
  }
  tether::wait_released(ctx);  // the undone operations' owners go on the reclaimer
  std::printf("after the rollback: %zu nodes, x = %g, the new node's handle is %s, %d tracked owners alive\n",
              g.node_count(), run(g), added.valid() ? "valid" : "invalid", Tracked::alive.load());
  // [rollback]

  // [object]
  {
    tether::Edit e = g.edit();  // the same transaction, as an object
    e.after(k).keeping(tether::Owners{Tracked{}}).launch(scale, launch, x, 3.0f, n);
    e.commit();  // without it, dropping e would roll back
  }
  {
    tether::Edit e = g.edit();
    e.after(k).launch(scale, launch, x, 1000.0f, n);
  }  // dropped without commit(): rolled back
  std::printf("an Edit object committed, another dropped: %zu nodes, x = %g (1 * 2 * 3)\n", g.node_count(),
              run(g));
  // [object]

  // [end]
  const float last = run(g);
  g.reset();  // the graph and its owners go once nothing uses them
  tether::wait_released(ctx);
  std::printf("everything dropped: %zu graphs, %zu executables, %d tracked owners alive\n",
              tether::live_graphs(), tether::live_executables(), Tracked::alive.load());
  // [end]
  return last == 6.0f && !added.valid() && Tracked::alive == 0 && tether::live_graphs() == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
