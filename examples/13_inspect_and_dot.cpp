// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 13 — inspect and DOT: see what owns what. A graph with a kernel, a while loop, a captured region
// and an embedded child graph; tether::inspect lists every node, its dependencies and the owners of
// its current version; an executable shows the versions it keeps and which launch they wait for;
// tether::to_dot draws the same, and tether::debug_dot_print writes the driver's own picture.
import tether;

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "twins.hpp"  // the simulator twins of kernels.cu; examples::picture (pictures.hpp)

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream(), side = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");
  auto countdown = mod.kernel<unsigned long long, int*>("countdown");
  constexpr int n = 256;
  const tether::Launch all{tether::Grid{1}, tether::Block{n}}, one{tether::Grid{1}, tether::Block{1}};
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share(), y = ctx.alloc<float>(n).share();
  tether::SharedBuffer<int> counter = ctx.alloc<int>(1).share();

  // [build]
  tether::Graph half{ctx};                               // embedded below: y *= 0.5
  half.edit([&](tether::Edit& e) { e.launch(scale, all, y, 0.5f, n); });
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, float, int>> k;
  g.edit([&](tether::Edit& e) {
    auto fill = e.memset(x, 1.0f);
    auto reset = e.memset(counter, 3);                   // the loop runs three times per launch
    k = e.after(fill).launch(scale, all, x, 3.0f, n);    // x = 3
    tether::Condition c = e.condition(1);
    auto loop = e.after(k, reset).while_(c);
    auto twice = e.in(loop.body).launch(scale, all, x, 2.0f, n);  // x = 24
    e.after(twice).launch(countdown, one, c.handle(), counter);   // in the body too
    auto region = e.after(loop.node).capture(side, [&](tether::Capture&) {
      side.memset(y, 5.0f);                              // captured, with its operand owned
      side.launch(scale, all, y, 2.0f, n);               // y = 10
    });
    e.after(region.node).embed(half);                    // y = 5
  });
  // [build]
  // [inspect]
  tether::Inspection in = tether::inspect(g);
  std::printf("%s", tether::to_string(in).c_str());
  examples::picture("13-graph", g);
  // [inspect]

  // [exec]
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);                                   // launch 1
  exec.update(k, all, x, 4.0f, n);                       // the executable's own version
  exec.launch(stream);                                   // launch 2 uses it
  exec.update(k, all, x, 3.0f, n);                       // supersedes it while launch 2 may run
  tether::Inspection ex = tether::inspect(exec);
  std::printf("executable: %llu launches\n", static_cast<unsigned long long>(ex.launches));
  for (const tether::ExecVersion& v : ex.versions)       // the instantiated versions aside
    if (v.state != tether::ExecVersion::State::instantiated)
      std::printf("  node %zu: %s (launch %llu), owns %zu\n", v.node, std::string(tether::to_string(v.state)).c_str(),
                  static_cast<unsigned long long>(v.state == tether::ExecVersion::State::updated ? v.since_launch
                                                                                                 : v.last_launch),
                  v.owners.size());
  examples::picture("13-exec", exec);
  stream.synchronize();
  exec.reclaim(stream);                                  // a marker: launch 2 is done
  stream.synchronize();
  auto superseded = [&] {
    std::size_t s = 0;
    for (const tether::ExecVersion& v : tether::inspect(exec).versions)
      s += v.state == tether::ExecVersion::State::superseded;
    return s;
  };
  for (int i = 0; i < 100 && superseded() > 0; ++i) tether::wait_reclaimed(std::chrono::milliseconds(10));
  std::printf("after reclaim: %zu superseded versions kept\n", superseded());
  // [exec]

  // [driver]
  std::string path = dir + ".driver.dot";
  tether::debug_dot_print(g, path);                      // cuGraphDebugDotPrint: handles, no owners
  std::printf("the driver's own picture: written (%s)\n", std::remove(path.c_str()) == 0 ? "and removed" : "?");
  // [driver]

  std::vector<float> hx(n), hy(n);
  x.copy_to(hx);
  y.copy_to(hy);
  std::printf("x[0] = %g, y[0] = %g\n", hx[0], hy[0]);   // launch 2: 1 * 4 * 8 = 32; 5 * 2 * 0.5
  return hx[0] == 32.0f && hy[0] == 5.0f && in.graphs.size() == 4 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
