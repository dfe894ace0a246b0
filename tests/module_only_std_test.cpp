// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
import tether;
// The module-only test, part 2: `import tether;` first, then the textual includes an importer's own
// code needs, in the order docs/modules.md recommends. It covers what part 1
// (module_only_test.cpp, which includes nothing) cannot: the {fmt} formatters (calling fmt::format
// needs <fmt/format.h>), std::hash of node handles and views in unordered containers, comparing
// an error with an Errc (<system_error>), the reclaimer's waits (<chrono>), and an owner type with
// a `tether_owner_label` of its own (<string>). It also provides part 1's kernel image.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "support/paths.hpp"

namespace tether_module_only {
tether::Image test_kernels() {
  return tether::Image::from_file(tether_test::beside_executable("kernels.fatbin"));
}
}  // namespace tether_module_only

namespace {

void register_scale() {
  tether::sim::register_kernel<float*, float, int>(
      "scale", [](const tether::sim::LaunchInfo& l, float* x, float a, int n) {
        for (std::size_t i = 0; i < l.threads() && i < static_cast<std::size_t>(n); ++i) x[i] *= a;
      });
}

// An owner of the importer's own with a label of its own (found by argument-dependent lookup).
struct Labelled {
  int id = 0;
  friend std::string tether_owner_label(const Labelled& l) { return fmt::format("labelled #{}", l.id); }
};

}  // namespace

TEST_CASE(
    "the fmt formatters of node handles, inspections, errors and update results work in an importer that "
    "includes fmt after the import") {
  register_scale();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream s = ctx.make_stream();
  tether::Module m = ctx.load_module(tether_module_only::test_kernels());
  auto scale = m.kernel<float*, float, int>("scale");
  tether::SharedBuffer<float> x = ctx.alloc<float>(4).share();
  x.copy_from(std::vector<float>(4, 1.0f));
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, float, int>> k;
  tether::Node<tether::MemsetNode> ms;
  g.edit([&](tether::Edit& e) {
    ms = e.memset(x, 1.0f);
    k = e.after(ms).launch(scale, tether::Grid{1}, tether::Block{4}, x, 2.0f, 4);
  });
  CHECK(fmt::format("{}", k) == "Node(kernel)");
  CHECK(fmt::format("{}", ms) == "Node(memset)");
  CHECK(fmt::format("{}", tether::Node<>(k)) == "Node(kernel)");
  CHECK(fmt::format("{:>14}|{:<14}|", k, tether::Node<tether::HostNode>{}) ==
        "  Node(kernel)|Node(invalid) |");
  tether::Inspection in = tether::inspect(g);
  CHECK(fmt::format("{}", in.graphs[0].nodes[1]) == tether::to_string(in.graphs[0].nodes[1]));
  CHECK(fmt::format("{}", in.graphs[0].nodes[1]).find("kernel scale") != std::string::npos);
  CHECK(fmt::format("{}", in) == tether::to_string(in));

  tether::DriverError d("cuGraphCreate", 1, "", "creating a graph");
  CHECK(fmt::format("{}", d) == d.what());
  CHECK(std::string(d.what()).find("cuGraphCreate failed with CUDA_ERROR_INVALID_VALUE") !=
        std::string::npos);
  tether::UsageError u("Edit::memset: misuse; do it right");
  CHECK(fmt::format("[{}]", u) == "[Edit::memset: misuse; do it right]");
  CHECK(fmt::format("{}", tether::Errc::no_device) == "CUDA_ERROR_NO_DEVICE");

  tether::GraphExec exec = g.instantiate();
  tether::UpdateResult same = exec.update(g);
  CHECK(fmt::format("{}", same) == "success");
  tether::Graph other{ctx};
  other.edit([&](tether::Edit& e) { e.empty(); });
  tether::UpdateResult refused = exec.update(other);
  CHECK_FALSE(static_cast<bool>(refused));
  CHECK(fmt::format("{}", refused).rfind(std::string(tether::to_string(refused.reason)), 0) == 0);
  exec.launch(s);
  s.synchronize();
  std::vector<float> back(4);
  x.copy_to(back);
  CHECK(back == std::vector<float>(4, 2.0f));
}

