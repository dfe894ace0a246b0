// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// J1, the failure sweep. Every mutating scenario runs once to count its driver calls per entry
// point; then it runs again once per call, with exactly that call failed
// (`tether::sim::fail_call(entry, n)`: the n-th call of `entry`, so the expected entry point is
// known). After each run:
// - a failure that was thrown is a DriverError naming the failed entry point, and the graphs
//   (node counts, edges, metadata), the executables (per-node versions, what they run) and the
//   owners are as before the operation; the owners the operation made are released;
// - a failure that could not be thrown (a release or removal at commit, a destructor, a marker
//   behind a launch) is reported once through the error hook, and the state is consistent;
// - after teardown every owner was destroyed exactly once, on the reclaimer; attachments, graphs,
//   executables, user objects and allocations are back to their count before the scenario;
// - the simulator's violation log is empty.
// Sizes shrink under ThreadSanitizer (TETHER_SWEEP_UNITS overrides the number of units).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/report_log.hpp"

#if defined(__SANITIZE_THREAD__)
#define TETHER_SWEEP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TETHER_SWEEP_TSAN 1
#endif
#endif
#ifndef TETHER_SWEEP_TSAN
#define TETHER_SWEEP_TSAN 0
#endif

using namespace tether;
using namespace tether_test;

namespace {

using ScaleNode = Node<KernelNode<float*, float, int>>;
using AxpyNode = Node<KernelNode<float*, const float*, float, int>>;

// Units of work per scenario (each unit adds or changes one node of every kind).
int units() {
  if (const char* s = std::getenv("TETHER_SWEEP_UNITS")) {
    int n = std::atoi(s);
    if (n > 0) return n;
  }
  return TETHER_SWEEP_TSAN ? 3 : 16;
}
constexpr int required_failures = TETHER_SWEEP_TSAN ? 400 : 2000;

// ----------------------------------------------------------------------------- error reports

// What the error hook reported since the last call (tests/support/report_log.hpp).
std::vector<std::string> take_reports() { return tether_test::ReportLog::take(); }

// ----------------------------------------------------------------------------- the world

// What the plain nodes compute: x = 2, y = 2 (memset, scale, copy), z = 6 (embedded: memset,
// scale), w = 5 (nested embedded: fill), and one hit of the host node.
struct Expect {
  float x = 2, y = 2, z = 6, w = 5;
  int hits = 1;
};

struct GraphPrint {
  std::size_t nodes = 0;
  std::string metadata;
  std::vector<std::pair<CUgraphNode, CUgraphNode>> edges;  // of every live graph of the hierarchy
  bool operator==(const GraphPrint&) const = default;
};

struct World {
  std::shared_ptr<WitnessLog> old_log = std::make_shared<WitnessLog>();  // made by setup
  std::shared_ptr<WitnessLog> new_log = std::make_shared<WitnessLog>();  // made by the operation
  int old_made = 0;
  int new_made = 0;
  Witness old_w() {
    ++old_made;
    return Witness(old_log);
  }
  Witness new_w() {
    ++new_made;
    return Witness(new_log);
  }

  std::optional<Graph> inner, other, g;
  std::optional<Graph> alt;         // a graph of the operation (whole/child update source)
  std::optional<Graph> made_graph;  // what the operation makes
  std::optional<GraphExec> exec;
  std::optional<GraphExec> made_exec;

  // The plain nodes of g.
  Node<MemsetNode> set;
  ScaleNode kn;
  Node<MemcpyNode> copy;
  Node<HostNode> host;
  Node<EventRecordNode> rec;
  Node<EventWaitNode> wait;
  Node<EmptyNode> empty;
  EmbedResult child;

  // The extra nodes of a rich g (on scratch buffers, so that the plain outputs stay).
  std::vector<ScaleNode> scales;
  std::vector<AxpyNode> axpys;
  std::vector<Node<MemsetNode>> memsets;
  std::vector<Node<MemcpyNode>> memcpys;
  std::vector<Node<HostNode>> hosts;
  std::vector<Node<EventRecordNode>> records;
  std::vector<Node<EventWaitNode>> waits;
  std::vector<Node<EmptyNode>> empties;
  std::vector<EmbedResult> children;
  std::vector<Node<HostNode>> in_children;  // one per child view
  IfElseResult branches;
  WhileResult loop;
  SwitchResult cases;
  std::vector<ScaleNode>
      in_bodies;  // kernels: bodies take kernel, memset, memcpy, empty, child and conditional nodes

  // Buffers the operation moves into nodes (allocated by setup, so not counted).
  std::vector<DeviceBuffer<float>> fresh;
  int fresh_moved = 0;
  DeviceBuffer<float> take_fresh() {
    ++fresh_moved;
    DeviceBuffer<float> b = std::move(fresh.back());
    fresh.pop_back();
    return b;
  }

  // Dynamic parameters bound by nodes of g (the parameter scenarios).
  std::optional<Param<float>> step;
  std::optional<Param<SharedBuffer<float>>> weights;
  std::optional<Param<Launch>> shape;  // the launch configuration of two of them

  int done = 0;                      // steps of a multi-step operation that succeeded
  std::vector<std::string> reports;  // what the operation reported through the error hook
  std::vector<GraphPrint> before;    // the graphs before the operation
  CUgraphExec leaked_exec = nullptr;
  CUgraph leaked_graph = nullptr;
  int leaked_accumulators = 0;
  int leaked_events = 0;  // fork/join events of a capture whose destroy was refused (reported)
};

// ----------------------------------------------------------------------------- fingerprints

struct Snapshot {
  std::vector<GraphPrint> graphs;
  std::size_t exec_versions = 0;
};

struct Counts {
  std::uint64_t attachments = 0;
  std::uint64_t accumulators = 0;
  sim::Stats stats;
};

Counts counts() {
  return {detail::NodeAttachment::live(), detail::ExecAccumulator::live(), sim::stats()};
}

std::string differences(const Counts& a, const Counts& b) {
  std::string s;
  auto diff = [&](const char* what, std::uint64_t x, std::uint64_t y) {
    if (x != y) s += fmt::format(" {} {} -> {}", what, x, y);
  };
  diff("attachments", a.attachments, b.attachments);
  diff("accumulators", a.accumulators, b.accumulators);
  diff("device_allocations", a.stats.device_allocations, b.stats.device_allocations);
  diff("user_objects", a.stats.user_objects, b.stats.user_objects);
  diff("graphs", a.stats.graphs, b.stats.graphs);
  diff("execs", a.stats.execs, b.stats.execs);
  diff("events", a.stats.events, b.stats.events);
  return s;
}

// ----------------------------------------------------------------------------- scenarios

struct Scenario {
  std::string name;
  std::function<void(World&)> setup;
  std::function<void(World&)> op;
  // Checks after the operation completed (the dry run, and runs whose failure was reported).
  std::function<void(World&)> completed;
  // Extra checks after a thrown failure (the common ones are made by the harness).
  std::function<void(World&)> thrown;
};

struct Totals {
  std::uint64_t injected = 0;
  std::uint64_t thrown = 0;
  std::uint64_t reported = 0;
  std::vector<std::string> lines;
};

class SweepFixture : public DslFixture {
 public:
  SweepFixture() {
    for (int i = 0; i < 8; ++i) scratch.push_back(buffer(4, 1.0f));
    x = buffer(8, 0.0f);
    y = buffer(8, 0.0f);
    z = buffer(8, 0.0f);
    w = buffer(8, 0.0f);
    old_hook = set_error_hook(&tether_test::ReportLog::collect);
  }
  ~SweepFixture() { set_error_hook(old_hook); }

