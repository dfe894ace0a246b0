// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 01 — quickstart: open the driver (the GPU when usable, otherwise the simulator), build a graph
// whose nodes own their buffers, run it, change a node, run it again.
#include <cstdio>
#include <string>
#include <vector>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

import tether;

int main(int, char** argv) try {
  examples::register_twins();  // the simulator runs a host "twin" of each kernel; the GPU ignores them
  tether::Runtime rt = tether::Runtime::open();
  std::printf("driver: %s\n", rt.describe().c_str());
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];                         // kernels.fatbin sits next to the program
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");

  constexpr int n = 1024;
  const tether::Launch launch{tether::Grid{n / 256}, tether::Block{256}};  // dimensions (+ shared memory, attributes)
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, float, int>> k;
  int launches = 0;
  g.edit([&](tether::Edit& e) {                      // one transaction
    auto fill = e.memset(x, 1.0f);                   // the node keeps x alive
    k = e.after(fill).launch(scale, launch, x, 2.0f, n);
    e.after(k).host([&launches] { ++launches; });    // a host callable, kept with its node
  });
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  std::vector<float> h(n);
  x.copy_to(h);
  std::printf("after the first launch: x[0] = %g\n", h[0]);

  // A new buffer for the kernel node: the executable still runs the old version until updated.
  tether::SharedBuffer<float> y = ctx.alloc<float>(n).share();
  y.copy_from(h);
  g.edit([&](tether::Edit& e) { e.update(k, launch, y, 3.0f, n); });
  tether::UpdateResult r = exec.update(g);           // whole-graph update: a value, not an exception
  std::printf("whole update: %s\n", std::string(tether::to_string(r.reason)).c_str());
  exec.launch(stream);
  stream.synchronize();
  y.copy_to(h);
  std::printf("after the second launch: y[0] = %g, host node ran %d times\n", h[0], launches);
  return h[0] == 6.0f && launches == 2 ? 0 : 1;
} catch (const tether::DriverUnavailable& e) {
  std::fprintf(stderr, "no driver: %s\n", e.what());
  return 1;
} catch (const tether::DriverError& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
