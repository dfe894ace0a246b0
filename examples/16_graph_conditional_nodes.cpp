// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 16 — graph conditional nodes: port of NVIDIA's graphConditionalNodes (573 lines in the original;
// this port: 95) written from its description: its scenarios, each a graph whose conditional node
// is decided on the device by a kernel that reads a value from device memory: an IF whose body
// runs only when the value is non-zero; a WHILE whose body decrements the value as a counter and
// clears the condition at zero; an IF/ELSE; a SWITCH over four cases; and a WHILE whose body is
// filled by stream capture (e.in(body).capture). Each graph runs with two values and prints PASS
// or FAIL; the program fails if any does.
import tether;

#include <cstdio>
#include <span>
#include <string>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  std::fprintf(stderr, "driver: %s\n", rt.describe().c_str());  // stdout stays deterministic
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto condition_from = mod.kernel<unsigned long long, const int*>("condition_from");
  auto countdown = mod.kernel<unsigned long long, int*>("countdown");
  auto add_to = mod.kernel<int*, int>("add_to");
  tether::SharedBuffer<int> value = ctx.alloc<int>(1).share(), out = ctx.alloc<int>(1).share();
  const tether::Launch one{tether::Grid{1}, tether::Block{1}};

  auto run = [&](tether::GraphExec& exec, int input) {  // one launch with *value = input; returns *out
    int zero = 0, got = -1;
    value.copy_from(std::span<const int>(&input, 1));
    out.copy_from(std::span<const int>(&zero, 1));
    exec.launch(stream);
    stream.synchronize();
    out.copy_to(std::span<int>(&got, 1));
    return got;
  };
  int failed = 0, drawn = 0;
  auto check = [&](const char* name, const tether::Graph& g, int in_a, int want_a, int in_b, int want_b) {
    tether::GraphExec exec = g.instantiate();  // one executable, launched with each value
    const int a = run(exec, in_a), b = run(exec, in_b);
    const bool ok = a == want_a && b == want_b;
    std::printf("%s %-34s value %d: out %d (expected %d); value %d: out %d (expected %d)\n", ok ? "PASS" : "FAIL", name,
                in_a, a, want_a, in_b, b, want_b);
    failed += !ok;
    examples::picture("16-" + std::to_string(++drawn), g);  // docs/tutorial/img/16-<n>.svg
  };
  // [graph]
  // Every graph starts with the kernel that sets its condition from the value; `body` adds the
  // conditional node after it (through `at`) and fills its bodies.
  auto graph = [&](auto&& body) {
    tether::Graph g{ctx};
    g.edit([&](tether::Edit& e) {
      tether::Condition c = e.condition(0);
      auto at = e.after(e.launch(condition_from, one, c.handle(), value));
      body(e, at, c);
    });
    return g;
  };
  using At = tether::BasicInserter<false>;
  // [graph]

  // [scenarios]
  check("IF:", graph([&](tether::Edit& e, At& at, const tether::Condition& c) {
          e.in(at.if_(c).then_).launch(add_to, one, out, 1);
        }), 0, 0, 1, 1);
  check("WHILE, device-side counter:", graph([&](tether::Edit& e, At& at, const tether::Condition& c) {
          auto step = e.in(at.while_(c).body).launch(countdown, one, c.handle(), value);  // clears c at 0
          e.after(step).launch(add_to, one, out, 1);
        }), 5, 5, 0, 0);
  check("IF/ELSE:", graph([&](tether::Edit& e, At& at, const tether::Condition& c) {
          tether::IfElseResult r = at.if_else(c);
          e.in(r.then_).launch(add_to, one, out, 1);
          e.in(r.else_).launch(add_to, one, out, 10);
        }), 1, 1, 0, 10);
  check("SWITCH, 4 cases:", graph([&](tether::Edit& e, At& at, const tether::Condition& c) {
          tether::SwitchResult r = at.switch_(c, 4);
          for (int i = 0; i < 4; ++i) e.in(r.cases[static_cast<unsigned>(i)]).launch(add_to, one, out, 100 + i);
        }), 2, 102, 7, 0);
  check("WHILE, body by stream capture:", graph([&](tether::Edit& e, At& at, const tether::Condition& c) {
          e.in(at.while_(c).body).capture(stream, [&] {
            stream.launch(countdown, one, c.handle(), value);
            stream.launch(add_to, one, out, 2);
          });
        }), 3, 6, 0, 0);
  // [scenarios]
  return failed ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