  SharedBuffer<float> x, y, z, w;
  std::vector<SharedBuffer<float>> scratch;
  Event e1 = ctx.make_event(), e2 = ctx.make_event();
  Stream s2 = ctx.make_stream();  // a second stream for captures that fork
  std::shared_ptr<std::atomic<int>> hits = std::make_shared<std::atomic<int>>(0);
  ErrorHook old_hook = nullptr;

  // --------------------------------------------------------------------------- setups

  // inner: fill(w, 5); other: memset(z, 3) -> scale(z, 2), embed(inner); g: the plain chain and
  // embed(other); an executable of g, launched once.
  void plain(World& wd) {
    wd.inner.emplace(ctx);
    wd.inner->edit([&](Edit& e) {
      e.after().keeping(Owners{wd.old_w()}).launch(k.fill, Grid{1}, Block{8}, w, 5.0f, 8);
    });
    wd.other.emplace(ctx);
    wd.other->edit([&](Edit& e) {
      auto s = e.after().keeping(Owners{wd.old_w()}).memset(z, 3.0f);
      e.after(s).keeping(Owners{wd.old_w()}).launch(k.scale, Grid{1}, Block{8}, z, 2.0f, 8);
      e.after().keeping(Owners{wd.old_w()}).embed(*wd.inner);
    });
    wd.g.emplace(ctx);
    wd.g->edit([&](Edit& e) {
      wd.set = e.after().keeping(Owners{wd.old_w()}).memset(x, 1.0f);
      wd.kn = e.after(wd.set).keeping(Owners{wd.old_w()}).launch(k.scale, Grid{1}, Block{8}, x, 2.0f, 8);
      wd.copy = e.after(wd.kn).keeping(Owners{wd.old_w()}).memcpy(y, x);
      wd.host = e.after(wd.copy).host([o = wd.old_w(), h = hits] { h->fetch_add(1); });
      wd.rec = e.after(wd.host).keeping(Owners{wd.old_w()}).record(e1);
      wd.wait = e.after(wd.rec).keeping(Owners{wd.old_w()}).wait(e1);
      wd.empty = e.after(wd.wait).keeping(Owners{wd.old_w()}).empty();
      wd.child = e.after().keeping(Owners{wd.old_w()}).embed(*wd.other);
    });
    wd.exec.emplace(wd.g->instantiate());
    wd.exec->launch(stream);
    stream.synchronize();
  }

  // plain, plus n nodes of every kind on scratch buffers, child graphs with nodes of their own,
  // and if/else, while and switch nodes with bodies.
  void rich(World& wd, int n) {
    plain(wd);
    auto sc = [&](int i) { return scratch[static_cast<std::size_t>(i) % scratch.size()]; };
    wd.g->edit([&](Edit& e) {
      for (int i = 0; i < n; ++i) {
        wd.scales.push_back(
            e.after().keeping(Owners{wd.old_w()}).launch(k.scale, Grid{1}, Block{4}, sc(i), 1.0f, 4));
        wd.axpys.push_back(e.after(wd.scales.back())
                               .keeping(Owners{wd.old_w()})
                               .launch(k.axpy, Grid{1}, Block{4}, sc(i + 1), sc(i + 2), 0.0f, 4));
        wd.memsets.push_back(e.after().keeping(Owners{wd.old_w()}).memset(sc(i + 3), 1.0f));
        wd.memcpys.push_back(
            e.after(wd.memsets.back()).keeping(Owners{wd.old_w()}).memcpy(sc(i + 4), sc(i + 5)));
        wd.hosts.push_back(e.after().host([o = wd.old_w()] {}));
        wd.records.push_back(e.after().keeping(Owners{wd.old_w()}).record(e1));
        wd.waits.push_back(e.after(wd.records.back()).keeping(Owners{wd.old_w()}).wait(e1));
        wd.empties.push_back(e.after().keeping(Owners{wd.old_w()}).empty());
      }
      for (int i = 0; i < 2; ++i) {
        wd.children.push_back(e.after().keeping(Owners{wd.old_w()}).embed(*wd.other));
        wd.in_children.push_back(e.in(wd.children.back().graph).host([o = wd.old_w()] {}));
      }
      Condition c1 = e.condition(1);
      wd.branches = e.after().keeping(Owners{wd.old_w()}).if_else(c1);
      wd.in_bodies.push_back(e.in(wd.branches.then_)
                                 .keeping(Owners{wd.old_w()})
                                 .launch(k.scale, Grid{1}, Block{4}, sc(7), 1.0f, 4));
      e.in(wd.branches.then_).keeping(Owners{wd.old_w()}).launch(k.scale, Grid{1}, Block{4}, sc(6), 1.0f, 4);
      e.in(wd.branches.else_).keeping(Owners{wd.old_w()}).empty();
      Condition c2 = e.condition(0);
      wd.loop = e.after().while_(c2);
      wd.in_bodies.push_back(
          e.in(wd.loop.body).keeping(Owners{wd.old_w()}).launch(k.scale, Grid{1}, Block{4}, sc(7), 1.0f, 4));
      Condition c3 = e.condition(2);
      wd.cases = e.after().switch_(c3, 3);
      for (BodyRef& b : wd.cases.cases)
        wd.in_bodies.push_back(
            e.in(b).keeping(Owners{wd.old_w()}).launch(k.scale, Grid{1}, Block{4}, sc(7), 1.0f, 4));
    });
    wd.exec.emplace(wd.g->instantiate());  // replaces the plain one
    wd.exec->launch(stream);
    stream.synchronize();
  }

  void with_fresh(World& wd, int n) {
    for (int i = 0; i < n; ++i) wd.fresh.push_back(ctx.alloc<float>(8));
  }

  // --------------------------------------------------------------------------- checks

