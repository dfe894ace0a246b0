// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 14 — errors and what they tell you. tether throws UsageError for a misuse it sees before any
// driver call (the driver state is unchanged) and DriverError when the driver refuses (with the
// entry point, the CUDA_ERROR_* code and what tether was doing). The program provokes five:
// a moved-from Graph, a node handle of a rolled-back edit, a kernel the module lacks, a capture
// with a forked stream never joined, and a capture invalidated by a context-wide synchronize.
// After each it carries on; at the end a graph still runs and nothing is left alive.
import tether;

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream(), s2 = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");
  const tether::Launch launch{tether::Grid{1}, tether::Block{256}};
  tether::SharedBuffer<float> x = ctx.alloc<float>(256).share();
  int caught = 0;
  // [attempt]
  auto attempt = [&](const char* what, auto&& fn) {  // runs fn and prints the error it throws
    try {
      fn();
      std::printf("%s\n  no error\n", what);
    } catch (const tether::UsageError& e) {
      std::printf("%s\n  UsageError: %s\n", what, e.what()), ++caught;
    } catch (const tether::DriverError& e) {  // what() also has the driver's description
      std::printf("%s\n  DriverError from %s: %s (%d)\n  while %s\n", what, std::string(e.entry_point()).c_str(),
                  std::string(e.result_name()).c_str(), e.result(), std::string(e.context()).c_str()), ++caught;
    }
  };
  // [attempt]

  // [moved-from]
  tether::Graph g{ctx};
  tether::Graph taken = std::move(g);
  attempt("1. a moved-from Graph:", [&] { (void)g.node_count(); });
  // [moved-from]
  // [rolled-back]
  tether::Node<tether::KernelNode<float*, float, int>> k;
  try {
    taken.edit([&](tether::Edit& e) {
      k = e.launch(scale, launch, x, 2.0f, 256);
      throw std::runtime_error("abandoned");  // the edit rolls back: k's node is destroyed
    });
  } catch (const std::runtime_error&) {}
  attempt("2. a node handle of a rolled-back edit:", [&] { taken.edit([&](tether::Edit& e) { e.after(k).empty(); }); });
  // [rolled-back]
  // [driver]
  attempt("3. a kernel the module does not have:", [&] { (void)mod.kernel<float*, int>("scale_all"); });
  // [driver]
  // [unjoined]
  attempt("4. a forked stream not joined back:", [&] {
    (void)tether::capture(stream, [&](tether::Capture& c) {
      c.fork(s2);
      s2.launch(scale, launch, x, 2.0f, 256);
    });
  });
  // [unjoined]
  // [invalidated]
  attempt("6. work on a capture that was invalidated:", [&] {
    (void)tether::capture(stream, [&] {
      stream.launch(scale, launch, x, 2.0f, 256);
      attempt("5. a context-wide synchronize during a capture:", [&] { ctx.synchronize(); });
      stream.launch(scale, launch, x, 2.0f, 256);  // the capture is invalidated: refused
    });
  });
  // [invalidated]

  // [recover]
  std::vector<float> h(256, 1.0f);
  x.copy_from(h);
  taken.edit([&](tether::Edit& e) { e.launch(scale, launch, x, 4.0f, 256); });
  tether::GraphExec exec = taken.instantiate();
  exec.launch(stream);
  stream.synchronize();
  x.copy_to(h);
  exec.reset();
  taken.reset();
  bool released = tether::wait_released(ctx, std::chrono::seconds(5));  // x: only the program's handle left?
  std::printf("recovered: x[0] = %g after %d errors; graphs alive: %zu, executables: %zu, x.use_count() = %ld\n",
              h[0], caught, tether::live_graphs(), tether::live_executables(), x.use_count());
  // [recover]
  return caught == 6 && h[0] == 4.0f && tether::live_graphs() == 0 && released && x.use_count() == 1 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "unexpected: %s\n", e.what());
  return 1;
}
