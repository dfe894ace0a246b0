// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 05 — clone and embed: a clone is an independent copy (its nodes found with find, updated on their
// own); embedding puts a copy of a graph into another as a child graph node; the child is edited
// through its GraphRef. Copies keep their own references to the owners, so the graphs they came
// from can change or go away.
import tether;

#include <cstdio>
#include <string>
#include <vector>

#include "twins.hpp"  // examples::register_twins(): what the simulator runs for each kernel of kernels.cu

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
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share(), y = ctx.alloc<float>(n).share();

  // [clone]
  tether::Graph twice{ctx};  // a piece to reuse: x *= 2
  tether::Node<tether::KernelNode<float*, float, int>> k;
  twice.edit([&](tether::Edit& e) { k = e.launch(scale, launch, x, 2.0f, n); });
  tether::Graph thrice = twice.clone();  // an independent copy...
  thrice.edit([&](tether::Edit& e) { e.update(thrice.find(k), launch, x, 3.0f, n); });  // ...changed alone
  // [clone]

  // [embed]
  tether::Graph g{ctx};
  tether::GraphRef second;
  g.edit([&](tether::Edit& e) {
    auto fill_x = e.memset(x, 1.0f);
    auto fill_y = e.memset(y, 1.0f);
    tether::EmbedResult first = e.after(fill_x).embed(twice);  // a child graph node: a copy of `twice`
    second = e.after(first.node, fill_y).embed(thrice).graph;  // the view of the second copy
  });
  second.edit([&](tether::Edit& e) { e.launch(scale, launch, y, 10.0f, n); });  // a node inside the child
  // [embed]

  // [independent]
  twice.edit([&](tether::Edit& e) { e.update(k, launch, x, 7.0f, n); });  // changes `twice`, not its copy
  twice.reset();
  thrice.reset();  // the copies in g keep their own references to x, y and the module
  std::printf("g: %zu nodes (two memsets, two child graphs); the second child: %zu nodes\n", g.node_count(),
              second.node_count());
  // [independent]

  examples::picture("05-embedded", g);  // docs/tutorial/img/05-embedded.svg
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  std::vector<float> hx(n), hy(n);
  x.copy_to(hx);
  y.copy_to(hy);
  std::printf("x = %g (1 * 2 * 3), y = %g (1 * 10, the node added inside the child)\n", hx[0], hy[0]);
  return hx[0] == 6.0f && hx[n - 1] == 6.0f && hy[0] == 10.0f && hy[n - 1] == 10.0f ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