  GraphPrint print(const Graph& g) {
    GraphPrint p;
    p.nodes = g.node_count();
    const detail::Hierarchy& h = *detail::GraphAccess::hierarchy(g);
    p.metadata = detail::describe(h);
    for (const detail::Box& b : h.boxes) {
      if (b.retired.load()) continue;
      std::size_t n = 0;
      detail::call<detail::Entry::cuGraphGetEdges>(
          table(), "counting edges", b.graph, static_cast<CUgraphNode*>(nullptr),
          static_cast<CUgraphNode*>(nullptr), static_cast<CUgraphEdgeData*>(nullptr), &n);
      std::vector<CUgraphNode> from(n), to(n);
      if (n)
        detail::call<detail::Entry::cuGraphGetEdges>(table(), "reading edges", b.graph, from.data(),
                                                     to.data(), static_cast<CUgraphEdgeData*>(nullptr), &n);
      for (std::size_t i = 0; i < n; ++i) p.edges.emplace_back(from[i], to[i]);
    }
    std::sort(p.edges.begin(), p.edges.end());
    return p;
  }

  Snapshot snapshot(World& wd) {
    Snapshot s;
    for (auto* g : {&wd.g, &wd.other, &wd.inner, &wd.alt})
      if (*g) s.graphs.push_back(print(**g));
    if (wd.exec) s.exec_versions = wd.exec->live_node_versions();
    return s;
  }

  // Lets earlier releases finish, so that the next operation's calls are its own.
  void settle() {
    stream.synchronize();
    // A release on the reclaimer (an executable's destroy) can make the driver queue more (its
    // accumulator): until both are idle together.
    for (int i = 0; i < 3; ++i) {
      sim::quiesce();
      REQUIRE(wait_reclaimed(5s));
    }
    sim::quiesce();
  }

  // Launches `exec` on zeroed outputs and checks what ran.
  void expect_run(GraphExec& exec, const Expect& ex) {
    for (auto* b : {&x, &y, &z, &w}) b->fill_bytes(0);
    int before = hits->load();
    exec.launch(stream);
    stream.synchronize();
    CHECK(read(x) == std::vector<float>(8, ex.x));
    CHECK(read(y) == std::vector<float>(8, ex.y));
    CHECK(read(z) == std::vector<float>(8, ex.z));
    CHECK(read(w) == std::vector<float>(8, ex.w));
    CHECK(hits->load() - before == ex.hits);
  }
  // A fresh instantiation of g runs what g says.
  void expect_graph_runs(World& wd, const Expect& ex = {}) {
    // CUDA instantiates a graph with conditional nodes once at a time: its executable makes way.
    if (wd.exec && detail::GraphAccess::hierarchy(*wd.g)->root_conditionals.load() > 0 &&
        detail::GraphAccess::hierarchy(*wd.g)->live_execs.load() > 0) {
      wd.exec.reset();
      wd.exec.emplace(wd.g->instantiate());
      expect_run(*wd.exec, ex);
      return;
    }
    GraphExec fresh = wd.g->instantiate();
    expect_run(fresh, ex);
  }

  // --------------------------------------------------------------------------- the harness

