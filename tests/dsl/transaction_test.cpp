// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// F4: an edit of several operations, with a driver failure injected at each of its calls in turn,
// leaves the graph, its metadata and every owner exactly as before (or, for a failure at commit,
// in the documented committed state), with nothing leaked or released twice.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/dsl_fixture.hpp"

using namespace tether;
using namespace tether_test;

namespace {

struct Baseline {
  Graph g;
  Graph other;
  Node<EmptyNode> a;
  Node<KernelNode<float*, float, int>> kn;
  Node<HostNode> h;
  Node<EmptyNode> doomed;
};

struct Fingerprint {
  std::size_t nodes = 0;
  std::size_t edges = 0;
  std::string metadata;
  bool operator==(const Fingerprint&) const = default;
};

Fingerprint fingerprint(const DslFixture& f, const Graph& g) {
  Fingerprint fp;
  fp.nodes = g.node_count();
  detail::call<detail::Entry::cuGraphGetEdges>(f.table(), "counting edges", g.get(), static_cast<CUgraphNode*>(nullptr),
                                               static_cast<CUgraphNode*>(nullptr),
                                               static_cast<CUgraphEdgeData*>(nullptr), &fp.edges);
  fp.metadata = detail::describe(*detail::GraphAccess::hierarchy(g));
  return fp;
}

std::vector<std::string> g_reports;
void collect(const ErrorReport& r) noexcept {
  try {
    g_reports.emplace_back(r.where);
  } catch (...) {
  }
}

}  // namespace

TEST_CASE_FIXTURE(DslFixture, "F4: an edit failing at each of its driver calls in turn leaves graph, metadata and owners as before") {
  if (!simulated) {
    MESSAGE("fault injection needs the simulator");
    return;
  }
  SharedBuffer<float> x = buffer(4, 1.0f), y = buffer(4, 1.0f);
  // Fresh logs per iteration: the previous iteration's graphs release their owners asynchronously.
  auto old_owners = std::make_shared<WitnessLog>();
  auto new_owners = std::make_shared<WitnessLog>();
  int outside_reclaimer = 0;

  auto baseline = [&] {
    Baseline b{Graph{ctx}, Graph{ctx}, {}, {}, {}, {}};
    b.other.edit([&](Edit& e) { e.after().keeping(Owners{Witness(old_owners)}).empty(); });
    b.g.edit([&](Edit& e) {
      b.a = e.after().keeping(Owners{Witness(old_owners)}).empty();
      b.kn = e.after(b.a).keeping(Owners{Witness(old_owners)}).launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4);
      b.h = e.after(b.kn).host([w = Witness(old_owners)] {});
      b.doomed = e.after(b.a).keeping(Owners{Witness(old_owners)}).empty();
    });
    return b;
  };
  // Operations of every kind; `made` counts the new owners created so far.
  auto scenario = [&](Baseline& b, int& made) {
    auto witness = [&] {
      ++made;
      return Witness(new_owners);
    };
    b.g.edit([&](Edit& e) {
      e.update(b.kn, Grid{1}, Block{4}, y, 3.0f, 4);
      auto c = e.after(b.a).keeping(Owners{witness()}).empty();
      e.connect(c, b.h);
      e.update(b.h, [w = witness()] {});
      auto child = e.embed(b.other);
      e.in(child.graph).keeping(Owners{witness()}).empty();
      e.disconnect(b.kn, b.h);
      e.remove(b.doomed);
    });
  };

  // A dry run counts the calls the scenario makes.
  std::uint64_t calls = 0;
  {
    Baseline b = baseline();
    REQUIRE(wait_reclaimed(5s));
    int made = 0;
    sim::reset_call_counts();
    scenario(b, made);
    calls = sim::call_count("*");
  }
  REQUIRE(calls > 10);
  ErrorHook old_hook = set_error_hook(&collect);
  std::uint64_t injected_before = sim::injected_faults();
  int failed_edits = 0, commit_failures = 0;
  for (std::uint64_t k = 1; k <= calls; ++k) {
    CAPTURE(k);
    old_owners = std::make_shared<WitnessLog>();
    new_owners = std::make_shared<WitnessLog>();
    std::optional<Baseline> holder(baseline());
    Baseline& b = *holder;
    REQUIRE(wait_reclaimed(5s));
    const int old_before = 0;
    const int new_before = 0;
    const std::uint64_t live_before = detail::NodeAttachment::live();
    Fingerprint before = fingerprint(*this, b.g);
    g_reports.clear();
    int made = 0;
    sim::fail_call("*", k, Errc::unknown);
    bool threw = false;
    try {
      scenario(b, made);
    } catch (const DriverError& e) {
      threw = true;
      CHECK_FALSE(e.entry_point().empty());
      CHECK(e.code() == Errc::unknown);
    }
    sim::clear_faults();
    if (threw) {
      ++failed_edits;
      Fingerprint after = fingerprint(*this, b.g);
      CHECK(after == before);
      if (!(after == before)) MESSAGE("before: " << before.nodes << " " << before.edges << "\n" << before.metadata << "after: " << after.nodes << " " << after.edges << "\n" << after.metadata);
      CHECK(b.a.valid());
      CHECK(b.kn.valid());
      CHECK(b.doomed.valid());
      // The new owners made before the failure are released exactly once; the old ones are intact.
      CHECK(eventually([&] { return new_owners->destroyed.load() == new_before + made; }));
      CHECK(old_owners->destroyed.load() == old_before);
      CHECK(eventually([&] { return detail::NodeAttachment::live() == live_before; }));
      CHECK(g_reports.empty());
      // The graph is still usable and still runs.
      run(b.g);
    } else {
      // The fault hit a release or removal at commit: reported, never thrown; the graph is consistent.
      ++commit_failures;
      CHECK(g_reports.size() == 1);
      CHECK(b.g.node_count() >= 5);
      run(b.g);
    }
    // Everything goes with the graphs: every owner exactly once.
    holder.reset();
    CHECK(eventually([&] { return old_owners->destroyed.load() == 5; }));
    CHECK(eventually([&] { return new_owners->destroyed.load() == made; }));
    outside_reclaimer += old_owners->outside_reclaimer.load() + new_owners->outside_reclaimer.load();
  }
  set_error_hook(old_hook);
  MESSAGE("F4: " << calls << " driver calls, " << sim::injected_faults() - injected_before << " faults injected, "
                 << failed_edits << " edits rolled back, " << commit_failures << " failures at commit reported");
  CHECK(sim::injected_faults() - injected_before == calls);
  CHECK(failed_edits > 0);
  CHECK(outside_reclaimer == 0);
}
