// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A small program that sim_violations_test.cpp runs as a child process, so that it can check what
// a violation prints on stderr, the process's exit (TETHER_SIM_VIOLATIONS=fatal aborts it) and
// the reading of TETHER_SIM_VIOLATIONS, which happens once per process when the simulator starts.
// It always uses the simulator (Runtime::simulated()), whatever TETHER_DRIVER says.
//
// Usage: sim_violation_program SCENARIO
//   start        start the simulator and print its description
//   unowned      the newcomer's case (issue 21): a kernel node launched with
//                tether::unowned(d), d freed, then the graph launched; prints on stdout how often
//                the twin ran and how many violations were logged
//   unowned-twice  the same executable launched twice (two violations)
//   expected     `unowned` inside a tether::sim::ExpectViolations scope; also prints absorbed()
//   set-quiet    set_violation_mode(quiet) before the simulator starts, then `unowned`
// Exit status: 0 when the scenario ran, 2 for a bad scenario, 3 when an exception was thrown (its
// what() goes to stderr, prefixed with "exception: ").
#include <atomic>
#include <cstdio>
#include <string_view>

#include "tether.hpp"

namespace {

constexpr const char* scale_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry scale(.param .u64 scale_p0, .param .f32 scale_p1, .param .u32 scale_p2)
{
  ret;
}
)PTX";

std::atomic<int> g_runs{0};

// Builds a graph with one kernel node that reaches `d` only through tether::unowned, frees `d`,
// and launches the executable `launches` times.
void unowned_after_free(int launches) {
  tether::sim::register_kernel<float*, float, int>(
      "scale", [](const tether::sim::LaunchInfo&, float* x, float a, int n) {
        for (int i = 0; i < n; ++i) x[i] *= a;
        g_runs.fetch_add(1);
      });
  tether::Runtime rt = tether::Runtime::simulated();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  constexpr int n = 256;
  tether::Module mod = ctx.load_module(tether::Image::from_ptx(scale_ptx));
  auto scale = mod.kernel<float*, float, int>("scale");
  tether::Graph g{ctx};
  {
    tether::DeviceBuffer<float> d = ctx.alloc<float>(n);
    g.edit([&](tether::Edit& e) {
      e.launch(scale, tether::Launch{tether::Grid{1}, tether::Block{n}}, tether::unowned(d), 2.0f, n);
    });
  }                            // d is dropped here: nothing keeps its memory alive
  tether::wait_released(ctx);  // its cuMemFree has run
  tether::GraphExec exec = g.instantiate();
  for (int i = 0; i < launches; ++i) exec.launch(stream);
  stream.synchronize();
  std::printf("twin runs: %d\n", g_runs.load());
  std::printf("violations logged: %zu\n", tether::sim::violations().size());
  tether::sim::clear_violations();
  std::printf("after clear: %zu\n", tether::sim::violations().size());
}

}  // namespace

int main(int argc, char** argv) try {
  std::string_view scenario = argc > 1 ? argv[1] : "";
  if (scenario == "start") {
    std::printf("%s\n", tether::Runtime::simulated().describe().c_str());
  } else if (scenario == "unowned") {
    unowned_after_free(1);
  } else if (scenario == "unowned-twice") {
    unowned_after_free(2);
  } else if (scenario == "expected") {
    tether::sim::ExpectViolations expected;
    unowned_after_free(1);
    std::printf("absorbed: %zu\n", expected.absorbed());
  } else if (scenario == "set-quiet") {
    tether::sim::set_violation_mode(tether::sim::ViolationMode::quiet);
    unowned_after_free(1);
  } else {
    std::fprintf(stderr, "sim_violation_program: unknown scenario '%.*s'\n",
                 static_cast<int>(scenario.size()), scenario.data());
    return 2;
  }
  std::fflush(stdout);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "exception: %s\n", e.what());
  return 3;
}
