// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 02 — ownership: nodes keep what they use. The program drops its module, kernel and buffer right
// after building; a clone and an executable keep their own versions; a per-node executable update
// leaves the graph alone; owners are released only when the last consumer is gone.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

import tether;

int main(int, char** argv) try {
  tether::sim::register_kernel<float*, float, int>("scale", [](const tether::sim::LaunchInfo&, float* x, float a, int n) {
    for (int i = 0; i < n; ++i) x[i] *= a;
  });
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  constexpr int n = 256;
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, float, int>> k;
  tether::Unowned<float> peek;  // only to read results: not retained
  {
    std::string dir = argv[0];
    tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
    auto scale = mod.kernel<float*, float, int>("scale");
    tether::DeviceBuffer<float> x = ctx.alloc<float>(n);
    std::vector<float> ones(n, 1.0f);
    x.copy_from(ones);
    peek = tether::unowned(x);
    g.edit([&](tether::Edit& e) {
      k = e.launch(scale, tether::Grid{1}, tether::Block{n}, std::move(x), 2.0f, n);  // the node owns x now
    });
  }  // module, kernel and the program's handle to x are gone; the graph keeps them

  tether::Graph copy = g.clone();          // keeps its own references to the same owners
  tether::GraphExec exec = g.instantiate();
  exec.update(k, tether::Grid{1}, tether::Block{n}, peek, 5.0f, n);  // executable only; unowned
  exec.launch(stream);                    // x *= 5
  stream.synchronize();
  tether::GraphExec from_copy = copy.instantiate();
  from_copy.launch(stream);               // the clone still has factor 2: x *= 2
  stream.synchronize();

  tether::SharedBuffer<float> out = ctx.alloc<float>(n).share();
  tether::Graph reader{ctx};
  reader.edit([&](tether::Edit& e) { e.memcpy(out, peek); });
  tether::GraphExec copier = reader.instantiate();
  copier.launch(stream);
  stream.synchronize();
  std::vector<float> h(n);
  out.copy_to(h);
  std::printf("x[0] = %g (1 * 5 * 2)\n", h[0]);

  // Drop everything: the owners go on the reclaimer once CUDA lets go of the last reference.
  g = tether::Graph{ctx};
  copy = tether::Graph{ctx};
  reader = tether::Graph{ctx};
  exec = g.instantiate();
  from_copy = g.instantiate();
  copier = g.instantiate();
  k = {};
  bool released = tether::wait_reclaimed(std::chrono::seconds(5));
  std::printf("owners released: %s\n", released ? "yes" : "not yet");
  return h[0] == 10.0f ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
