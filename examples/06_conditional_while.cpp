// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 06 — conditional while: a while node whose body scales a buffer until a kernel, counting down
// in device memory, clears the condition on the device. Bodies are views (BodyRef) edited in the
// same transaction with e.in(body).
import tether;

#include <cstdio>
#include <span>
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
  auto countdown = mod.kernel<unsigned long long, int*>("countdown");

  tether::SharedBuffer<float> x = ctx.alloc<float>(1).share();
  tether::SharedBuffer<int> counter = ctx.alloc<int>(1).share();
  float one = 1.0f;
  int four = 4;
  x.copy_from(std::span<const float>(&one, 1));
  counter.copy_from(std::span<const int>(&four, 1));

  // [graph]
  const tether::Launch single{tether::Grid{1}, tether::Block{1}};
  tether::Graph g{ctx};
  g.edit([&](tether::Edit& e) {
    tether::Condition c = e.condition(1);            // reset to 1 at every launch
    tether::BodyRef body = e.while_(c).body;
    auto step = e.in(body).launch(scale, single, x, 2.0f, 1);
    e.after(step).launch(countdown, single, c.handle(), counter);
  });
  // [graph]
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  float result = 0;
  x.copy_to(std::span<float>(&result, 1));
  std::printf("the body ran until the counter reached zero: x = %g (2^4)\n", result);
  return result == 16.0f ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