  void run(const Scenario& sc, Totals& totals) {
    INFO("scenario: " << sc.name);
    settle();
    const Counts base = counts();
    int leaked_accumulators = 0;
    int leaked_events = 0;

    auto teardown = [&](std::optional<World>& holder) {
      World& wd = *holder;
      std::shared_ptr<WitnessLog> old_log = wd.old_log, new_log = wd.new_log;
      const int old_made = wd.old_made, new_made = wd.new_made;
      CUgraphExec leaked_exec = wd.leaked_exec;
      CUgraph leaked_graph = wd.leaked_graph;
      leaked_accumulators += wd.leaked_accumulators;
      leaked_events += wd.leaked_events;
      holder.reset();
      // What a refused destroy leaked is the caller's to destroy (as the process would at exit).
      if (leaked_exec)
        detail::call<detail::Entry::cuGraphExecDestroy>(table(), "destroying a leaked exec", leaked_exec);
      if (leaked_graph)
        detail::call<detail::Entry::cuGraphDestroy>(table(), "destroying a leaked graph", leaked_graph);
      stream.synchronize();
      CHECK(eventually([&] { return old_log->destroyed.load() == old_made; }));
      CHECK(eventually([&] { return new_log->destroyed.load() == new_made; }));
      CHECK(old_log->outside_reclaimer.load() == 0);
      CHECK(new_log->outside_reclaimer.load() == 0);
      Counts expected = base;
      expected.accumulators += static_cast<std::uint64_t>(leaked_accumulators);
      expected.stats.user_objects += static_cast<std::size_t>(leaked_accumulators);
      expected.stats.events += static_cast<std::size_t>(leaked_events);
      bool back = eventually([&] { return differences(expected, counts()).empty(); });
      CHECK_MESSAGE(back, "not back to the counts before the scenario:" << differences(expected, counts()));
      auto v = sim::violations();
      CHECK_MESSAGE(v.empty(), "simulator violation: " << (v.empty() ? "" : v.front().detail));
      sim::clear_violations();
    };

    // The dry run: the calls of the operation, per entry point.
    std::vector<std::pair<std::string_view, std::uint64_t>> calls;
    std::uint64_t total_calls = 0;
    {
      std::optional<World> holder(std::in_place);
      sc.setup(*holder);
      settle();
      take_reports();
      holder->before = snapshot(*holder).graphs;
      sim::reset_call_counts();
      sc.op(*holder);
      for (std::string_view name : detail::entry_names) {
        std::uint64_t n = sim::call_count(name);
        if (n) calls.emplace_back(name, n), total_calls += n;
      }
      sim::quiesce();  // (no driver calls of its own)
      REQUIRE(wait_reclaimed(5s));
      sim::quiesce();
      // Nothing but the operation may call the driver (a release on the reclaimer would shift the count).
      std::uint64_t after = sim::call_count("*");
      REQUIRE_MESSAGE(after == total_calls, "calls made outside the operation: " << after - total_calls);
      holder->reports = take_reports();
      CHECK(holder->reports.empty());
      if (sc.completed) sc.completed(*holder);
      teardown(holder);
    }
    REQUIRE(total_calls > 0);

    std::uint64_t thrown = 0, reported = 0;
    const std::uint64_t injected_before = sim::injected_faults();
    for (auto [entry, count] : calls) {
      for (std::uint64_t nth = 1; nth <= count; ++nth) {
        CAPTURE(entry);
        CAPTURE(nth);
        std::optional<World> holder(std::in_place);
        World& wd = *holder;
        sc.setup(wd);
        settle();
        take_reports();
        const Snapshot before = snapshot(wd);
        wd.before = before.graphs;
        const Counts counts_before = counts();
        const int old_destroyed = wd.old_log->destroyed.load();
        sim::fail_call(entry, nth, Errc::unknown);
        std::optional<DriverError> error;
        try {
          sc.op(wd);
        } catch (const DriverError& e) {
          error = e;
        } catch (const std::exception& e) {
          FAIL_CHECK("unexpected exception: " << e.what());
        }
        sim::clear_faults();
        std::vector<std::string> reps = take_reports();
        if (error) {
          ++thrown;
          CHECK(error->entry_point() == entry);
          CHECK(error->code() == Errc::unknown);
          CHECK_MESSAGE(reps.empty(), "also reported: " << reps.front());
          Snapshot after = snapshot(wd);
          REQUIRE(after.graphs.size() == before.graphs.size());
          for (std::size_t i = 0; i < after.graphs.size(); ++i) {
            CHECK(after.graphs[i].nodes == before.graphs[i].nodes);
            CHECK(after.graphs[i].edges == before.graphs[i].edges);
            CHECK_MESSAGE(after.graphs[i].metadata == before.graphs[i].metadata,
                          "before:\n"
                              << before.graphs[i].metadata << "after:\n"
                              << after.graphs[i].metadata);
          }
          CHECK(after.exec_versions == before.exec_versions);
          // The owners of the operation are released; the earlier ones are all there.
          CHECK(eventually([&] { return wd.new_log->destroyed.load() == wd.new_made; }));
          CHECK(wd.old_log->destroyed.load() == old_destroyed);
          Counts expected = counts_before;
          expected.stats.device_allocations -= static_cast<std::size_t>(wd.fresh_moved);
          bool back = eventually([&] { return differences(expected, counts()).empty(); });
          CHECK_MESSAGE(back,
                        "not back to the counts before the operation:" << differences(expected, counts()));
          if (sc.thrown) sc.thrown(wd);
        } else {
          ++reported;
          CHECK_MESSAGE(reps.size() == 1, "a failure of " << entry << " #" << nth
                                                          << " was neither thrown nor reported once ("
                                                          << reps.size() << " reports)");
          wd.reports = reps;
          if (sc.completed) sc.completed(wd);
        }
        teardown(holder);
      }
    }
    std::uint64_t injected = sim::injected_faults() - injected_before;
    CHECK(injected == total_calls);
    totals.injected += injected;
    totals.thrown += thrown;
    totals.reported += reported;
    totals.lines.push_back(
        fmt::format("  {}: {} calls, {} thrown, {} reported", sc.name, total_calls, thrown, reported));
  }
};

// ----------------------------------------------------------------------------- the scenario table

void still_runs_plain(SweepFixture& f, World& wd) {
  f.expect_graph_runs(wd);
  if (wd.exec) f.expect_run(*wd.exec, {});
}

std::vector<Scenario> scenarios(SweepFixture& f) {
  const int n = units();
  std::vector<Scenario> list;
  auto sc = [&f](int i) { return f.scratch[static_cast<std::size_t>(i) % f.scratch.size()]; };
  auto plain = [&f](World& wd) { f.plain(wd); };
  auto rich = [&f, n](World& wd) { f.rich(wd, n); };
  // After an edit that completed (possibly with one failure at commit, reported): g still runs
  // what its plain nodes compute, and so does the executable made before the edit.
  auto still_runs = [&f](World& wd) {
    f.expect_graph_runs(wd);
    if (wd.exec) f.expect_run(*wd.exec, {});
  };
  auto exec_unchanged = [&f](World& wd) { f.expect_run(*wd.exec, {}); };

  list.push_back({"an edit adding nodes of every kind with their owners",
                  [&f, n](World& wd) {
                    f.plain(wd);
                    f.with_fresh(wd, 2 * n);
                  },
                  [&f, n, sc](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      for (int i = 0; i < n; ++i) {
                        auto a = e.after(wd.set)
                                     .keeping(Owners{wd.new_w()})
                                     .launch(f.k.fill, Grid{1}, Block{4}, sc(i), 1.0f, 4);
                        auto b =
                            e.after(a).launch(f.k.axpy, Grid{1}, Block{4}, sc(i + 1), sc(i + 2), 0.5f, 4);
                        auto c = e.after().keeping(Owners{wd.new_w()}).memset(wd.take_fresh(), 2.0f);
                        auto d = e.after(c).keeping(Owners{wd.new_w()}).memcpy(wd.take_fresh(), sc(i + 3));
                        auto h = e.after(b, wd.kn).host([o = wd.new_w()] {});
                        auto r = e.after(h).keeping(Owners{wd.new_w()}).record(f.e2);
                        auto t = e.after(r).keeping(Owners{wd.new_w()}).wait(f.e2);
                        auto m = e.after(t, d).keeping(Owners{wd.new_w()}).empty();
                        e.connect(m, wd.empty);
                        auto ch = e.after(m).keeping(Owners{wd.new_w()}).embed(*wd.inner);
                        e.in(ch.graph).keeping(Owners{wd.new_w()}).empty();
                        auto al = e.after().alloc<float>(8);
                        e.after(al.node).keeping(Owners{wd.new_w()}).free(al.memory);
                      }
                    });
                  },
                  still_runs,
                  {}});

  list.push_back(
      {"an edit adding if, if/else, while and switch nodes with bodies",
       plain,
       [&f, n, sc](World& wd) {
         wd.g->edit([&](Edit& e) {
           for (int i = 0; i < std::max(1, n / 2); ++i) {
             Condition c = e.condition(1);
             auto ie = e.after(wd.kn).keeping(Owners{wd.new_w()}).if_else(c);
             e.in(ie.then_).keeping(Owners{wd.new_w()}).launch(f.k.scale, Grid{1}, Block{4}, sc(i), 1.0f, 4);
             auto hb = e.in(ie.then_).keeping(Owners{wd.new_w()}).empty();
             e.after(hb).keeping(Owners{wd.new_w()}).memset(sc(i + 1), 1.0f);
             e.in(ie.else_).keeping(Owners{wd.new_w()}).empty();
             Condition c2 = e.condition(0);
             auto wl = e.after().while_(c2);
             e.in(wl.body).keeping(Owners{wd.new_w()}).memcpy(sc(i + 2), sc(i + 3));
             Condition c3 = e.condition(1);
             auto sw = e.after().keeping(Owners{wd.new_w()}).switch_(c3, 3);
             for (BodyRef& b : sw.cases) e.in(b).keeping(Owners{wd.new_w()}).empty();
             // A conditional inside a body, with its own condition.
             auto ib = e.in(sw.cases[1]);
             Condition c4 = ib.condition(1);
             auto nested = e.in(sw.cases[1]).if_(c4);
             e.in(nested.then_).keeping(Owners{wd.new_w()}).empty();
           }
         });
       },
       still_runs,
       {}});

  list.push_back({"an edit updating nodes of every kind, also in child graphs and bodies",
                  [&f, n](World& wd) {
                    f.rich(wd, n);
                    f.with_fresh(wd, 3 * n + 5);
                  },
                  [&f, n, sc](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      for (int i = 0; i < n; ++i) {
                        auto ui = static_cast<std::size_t>(i);
                        e.update(wd.scales[ui], Grid{1}, Block{4}, wd.take_fresh(), 3.0f, 4);
                        e.update(wd.axpys[ui], Grid{1}, Block{4}, sc(i + 2), sc(i + 1), 1.0f, 4);
                        e.update(wd.memsets[ui], wd.take_fresh(), 4.0f);
                        e.update(wd.memcpys[ui], wd.take_fresh(), sc(i + 6));
                        e.update(wd.hosts[ui], [o = wd.new_w()] {});
                        e.update(wd.records[ui], f.e2);
                        e.update(wd.waits[ui], f.e2);
                      }
                      for (auto& h : wd.in_children) e.update(h, [o = wd.new_w()] {});
                      for (auto& b : wd.in_bodies) e.update(b, Grid{1}, Block{4}, wd.take_fresh(), 2.0f, 4);
                    });
                  },
                  still_runs,
                  {}});

  list.push_back({"an edit removing nodes of every kind, child graphs and conditional nodes",
                  rich,
                  [](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      for (std::size_t i = 0; i < wd.scales.size(); ++i) {
                        e.remove(wd.axpys[i]);
                        e.remove(wd.scales[i]);
                        e.remove(wd.memcpys[i]);
                        e.remove(wd.memsets[i]);
                        e.remove(wd.hosts[i]);
                        e.remove(wd.waits[i]);
                        e.remove(wd.records[i]);
                        e.remove(wd.empties[i]);
                      }
                      for (auto& c : wd.children) e.remove(c.node);
                      e.remove(wd.in_bodies.front());  // a node inside a body
                      e.remove(wd.branches.node);
                      e.remove(wd.loop.node);
                      e.remove(wd.cases.node);
                    });
                  },
                  still_runs,
                  {}});

  list.push_back({"an edit connecting and disconnecting nodes",
                  rich,
                  [](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      for (std::size_t i = 0; i < wd.scales.size(); ++i) {
                        e.connect(wd.scales[i], wd.memsets[i]);
                        e.connect(wd.memcpys[i], wd.hosts[i]);
                        e.disconnect(wd.scales[i], wd.axpys[i]);
                        e.disconnect(wd.records[i], wd.waits[i]);
                        e.connect(wd.hosts[i], wd.empties[i]);
                      }
                      e.disconnect(wd.set, wd.kn);
                      e.connect(wd.set, wd.kn);
                    });
                  },
                  still_runs,
                  {}});

  list.push_back({"an edit embedding graphs at the top, into child graphs and into bodies",
                  rich,
                  [n](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      for (int i = 0; i < std::max(1, n / 2); ++i) {
                        auto top = e.after(wd.kn).keeping(Owners{wd.new_w()}).embed(*wd.other);
                        e.in(top.graph).keeping(Owners{wd.new_w()}).empty();
                        e.in(wd.children.front().graph).keeping(Owners{wd.new_w()}).embed(*wd.inner);
                        e.in(wd.branches.then_).embed(*wd.inner);
                        e.after(wd.in_bodies.back()).keeping(Owners{wd.new_w()}).embed(*wd.other);
                      }
                    });
                  },
                  still_runs,
                  {}});

  list.push_back({"an edit replacing child graph nodes by new embeddings",
                  rich,
                  [](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      for (auto& c : wd.children) {
                        EmbedResult r = e.replace(c.node, *wd.inner);
                        e.in(r.graph).keeping(Owners{wd.new_w()}).empty();
                      }
                      e.replace(wd.child.node, *wd.other);
                    });
                  },
                  still_runs,
                  {}});

  list.push_back({"an edit dropped without commit, with every kind of operation to undo",
                  // (Buffers of the pool only: a buffer freed by the rollback would be freed on the
                  // reclaimer while the rollback still calls the driver.)
                  rich,
                  [&f, sc](World& wd) {
                    Edit e = wd.g->edit();
                    for (std::size_t i = 0; i < wd.scales.size(); ++i) {
                      e.update(wd.scales[i], Grid{1}, Block{4}, sc(static_cast<int>(i) + 3), 2.0f, 4);
                      e.update(wd.hosts[i], [o = wd.new_w()] {});
                      auto h = e.after(wd.hosts[i]).host([o = wd.new_w()] {});
                      e.connect(h, wd.empties[i]);
                      e.disconnect(wd.records[i], wd.waits[i]);
                      e.remove(wd.memsets[i]);
                    }
                    e.in(wd.children.front().graph).keeping(Owners{wd.new_w()}).embed(*wd.inner);
                    e.in(wd.branches.then_)
                        .keeping(Owners{wd.new_w()})
                        .launch(f.k.fill, Grid{1}, Block{4}, sc(0), 1.0f, 4);
                    // Dropped: every driver change is undone in reverse order.
                  },
                  [&f](World& wd) {
                    // An undo the driver refused leaves the graph unusable (reported, nothing
                    // released that the graph may still use); otherwise it is as before.
                    bool undo_failed = false;
                    for (const std::string& r : wd.reports)
                      if (r.find("undoing an added node") != std::string::npos ||
                          r.find("previous parameters") != std::string::npos ||
                          r.find("restoring an edge") != std::string::npos)
                        undo_failed = true;
                    if (undo_failed) {
                      CHECK_THROWS_AS(wd.g->edit(), UsageError);
                    } else {
                      GraphPrint now = f.print(*wd.g);
                      CHECK(now == wd.before.front());
                    }
                    f.expect_run(*wd.exec, {});
                  },
                  {}});

  list.push_back({"an edit of a child graph through its view",
                  rich,
                  [](World& wd) {
                    wd.children.front().graph.edit([&](Edit& e) {
                      auto a = e.after(wd.in_children.front()).keeping(Owners{wd.new_w()}).empty();
                      e.after(a).host([o = wd.new_w()] {});
                      e.update(wd.in_children.front(), [o = wd.new_w()] {});
                      e.remove(wd.in_children.front());
                    });
                  },
                  still_runs,
                  {}});

  list.push_back({"an edit of a conditional body through its view",
                  rich,
                  [&f, sc](World& wd) {
                    wd.branches.then_.edit([&](BodyEdit& e) {
                      auto a = e.after(wd.in_bodies.front())
                                   .keeping(Owners{wd.new_w()})
                                   .launch(f.k.fill, Grid{1}, Block{4}, sc(1), 1.0f, 4);
                      e.after(a).keeping(Owners{wd.new_w()}).memset(sc(2), 0.0f);
                      e.update(wd.in_bodies.front(), Grid{1}, Block{4}, sc(3), 2.0f, 4);
                      e.remove(wd.in_bodies.front());
                    });
                  },
                  still_runs,
                  {}});

  list.push_back({"an edit reaching into child graphs and bodies from the top",
                  rich,
                  [sc](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      e.update(wd.in_children.front(), [o = wd.new_w()] {});
                      e.remove(wd.in_children.back());
                      e.in(wd.cases.cases[2]).keeping(Owners{wd.new_w()}).empty();
                      e.update(wd.in_bodies.back(), Grid{1}, Block{4}, sc(4), 2.0f, 4);
                      e.in(wd.loop.body).keeping(Owners{wd.new_w()}).memset(sc(5), 1.0f);
                    });
                  },
                  still_runs,
                  {}});

  list.push_back(
      {"cloning a graph with child graphs",
       [&f, n, sc](World& wd) {
         f.plain(wd);
         wd.g->edit([&](Edit& e) {
           for (int i = 0; i < n; ++i) {
             e.after().keeping(Owners{wd.old_w()}).launch(f.k.scale, Grid{1}, Block{4}, sc(i), 1.0f, 4);
             e.after().host([o = wd.old_w()] {});
             e.after().keeping(Owners{wd.old_w()}).embed(*wd.inner);
           }
         });
       },
       [](World& wd) { wd.made_graph.emplace(wd.g->clone()); },
       [&f](World& wd) {
         CHECK(wd.made_graph->node_count() == wd.g->node_count());
         wd.g.reset();  // the clone stands alone
         GraphExec e = wd.made_graph->instantiate();
         f.expect_run(e, {});
       },
       {}});

  list.push_back({"instantiating a graph with an upload", plain,
                  [&f](World& wd) {
                    InstantiateOptions o;
                    o.upload = &f.stream;
                    wd.made_exec.emplace(wd.g->instantiate(o));
                  },
                  [&f](World& wd) { f.expect_run(*wd.made_exec, {}); }, exec_unchanged});

  auto exec_update = [&](std::string what, std::function<void(World&)> op, Expect after_update) {
    list.push_back(
        {"a per-node executable update of " + what,
         [&f](World& wd) {
           f.plain(wd);
           f.with_fresh(wd, 2);
           wd.alt.emplace(f.ctx);  // a graph shaped like `other`, writing elsewhere
           auto inner2 = std::make_shared<Graph>(f.ctx);
           inner2->edit([&](Edit& e) {
             e.after().keeping(Owners{wd.old_w()}).launch(f.k.fill, Grid{1}, Block{4}, f.scratch[0], 5.0f, 4);
           });
           wd.alt->edit([&](Edit& e) {
             auto s = e.after().keeping(Owners{wd.old_w()}).memset(f.scratch[1], 3.0f);
             e.after(s).launch(f.k.scale, Grid{1}, Block{4}, f.scratch[1], 2.0f, 4);
             e.after().embed(*inner2);
           });
         },
         std::move(op),
         [&f, after_update](World& wd) {
           f.expect_run(*wd.exec, after_update);
           f.expect_graph_runs(wd);  // the definition is unchanged
         },
         exec_unchanged});
  };
  exec_update("a kernel node",
              [](World& wd) { wd.exec->update(wd.kn, Grid{1}, Block{8}, wd.take_fresh(), 4.0f, 8); },
              {1, 1, 6, 5, 1});
  exec_update("a memset node", [](World& wd) { wd.exec->update(wd.set, wd.take_fresh(), 7.0f); },
              {0, 0, 6, 5, 1});
  exec_update("a memcpy node", [&f](World& wd) { wd.exec->update(wd.copy, wd.take_fresh(), f.x); },
              {2, 0, 6, 5, 1});
  exec_update(
      "a host node",
      [&f](World& wd) { wd.exec->update(wd.host, [o = wd.new_w(), h = f.hits] { h->fetch_add(100); }); },
      {2, 2, 6, 5, 100});
  exec_update("an event record node", [&f](World& wd) { wd.exec->update(wd.rec, f.e2); }, {});
  exec_update("an event wait node", [&f](World& wd) { wd.exec->update(wd.wait, f.e2); }, {});
  exec_update("a child graph node", [](World& wd) { wd.exec->update(wd.child.node, *wd.alt); },
              {2, 2, 0, 0, 1});

  // Parameter sets: g gains three fills bound to `step` (two of them also to `weights`, the
  // first and the last to `shape`, their launch configuration) on scratch buffers, and the
  // executable is made again from it.
  auto with_params = [&f](World& wd) {
    f.plain(wd);
    wd.step.emplace(1.0f, "step");
    wd.weights.emplace(f.scratch[0], "weights");
    wd.shape.emplace(Launch{Grid{1}, Block{4}}, "shape");
    wd.g->edit([&](Edit& e) {
      e.after().keeping(Owners{wd.old_w()}).launch(f.k.fill, *wd.shape, *wd.weights, *wd.step, 4);
      e.after().launch(f.k.fill, Grid{1}, Block{4}, *wd.weights, *wd.step, 4);
      e.after().launch(f.k.fill, *wd.shape, f.scratch[1], *wd.step, 4);
    });
    wd.exec.emplace(wd.g->instantiate());
  };
  // What the parameter nodes wrote in one launch of `exec`: (scratch 0, 1, 2).
  auto param_run = [&f](GraphExec& exec) {
    for (int i = 0; i < 3; ++i) f.scratch[static_cast<std::size_t>(i)].fill_bytes(0);
    exec.launch(f.stream);
    f.stream.synchronize();
    return std::array<float, 3>{f.read(f.scratch[0])[0], f.read(f.scratch[1])[0], f.read(f.scratch[2])[0]};
  };
  // The last elements the parameter nodes wrote in one launch (a fill writes one per thread):
  // what a launch parameter's set changes.
  auto param_last = [&f](GraphExec& exec) {
    for (int i = 0; i < 3; ++i) f.scratch[static_cast<std::size_t>(i)].fill_bytes(0);
    exec.launch(f.stream);
    f.stream.synchronize();
    return std::array<float, 3>{f.read(f.scratch[0])[3], f.read(f.scratch[1])[3], f.read(f.scratch[2])[3]};
  };
  for (bool buffer : {false, true})
    list.push_back({std::string("a parameter set in an executable (") + (buffer ? "a buffer" : "a value") + ")",
                    with_params,
                    [&f, buffer](World& wd) {
                      // Not inside CHECK: the harness must see the exception.
                      const std::size_t set = buffer ? wd.exec->set(*wd.weights, f.scratch[2]) : wd.exec->set(*wd.step, 3.0f);
                      CHECK(set == (buffer ? 2u : 3u));
                    },
                    [&f, buffer, param_run](World& wd) {
                      f.expect_run(*wd.exec, {});
                      CHECK(param_run(*wd.exec) == (buffer ? std::array<float, 3>{0, 1, 1} : std::array<float, 3>{3, 3, 0}));
                      f.expect_graph_runs(wd);  // the definition is unchanged
                    },
                    [param_run](World& wd) {
                      CHECK(param_run(*wd.exec) == std::array<float, 3>{1, 1, 0});
                    }});
  list.push_back({"a parameter set in an edit (a value and a buffer)", with_params,
                  [&f](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      const std::size_t steps = e.set(*wd.step, 3.0f);
                      const std::size_t weights = e.set(*wd.weights, f.scratch[2]);
                      CHECK(steps == 3);
                      CHECK(weights == 2);
                    });
                  },
                  [&f, param_run](World& wd) {
                    f.expect_run(*wd.exec, {});
                    CHECK(param_run(*wd.exec) == std::array<float, 3>{1, 1, 0});  // made before the edit
                    GraphExec fresh = wd.g->instantiate();
                    CHECK(param_run(fresh) == std::array<float, 3>{0, 3, 3});
                  },
                  [param_run](World& wd) {
                    GraphExec fresh = wd.g->instantiate();
                    CHECK(param_run(fresh) == std::array<float, 3>{1, 1, 0});
                  }});

  list.push_back({"a launch parameter set in an executable", with_params,
                  [](World& wd) {
                    const std::size_t set = wd.exec->set(*wd.shape, Launch{Grid{1}, Block{2}});
                    CHECK(set == 2);
                  },
                  [&f, param_last](World& wd) {
                    f.expect_run(*wd.exec, {});
                    CHECK(param_last(*wd.exec) == std::array<float, 3>{1, 0, 0});  // the second fill is unbound
                  },
                  [param_last](World& wd) { CHECK(param_last(*wd.exec) == std::array<float, 3>{1, 1, 0}); }});
  list.push_back({"a launch parameter set with an attribute in an edit", with_params,
                  [](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      const std::size_t set = e.set(*wd.shape, Launch{Grid{1}, Block{2}}.priority(-1));
                      CHECK(set == 2);
                    });
                  },
                  [&f, param_last](World& wd) {
                    f.expect_run(*wd.exec, {});
                    CHECK(param_last(*wd.exec) == std::array<float, 3>{1, 1, 0});  // made before the edit
                    GraphExec fresh = wd.g->instantiate();
                    CHECK(param_last(fresh) == std::array<float, 3>{1, 0, 0});
                  },
                  [param_last](World& wd) {
                    GraphExec fresh = wd.g->instantiate();
                    CHECK(param_last(fresh) == std::array<float, 3>{1, 1, 0});
                  }});

  list.push_back({"a whole executable update from an updated clone",
                  [&f](World& wd) {
                    f.plain(wd);
                    wd.alt.emplace(wd.g->clone());
                    ScaleNode k2 = wd.alt->find(wd.kn);
                    wd.alt->edit([&](Edit& e) { e.update(k2, Grid{1}, Block{8}, f.x, 3.0f, 8); });
                  },
                  [](World& wd) {
                    UpdateResult r = wd.exec->update(*wd.alt);
                    REQUIRE(static_cast<bool>(r));
                  },
                  [&f](World& wd) {
                    f.expect_run(*wd.exec, {3, 3, 6, 5, 1});
                  },
                  exec_unchanged});

  list.push_back({"disabling kernel, memcpy and memset nodes of an executable", plain,
                  [](World& wd) {
                    wd.exec->enable(wd.kn, false);
                    ++wd.done;
                    wd.exec->enable(wd.copy, false);
                    ++wd.done;
                    wd.exec->enable(wd.set, false);
                    ++wd.done;
                  },
                  [&f](World& wd) {
                    CHECK_FALSE(wd.exec->enabled(wd.kn));
                    CHECK_FALSE(wd.exec->enabled(wd.copy));
                    CHECK_FALSE(wd.exec->enabled(wd.set));
                    f.expect_run(*wd.exec, {0, 0, 6, 5, 1});
                  },
                  [&f](World& wd) {
                    CHECK(wd.exec->enabled(wd.kn) == (wd.done < 1));
                    CHECK(wd.exec->enabled(wd.copy) == (wd.done < 2));
                    CHECK(wd.exec->enabled(wd.set) == (wd.done < 3));
                    if (wd.done == 0) f.expect_run(*wd.exec, {});
                  }});

  list.push_back({"a launch that queues the release of superseded per-node versions",
                  [&f](World& wd) {
                    f.plain(wd);
                    wd.exec->update(wd.host, [o = wd.old_w(), h = f.hits] { h->fetch_add(1); });
                    wd.exec->launch(f.stream);
                    wd.exec->update(wd.host,
                                    [o = wd.old_w(), h = f.hits] { h->fetch_add(1); });  // retires the first
                    f.stream.synchronize();
                  },
                  [&f](World& wd) { wd.exec->launch(f.stream); },
                  [&f](World& wd) {
                    f.stream.synchronize();
                    // The superseded version goes once its last launch has ended (now, or after the next).
                    f.expect_run(*wd.exec, {});
                    CHECK(eventually([&] { return wd.old_log->destroyed.load() == 1; }));
                  },
                  exec_unchanged});

  list.push_back({"destroying an executable after a launch",
                  plain,
                  [](World& wd) {
                    wd.leaked_exec = wd.exec->get();
                    wd.exec.reset();
                    // The destroy runs on the reclaimer (cuGraphExecDestroy on an application thread
                    // would invalidate other threads' GLOBAL captures): part of the operation.
                    REQUIRE(wait_reclaimed(5s));
                  },
                  [](World& wd) {
                    // A refused destroy leaks the executable (reported; the teardown destroys it);
                    // a refused release of its accumulator leaks the accumulator (and nothing else).
                    bool exec_leaked = false;
                    for (const std::string& r : wd.reports) {
                      if (r.find("destroying an executable graph") != std::string::npos) exec_leaked = true;
                      if (r.find("accumulator") != std::string::npos) wd.leaked_accumulators = 1;
                    }
                    if (!exec_leaked) wd.leaked_exec = nullptr;
                  },
                  {}});

  list.push_back({"destroying a graph and every handle into it",
                  [&f](World& wd) {
                    f.plain(wd);
                    wd.exec.reset();  // an executable keeps its source graph
                  },
                  [](World& wd) {
                    wd.leaked_graph = wd.g->get();
                    wd.set = {};
                    wd.kn = {};
                    wd.copy = {};
                    wd.host = {};
                    wd.rec = {};
                    wd.wait = {};
                    wd.empty = {};
                    wd.child = {};
                    wd.g.reset();
                  },
                  [](World& wd) {
                    bool leaked = false;
                    for (const std::string& r : wd.reports)
                      if (r.find("destroying a graph") != std::string::npos) leaked = true;
                    if (!leaked) wd.leaked_graph = nullptr;
                  },
                  {}});
  // ------------------------------------------------------------------ stream work and capture

  // Stream work of every kind on scratch buffers; with `fork`, half of it on a forked stream.
  auto stream_work = [&f, n, sc](World& wd, Capture* c, bool allocs) {
    for (int i = 0; i < n; ++i) {
      const Stream& s = (c && i % 2) ? f.s2 : f.stream;
      if (c && i % 2) c->fork(f.s2);
      s.launch(f.k.scale, Grid{1}, Block{4}, sc(i), 1.0f, 4);
      s.memset(sc(i + 1), 1.0f);
      s.memcpy(sc(i + 2), sc(i + 3));
      s.host([o = wd.new_w()] {});
      s.record(f.e2);
      s.wait(f.e2);
      if (allocs) {
        AllocResult<float> m = s.alloc_async<float>(4);
        s.launch(f.k.fill, Grid{1}, Block{4}, m.memory, 1.0f, 4);
        s.free_async(m.memory);
      }
      if (c && i % 2) c->join(f.s2);
      if (c) c->keeping(Owners{wd.new_w()});
    }
  };
  // Events a capture could not destroy are leaked (reported), like a refused graph destroy.
  auto count_leaked_events = [](World& wd) {
    for (const std::string& r : wd.reports)
      if (r.find("fork/join event") != std::string::npos) ++wd.leaked_events;
  };

  list.push_back({"stream work of every kind outside capture, kept until the stream has passed it",
                  plain,
                  [&f, stream_work](World& wd) {
                    auto passed = [&f] {
                      f.stream.synchronize();
                      REQUIRE(wait_reclaimed(5s));
                    };
                    try {
                      stream_work(wd, nullptr, false);
                      passed();
                    } catch (...) {
                      passed();  // what the stream kept goes once it has passed it (the fault was spent)
                      throw;
                    }
                  },
                  still_runs,
                  {}});

  list.push_back({"a stream capture of work of every kind, with forks, joins and kept owners",
                  plain,
                  [&f, stream_work](World& wd) {
                    wd.made_graph.emplace(capture(f.stream, [&](Capture& c) { stream_work(wd, &c, true); }));
                  },
                  [&f, count_leaked_events](World& wd) {
                    count_leaked_events(wd);
                    GraphExec e = wd.made_graph->instantiate();
                    e.launch(f.stream);
                    f.stream.synchronize();
                    still_runs_plain(f, wd);
                  },
                  [count_leaked_events](World& wd) {
                    count_leaked_events(wd);
                    CHECK_FALSE(wd.made_graph.has_value());
                  }});

  list.push_back({"an edit capturing stream work into regions at the top, in a child graph and in a body",
                  rich,
                  [&f, stream_work, sc](World& wd) {
                    wd.g->edit([&](Edit& e) {
                      auto r = e.after(wd.kn).capture(f.stream, [&](Capture& c) { stream_work(wd, &c, false); });
                      e.after(r.node).keeping(Owners{wd.new_w()}).empty();
                      e.in(wd.children.front().graph).capture(f.stream, [&] {
                        f.stream.launch(f.k.scale, Grid{1}, Block{4}, sc(0), 1.0f, 4);
                        f.stream.host([o = wd.new_w()] {});
                      });
                      e.in(wd.loop.body).capture(f.stream, [&] {
                        f.stream.launch(f.k.scale, Grid{1}, Block{4}, sc(1), 1.0f, 4);
                      });
                    });
                  },
                  [still_runs, count_leaked_events](World& wd) {
                    count_leaked_events(wd);
                    still_runs(wd);
                  },
                  count_leaked_events});

  // The loop's step as one call (capture and launch are swept above): the captured source has
  // the executable's topology (a whole update) or not (a re-instantiation).
  for (bool reshaped : {false, true})
    list.push_back({reshaped ? "the capture-update loop's step re-instantiating for a captured graph of another shape"
                             : "the capture-update loop's step updating an executable from a new capture",
                    [&f, sc, reshaped](World& wd) {
                      f.plain(wd);
                      auto step = [&](int i, bool more) {
                        return capture(f.stream, [&] {
                          f.stream.launch(f.k.scale, Grid{1}, Block{4}, sc(i), 1.0f, 4);
                          f.stream.host([o = wd.old_w()] {});
                          if (more) f.stream.launch(f.k.scale, Grid{1}, Block{4}, sc(i + 1), 1.0f, 4);
                        });
                      };
                      wd.made_graph.emplace(step(0, false));  // kept: the op destroys no graph
                      wd.made_exec.emplace(wd.made_graph->instantiate());
                      wd.alt.emplace(step(1, reshaped));
                    },
                    [reshaped](World& wd) {
                      wd.leaked_exec = wd.made_exec->get();  // replaced (if re-instantiated) on the reclaimer
                      UpdateResult r = wd.made_exec->update_or_reinstantiate(*wd.alt);
                      CHECK(r.reinstantiated == reshaped);
                      REQUIRE(wait_reclaimed(5s));
                    },
                    [&f, reshaped](World& wd) {
                      bool leaked = false;
                      for (const std::string& r : wd.reports) {
                        if (r.find("destroying an executable graph") != std::string::npos) leaked = true;
                        // The replaced executable's accumulator (its cuUserObjectRelease refused).
                        if (r.find("releasing an executable's owner accumulator:") != std::string::npos)
                          wd.leaked_accumulators = 1;
                      }
                      if (!reshaped || !leaked) wd.leaked_exec = nullptr;
                      wd.made_exec->launch(f.stream);
                      f.stream.synchronize();
                    },
                    [](World& wd) { wd.leaked_exec = nullptr; }});
  return list;
}

}  // namespace

TEST_CASE_FIXTURE(SweepFixture,
                  "J1: failing each driver call of every mutating scenario in turn leaves state as before, "
                  "reports what it cannot throw, and leaks nothing") {
  if (!simulated) {
    MESSAGE("fault injection needs the simulator");
    return;
  }
  Totals totals;
  for (const Scenario& s : scenarios(*this)) run(s, totals);
  std::string lines;
  for (const std::string& l : totals.lines) lines += l + "\n";
  MESSAGE("J1 failure sweep: " << totals.injected << " driver failures injected (" << totals.thrown
                               << " thrown, " << totals.reported << " reported through the error hook), "
                               << units() << " units per scenario\n"
                               << lines);
  CHECK(totals.injected >= required_failures);
}