TEST_CASE("node handles and graph views hash in unordered containers of an importer") {
  tether::Context ctx = tether::Runtime::open().context(0);
  tether::Graph g{ctx};
  tether::Node<tether::EmptyNode> a, b;
  tether::IfResult branch;
  tether::EmbedResult child;
  tether::Graph sub{ctx};
  sub.edit([](tether::Edit& e) { e.empty(); });
  g.edit([&](tether::Edit& e) {
    a = e.empty();
    b = e.after(a).empty();
    branch = e.after(b).if_(e.condition(1));
    child = e.after(a).embed(sub);
  });
  std::unordered_set<tether::Node<>> nodes;
  for (const tether::Node<>& n : g.nodes()) nodes.insert(n);
  CHECK(nodes.size() == 4);
  CHECK(nodes.count(tether::Node<>(b)) == 1);
  std::unordered_set<tether::Node<tether::EmptyNode>> typed{a, b, a};
  CHECK(typed.size() == 2);
  CHECK(std::hash<tether::Node<tether::EmptyNode>>{}(a) == std::hash<tether::Node<tether::EmptyNode>>{}(a));
  std::unordered_map<tether::GraphRef, int> views{{g.ref(), 1}, {child.graph, 2}};
  CHECK(views.at(g.ref()) == 1);
  CHECK(views.at(g.child(child.node)) == 2);
  std::unordered_set<tether::BodyRef> bodies{branch.then_};
  CHECK(bodies.count(g.bodies(branch.node).at(0)) == 1);
}

TEST_CASE("errors compare with Errc, and the reclaimer's waits take chrono durations, in an importer") {
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  std::error_code c = tether::Errc::invalid_value;
  CHECK(c.category() == tether::driver_category());
  CHECK(c.message().find("CUDA_ERROR_INVALID_VALUE") != std::string::npos);
  tether::DriverError d("cuGraphCreate", 2, "", "creating a graph");
  CHECK(d.code() == tether::Errc::out_of_memory);
  CHECK(d.code() != tether::Errc::invalid_value);
  if (rt.kind() == tether::DriverKind::simulated) {
    tether::sim::fail_call("cuGraphCreate", 1, tether::Errc::not_supported);
    try {
      tether::Graph g{ctx};
      FAIL("cuGraphCreate did not fail");
    } catch (const tether::DriverError& e) {
      CHECK(e.code() == tether::Errc::not_supported);
      CHECK(e.entry_point() == "cuGraphCreate");
    }
    tether::sim::clear_faults();
  }
  {
    tether::Graph g{ctx};
    g.edit([](tether::Edit& e) { e.empty(); });
    g.instantiate().launch(ctx.make_stream());
  }
  tether::reclaim();
  CHECK(tether::wait_reclaimed(std::chrono::seconds(10)));
  CHECK(tether::wait_released(ctx, std::chrono::milliseconds(10000)));
  if (rt.kind() == tether::DriverKind::simulated) CHECK(tether::sim::quiesce(std::chrono::seconds(10)));
}

TEST_CASE("an owner type of the importer's own is labelled by its tether_owner_label") {
  tether::Context ctx = tether::Runtime::open().context(0);
  tether::Graph g{ctx};
  tether::Node<tether::EmptyNode> n;
  g.edit([&](tether::Edit& e) {
    n = e.after().keeping(tether::Owners{Labelled{7}, std::vector<int>(3)}).empty();
  });
  tether::Inspection in = tether::inspect(g);
  REQUIRE(in.graphs[0].nodes.size() == 1);
  const std::vector<std::string>& owners = in.graphs[0].nodes[0].owners;
  CHECK(std::find(owners.begin(), owners.end(), "labelled #7") != owners.end());
  CHECK(std::find_if(owners.begin(), owners.end(), [](const std::string& o) {
          return o.find("vector<int") != std::string::npos;
        }) != owners.end());
}
