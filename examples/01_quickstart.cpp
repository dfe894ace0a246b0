// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 01 — quickstart, the README's example: open the driver (the GPU when usable, otherwise the
// simulator), build a graph whose nodes keep the buffer and the kernel they use, run it, check it.
import tether;

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "twins.hpp"  // examples::register_twins(): what the simulator runs for each kernel of kernels.cu

int main(int, char** argv) try {
  examples::register_twins();                    // the GPU ignores twins; the simulator runs them
  tether::Runtime rt = tether::Runtime::open();  // the GPU if usable, else the simulator
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  constexpr int n = 1024;
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();

  tether::Graph g{ctx};
  {
    std::string path = argv[0];
    path = path.substr(0, path.rfind('/') + 1) + "kernels.fatbin";  // next to the program
    tether::Module mod = ctx.load_module(tether::Image::from_file(path));
    auto scale = mod.kernel<float*, float, int>("scale");  // typed by the kernel's parameters
    g.edit([&](tether::Edit& e) {                          // a transaction: all or nothing
      auto fill = e.memset(x, 1.0f);                       // nodes keep what they use:
      e.after(fill).launch(scale, tether::Launch{tether::Grid{n / 256}, tether::Block{256}}, x, 2.0f, n);
    });
  }  // the module and the kernel are dropped here, yet alive: the kernel node keeps them
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();

  std::vector<float> h(n);
  x.copy_to(h);
  const bool ok = std::all_of(h.begin(), h.end(), [](float v) { return v == 2.0f; });
  std::printf("x[0] = %g, x[%d] = %g: %s\n", h[0], n - 1, h[n - 1], ok ? "every element is 1 * 2" : "WRONG");
  return ok ? 0 : 1;
} catch (const std::exception& e) {  // tether::DriverUnavailable, DriverError, UsageError
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
