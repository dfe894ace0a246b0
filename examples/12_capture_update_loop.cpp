// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 12 — the capture–update loop: every step captures its work afresh (as a decode loop does),
// updates one executable from the new graph in place (cuGraphExecUpdate), and launches it. When
// the step's topology changes, the driver refuses the update and update_or_reinstantiate makes a
// new executable instead, saying why. Each step's operands belong to that step's graph; the
// executable takes them over and lets the previous step's go once no launch can use them.
import tether;

#include <chrono>
#include <cstdio>
#include <memory>
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

  constexpr int n = 1024, steps = 6;
  const tether::Launch launch{tether::Grid{n / 256}, tether::Block{256}};
  tether::SharedPinnedBuffer<float> out = ctx.alloc_pinned<float>(n).share();
  std::vector<std::weak_ptr<int>> step_state;  // to see which steps' owners are still alive
  // [step]
  auto capture_step = [&](int step) {
    return tether::capture(stream, [&] {
      tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();  // this step's buffer
      stream.memset(x, 1.0f);
      stream.launch(scale, launch, x, static_cast<float>(step), n);   // x = step
      if (step >= 4) stream.launch(scale, launch, x, 2.0f, n);        // from step 4 on: one more node
      stream.memcpy(out, x);
      auto state = std::make_shared<int>(step);                       // this step's host-side state
      step_state.push_back(state);
      stream.host([state] {});
    });
  };
  // [step]

  // [loop]
  tether::GraphExec exec = capture_step(1).instantiate();
  bool right = true;
  for (int step = 1; step <= steps; ++step) {
    if (step == 1) {
      std::printf("step 1: instantiated");
    } else {
      tether::Graph g = capture_step(step);
      tether::UpdateResult r = exec.update_or_reinstantiate(g);
      std::printf("step %d: %-14s %s", step, r.reinstantiated ? "reinstantiated" : "updated",
                  std::string(tether::to_string(r.reason)).c_str());
    }  // the step's Graph is dropped here: the executable holds what it needs
    exec.launch(stream);
    stream.synchronize();  // the step's result is read back: a decode loop reads its token here
    const float want = static_cast<float>(step >= 4 ? 2 * step : step);
    right = right && out.data()[0] == want && out.data()[n - 1] == want;
    std::printf(", out[0] = %g\n", out.data()[0]);
  }
  // [loop]

  // [alive]
  tether::wait_released(ctx, std::chrono::seconds(5));
  std::string alive;
  for (std::size_t i = 0; i < step_state.size(); ++i)
    if (!step_state[i].expired()) alive += " " + std::to_string(i + 1);
  std::printf("steps whose owners are alive:%s (the graph the executable was made from, and its last update)\n",
              alive.c_str());
  exec.reset();
  tether::wait_released(ctx, std::chrono::seconds(5));
  int left = 0;
  for (const auto& w : step_state) left += !w.expired();
  std::printf("after the executable goes: %d alive, %zu graphs alive\n", left, tether::live_graphs());
  // [alive]
  return right && alive == " 4 6" && left == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
