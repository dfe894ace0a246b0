// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The first program (docs/first-program.md): y = 2 * x + y in a one-node graph, on a GPU or on the
// simulator. The install test (tests/install/first_program.sh) builds exactly this file.
#include <cstdio>
#include <exception>
#include <vector>

#include "kernels.hpp"

int main() try {
  register_twins();  // before the first lookup; a GPU ignores twins
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();

  constexpr int n = 1 << 16;
  std::vector<float> x(n, 1.0f), y(n, 3.0f);
  tether::SharedBuffer<float> dx = ctx.alloc<float>(n).share();
  tether::SharedBuffer<float> dy = ctx.alloc<float>(n).share();
  dx.copy_from(x);
  dy.copy_from(y);

  tether::Graph g{ctx};
  g.edit([&](tether::Edit& e) {
    e.launch(saxpy_kernel(ctx), tether::Launch{tether::Grid{n / 256}, tether::Block{256}}, 2.0f, dx, dy, n);
  });
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();

  dy.copy_to(y);
  std::printf("y[0] = %g, y[%d] = %g (%s driver)\n", y[0], n - 1, y[n - 1],
              tether::to_string(rt.kind()).data());
  return y[0] == 5.0f && y[n - 1] == 5.0f ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
