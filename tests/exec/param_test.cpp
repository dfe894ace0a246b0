// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Dynamic parameters (docs/serving.md, "Dynamic parameters"): a generated family of bindings
// (every way a kernel node is made × value and buffer parameters × an executable's set and an
// edit's set), one driver call per bound node, all or nothing under injected driver failures,
// ownership of swapped buffers across launches in flight, sets after per-node and whole updates,
// rollback, the empty states and the messages.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/launch_gate.hpp"

using namespace tether;
using namespace tether_test;
using detail::Entry;

namespace {

using Fill = KernelNode<float*, float, int>;

// How a node bound to the parameters is made.
enum class Maker { launch, spec, capture, exclusive_capture, edit_capture };
constexpr Maker kMakers[] = {Maker::launch, Maker::spec, Maker::capture, Maker::exclusive_capture, Maker::edit_capture};
const char* name_of(Maker m) {
  switch (m) {
    case Maker::launch: return "Edit::launch";
    case Maker::spec: return "Edit::add(tether::kernel(...))";
    case Maker::capture: return "Stream::launch in a capture";
    case Maker::exclusive_capture: return "Stream::launch in an exclusive capture";
    case Maker::edit_capture: return "Stream::launch in Edit::capture";
  }
  return "?";
}

// `nodes` fills, each `fill(x_i, value, 4)` with x_i bound to parameter `buf` for the even ones
// (else its own buffer) and value bound to `value` for all, made by `how`.
Graph make_fills(DslFixture& f, Maker how, int nodes, const Param<float>& value, const Param<SharedBuffer<float>>& buf,
                 std::vector<SharedBuffer<float>>& own) {
  auto one = [&](int i, auto&& add) {
    if (i % 2 == 0)
      add(buf);
    else
      add(own[static_cast<std::size_t>(i)]);
  };
  for (int i = 0; i < nodes; ++i) own.push_back(f.buffer(4, -1.0f));
  Graph g{f.ctx};
  switch (how) {
    case Maker::launch:
    case Maker::spec:
      g.edit([&](Edit& e) {
        for (int i = 0; i < nodes; ++i)
          one(i, [&](const auto& x) {
            if (how == Maker::launch)
              e.launch(f.k.fill, Grid{1}, Block{4}, x, value, 4);
            else
              e.add(tether::kernel(f.k.fill, Grid{1}, Block{4}, x, value, 4));
          });
      });
      break;
    case Maker::capture:
    case Maker::exclusive_capture: {
      auto body = [&] {
        for (int i = 0; i < nodes; ++i) one(i, [&](const auto& x) { f.stream.launch(f.k.fill, Grid{1}, Block{4}, x, value, 4); });
      };
      g = how == Maker::capture ? tether::capture(f.stream, body)
                                : tether::capture(f.stream, CaptureMode::global, CaptureStreams::exclusive, body);
      break;
    }
    case Maker::edit_capture:
      g.edit([&](Edit& e) {
        e.capture(f.stream, [&] {
          for (int i = 0; i < nodes; ++i) one(i, [&](const auto& x) { f.stream.launch(f.k.fill, Grid{1}, Block{4}, x, value, 4); });
        });
      });
      break;
  }
  return g;
}

}  // namespace

TEST_SUITE_BEGIN("dynamic parameters");

TEST_CASE_FIXTURE(DslFixture, "a parameter set in an executable or a graph changes every node bound to it, however the "
                              "nodes were made, with one driver call per node") {
  for (Maker how : kMakers)
    for (int nodes : {1, 2, 5})
      for (bool in_exec : {true, false}) {
        const std::string maker = name_of(how);
        CAPTURE(maker);
        CAPTURE(nodes);
        CAPTURE(in_exec);
        SharedBuffer<float> a = buffer(4, 0.0f), b = buffer(4, 0.0f);
        Param<float> value(1.0f, "value");
        Param<SharedBuffer<float>> buf(a, "buf");
        std::vector<SharedBuffer<float>> own;
        Graph g = make_fills(*this, how, nodes, value, buf, own);
        const std::size_t with_buf = static_cast<std::size_t>((nodes + 1) / 2);
        GraphExec exec = g.instantiate();
        // Edit::capture puts its nodes in an embedded graph, which CUDA updates only as a whole.
        const bool nested = how == Maker::edit_capture;
        CHECK(exec.bound_nodes(value) == (nested ? 0 : static_cast<std::size_t>(nodes)));
        CHECK(exec.bound_nodes(buf) == (nested ? 0 : with_buf));
        exec.launch(stream);
        stream.synchronize();
        CHECK(read(a) == std::vector<float>(4, 1.0f));
        if (simulated) sim::reset_call_counts();
        if (in_exec && nested) {
          const std::string expected = "parameter 'value' is bound to " + std::to_string(nodes);
          CHECK_THROWS_WITH_AS(exec.set(value, 2.5f), doctest::Contains(expected.c_str()), UsageError);
          continue;
        }
        if (in_exec) {
          CHECK(exec.set(value, 2.5f) == static_cast<std::size_t>(nodes));
          CHECK(exec.set(buf, b) == with_buf);
          if (simulated) CHECK(sim::call_count("cuGraphExecKernelNodeSetParams") == static_cast<std::uint64_t>(nodes) + with_buf);
        } else {
          g.edit([&](Edit& e) {
            CHECK(e.set(value, 2.5f) == static_cast<std::size_t>(nodes));
            CHECK(e.set(buf, b) == with_buf);
          });
          if (simulated) CHECK(sim::call_count("cuGraphKernelNodeSetParams") == static_cast<std::uint64_t>(nodes) + with_buf);
          // The executable made before still runs the old values; a whole update takes the new ones.
          exec.launch(stream);
          stream.synchronize();
          CHECK(read(b) == std::vector<float>(4, 0.0f));
          REQUIRE(exec.update(g));
        }
        exec.launch(stream);
        stream.synchronize();
        CHECK(read(b) == std::vector<float>(4, 2.5f));
        CHECK(read(a) == std::vector<float>(4, 1.0f));  // no longer written
        for (int i = 1; i < nodes; i += 2) CHECK(read(own[static_cast<std::size_t>(i)]) == std::vector<float>(4, 2.5f));
        CHECK(value.value() == 1.0f);  // sets change nodes, not what new nodes take
      }
}

TEST_CASE_FIXTURE(DslFixture, "a parameter binds only to a kernel parameter of its own type, and a set of a parameter "
                              "no node uses changes nothing") {
  Param<float> value(1.0f);
  Param<int> count(4, "count");
  Param<float> unused(0.0f);
  SharedBuffer<float> x = buffer(4, 0.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{4}, x, value, count); });
  GraphExec exec = g.instantiate();
  if (simulated) sim::reset_call_counts();
  CHECK(exec.set(unused, 3.0f) == 0);
  if (simulated) CHECK(sim::call_count("cuGraphExecKernelNodeSetParams") == 0);
  CHECK(exec.set(count, 2) == 1);
  CHECK(exec.set(value, 7.0f) == 1);
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>{7.0f, 7.0f, 0.0f, 0.0f});
  static_assert(detail::KernelArg<float, Param<float>&>::ok);
  static_assert(!detail::KernelArg<double, Param<float>&>::ok);  // exactly the parameter's type
  static_assert(!detail::KernelArg<float*, Param<float>&>::ok);
  static_assert(detail::KernelArg<const float*, Param<SharedBuffer<float>>&>::ok);
  static_assert(!detail::KernelArg<int*, Param<SharedBuffer<float>>&>::ok);
}

TEST_CASE_FIXTURE(DslFixture, "a refused parameter set changes no node of the executable, keeps no new version, and "
                              "says which parameter, node and kernel") {
  if (!simulated) return;  // faults are injected by the simulator
  for (int refused = 1; refused <= 3; ++refused) {
    CAPTURE(refused);
    SharedBuffer<float> a = buffer(4, 0.0f), b = buffer(4, 0.0f);
    Param<SharedBuffer<float>> buf(a, "weights");
    Graph g{ctx};
    g.edit([&](Edit& e) {
      for (int i = 0; i < 3; ++i) e.launch(k.fill, Grid{1}, Block{4}, buf, static_cast<float>(i + 1), 4);
    });
    GraphExec exec = g.instantiate();
    const long b_refs = b.use_count();
    sim::fail_call("cuGraphExecKernelNodeSetParams", static_cast<std::uint64_t>(refused));
    try {
      exec.set(buf, b);
      FAIL("the set was not refused");
    } catch (const DriverError& e) {
      const std::string m = e.what();
      CHECK(m.find("parameter 'weights'") != std::string::npos);
      CHECK(m.find("node " + std::to_string(refused) + " of the 3") != std::string::npos);
      CHECK(m.find("kernel fill") != std::string::npos);
      CHECK(m.find("no node changed") != std::string::npos);
    }
    sim::clear_faults();
    exec.launch(stream);
    stream.synchronize();
    CHECK(read(a) == std::vector<float>(4, 3.0f));  // every node still writes a
    CHECK(read(b) == std::vector<float>(4, 0.0f));
    CHECK(eventually([&] { return b.use_count() == b_refs; }));  // the rejected versions were released
    CHECK(exec.live_node_versions() == 0);
    CHECK(exec.set(buf, b) == 3);  // and a later set succeeds
  }
}

TEST_CASE_FIXTURE(DslFixture, "a refused parameter set in an edit undoes the sets before it and the edit still commits "
                              "what it did before") {
  if (!simulated) return;
  SharedBuffer<float> x = buffer(4, 0.0f), y = buffer(4, 0.0f);
  Param<float> value(1.0f, "step");
  Graph g{ctx};
  g.edit([&](Edit& e) {
    e.launch(k.fill, Grid{1}, Block{4}, x, value, 4);
    e.launch(k.fill, Grid{1}, Block{4}, y, value, 4);
  });
  g.edit([&](Edit& e) {
    CHECK(e.set(value, 2.0f) == 2);
    sim::fail_call("cuGraphKernelNodeSetParams", 2);
    CHECK_THROWS_WITH_AS(e.set(value, 3.0f), doctest::Contains("setting parameter 'step' on kernel node 2 of the 2"),
                         DriverError);
    sim::clear_faults();
  });
  run(g);
  CHECK(read(x) == std::vector<float>(4, 2.0f));
  CHECK(read(y) == std::vector<float>(4, 2.0f));
}

TEST_CASE_FIXTURE(DslFixture, "an edit's parameter set is undone with the edit, sees the edit's own new nodes, and "
                              "skips nodes the edit removes") {
  SharedBuffer<float> x = buffer(4, 0.0f), y = buffer(4, 0.0f), z = buffer(4, 0.0f);
  Param<float> value(1.0f);
  Graph g{ctx};
  Node<Fill> nz;
  g.edit([&](Edit& e) {
    e.launch(k.fill, Grid{1}, Block{4}, x, value, 4);
    nz = e.launch(k.fill, Grid{1}, Block{4}, z, value, 4);
  });
  {
    Edit e = g.edit();
    CHECK(e.set(value, 5.0f) == 2);
  }  // rolled back
  g.edit([&](Edit& e) {
    e.launch(k.fill, Grid{1}, Block{4}, y, value, 4);  // added by this edit
    e.remove(nz);
    CHECK(e.bound_nodes(value) == 2);
    CHECK(e.set(value, 6.0f) == 2);
    CHECK(e.set(value, 7.0f) == 2);  // the newest versions are this edit's
  });
  run(g);
  CHECK(read(x) == std::vector<float>(4, 7.0f));
  CHECK(read(y) == std::vector<float>(4, 7.0f));
  CHECK(read(z) == std::vector<float>(4, 0.0f));
}

TEST_CASE_FIXTURE(DslFixture, "a buffer swapped by a parameter set stays alive until the launch that used it has "
                              "finished, and the new one for as long as a version uses it") {
  SharedBuffer<float> a = buffer(4, 0.0f);
  Param<SharedBuffer<float>> buf(a, "buf");
  auto gate = std::make_shared<LaunchGate>();
  Graph g{ctx};
  g.edit([&](Edit& e) {
    Node<HostNode> hold = e.host([gate] { gate->wait(); });
    e.after(hold).launch(k.fill, Grid{1}, Block{4}, buf, 9.0f, 4);
  });
  GraphExec exec = g.instantiate();
  buf.set_value(buffer(4, 0.0f));  // the parameter no longer keeps a
  std::weak_ptr<int> probe;
  {
    SharedBuffer<float> b = buffer(4, 0.0f);
    exec.set(buf, b);  // a per-node version now keeps b
    exec.launch(stream);
    REQUIRE(eventually([&] { return gate->waiting.load() == 1; }));
    const long before = b.use_count();
    exec.set(buf, a);  // supersedes b's version while the launch runs
    std::this_thread::sleep_for(20ms);
    CHECK(b.use_count() == before);  // still kept for the launch in flight
    gate->open = true;
    stream.synchronize();
    exec.reclaim(stream);
    stream.synchronize();
    CHECK(eventually([&] { return b.use_count() == 1; }));  // only this test's handle
    CHECK(read(b) == std::vector<float>(4, 9.0f));
  }
  a = SharedBuffer<float>();  // only the executable's version keeps it now
  exec.launch(stream);
  stream.synchronize();
  CHECK(exec.live_node_versions() == 1);
}

TEST_CASE_FIXTURE(DslFixture, "a per-node update without the parameter unbinds the node, and one with it binds it "
                              "again") {
  SharedBuffer<float> x = buffer(4, 0.0f);
  Param<float> value(1.0f);
  Graph g{ctx};
  Node<Fill> n;
  g.edit([&](Edit& e) { n = e.launch(k.fill, Grid{1}, Block{4}, x, value, 4); });
  GraphExec exec = g.instantiate();
  exec.update(n, Grid{1}, Block{4}, x, 4.0f, 4);
  CHECK(exec.bound_nodes(value) == 0);
  CHECK(exec.set(value, 5.0f) == 0);
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 4.0f));
  exec.update(n, Grid{1}, Block{4}, x, value, 4);
  CHECK(exec.set(value, 6.0f) == 1);
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 6.0f));
}

TEST_CASE_FIXTURE(DslFixture, "after a whole update from another graph, a parameter set changes the nodes the "
                              "executable now runs") {
  SharedBuffer<float> x = buffer(4, 0.0f), y = buffer(4, 0.0f);
  Param<float> step(1.0f, "step");
  auto build = [&](const SharedBuffer<float>& dst) {
    return tether::capture(stream, [&] {
      stream.launch(k.fill, Grid{1}, Block{4}, x, 0.5f, 4);
      stream.launch(k.fill, Grid{1}, Block{4}, dst, step, 4);
    });
  };
  Graph g1 = build(x);
  GraphExec exec = g1.instantiate();
  Graph g2 = build(y);
  UpdateResult r = exec.update_or_reinstantiate(g2);
  REQUIRE(r);
  CHECK_FALSE(r.reinstantiated);
  CHECK(exec.bound_nodes(step) == 1);
  CHECK(exec.set(step, 8.0f) == 1);
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(y) == std::vector<float>(4, 8.0f));
  CHECK(read(x) == std::vector<float>(4, 0.5f));
  // The source graph gains a node: the pairing is gone, and the set says why.
  const Node<> first = g1.nodes().front();
  g1.edit([&](Edit& e) { e.remove(first); });
  CHECK_THROWS_WITH_AS(exec.set(step, 2.0f), doctest::Contains("cannot be paired"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "inspect names a node's parameters, and every public call on an empty parameter says "
                              "it is empty") {
  SharedBuffer<float> x = buffer(4, 0.0f);
  Param<float> step(1.0f, "step");
  Graph g{ctx};
  g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{4}, x, step, 4); });
  const std::string shown = fmt::format("{}", inspect(g));
  CHECK(shown.find("kernel fill with parameter step (and 1 other owner)") != std::string::npos);

  Param<float> empty;
  CHECK_FALSE(empty);
  Param<float> moved = std::move(step);
  CHECK_FALSE(step);  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  CHECK(moved);
  GraphExec exec = g.instantiate();
  CHECK_THROWS_WITH_AS(empty.value(), doctest::Contains("Param::value: this Param is moved from or empty"), UsageError);
  CHECK_THROWS_WITH_AS(empty.set_value(1.0f), doctest::Contains("Param::set_value"), UsageError);
  CHECK_THROWS_WITH_AS(empty.name(), doctest::Contains("Param::name"), UsageError);
  CHECK_THROWS_WITH_AS(exec.set(empty, 1.0f), doctest::Contains("GraphExec::set: this Param"), UsageError);
  CHECK_THROWS_WITH_AS(exec.bound_nodes(empty), doctest::Contains("GraphExec::bound_nodes"), UsageError);
  CHECK_THROWS_WITH_AS(g.edit([&](Edit& e) { e.set(empty, 1.0f); }), doctest::Contains("Edit::set: this Param"), UsageError);
  CHECK_THROWS_WITH_AS(g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{4}, x, empty, 4); }),
                       doctest::Contains("binding a parameter: this Param"), UsageError);
  Param<SharedBuffer<float>> buf(x, "weights");
  CHECK_THROWS_WITH_AS(buf.set_value(SharedBuffer<float>()), doctest::Contains("parameter 'weights' is an empty SharedBuffer"),
                       UsageError);
  CHECK_THROWS_WITH_AS(exec.set(buf, SharedBuffer<float>()), doctest::Contains("GraphExec::set: the value of parameter 'weights'"),
                       UsageError);
  CHECK_THROWS_WITH_AS((Param<SharedBuffer<float>>(SharedBuffer<float>(), "w")), doctest::Contains("parameter 'w'"), UsageError);
  GraphExec none;
  CHECK_THROWS_WITH_AS(none.set(moved, 1.0f), doctest::Contains("GraphExec is moved from or empty"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "a parameter set inside a host callback is refused, as every call that reaches the "
                              "driver is") {
  SharedBuffer<float> x = buffer(4, 0.0f);
  Param<float> step(1.0f, "step");
  Graph g{ctx};
  g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{4}, x, step, 4); });
  GraphExec exec = g.instantiate();
  std::string seen;
  stream.host([&] {
    try {
      exec.set(step, 2.0f);
    } catch (const UsageError& e) {
      seen = e.what();
    }
  });
  stream.synchronize();
  CHECK(seen.find("GraphExec::set") != std::string::npos);
  CHECK(seen.find("host callback") != std::string::npos);
}

TEST_CASE_FIXTURE(DslFixture, "threads setting parameters of one executable while others launch it lose no version") {
  SharedBuffer<float> x = buffer(4, 0.0f);
  Param<float> step(0.0f, "step");
  Param<SharedBuffer<float>> buf(x, "buf");
  Graph g{ctx};
  g.edit([&](Edit& e) {
    for (int i = 0; i < 4; ++i) e.launch(k.fill, Grid{1}, Block{4}, buf, step, 4);
  });
  GraphExec exec = g.instantiate();
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      Stream s = ctx.make_stream();
      for (int i = 0; i < 50; ++i) {
        if (t == 0) exec.set(step, static_cast<float>(i));
        if (t == 1) exec.set(buf, buffer(4, 0.0f));
        exec.launch(s);
      }
      s.synchronize();
    });
  for (auto& t : ts) t.join();
  exec.launch(stream);
  stream.synchronize();
  exec.reclaim(stream);
  stream.synchronize();
  CHECK(eventually([&] { return exec.live_node_versions() == 4; }));
}

TEST_CASE_FIXTURE(DslFixture, "a value set releases the version it supersedes at once, and a buffer set after it "
                              "still keeps the old buffer for the launch in flight") {
  SharedBuffer<float> first = buffer(4, 0.0f);
  Param<SharedBuffer<float>> buf(first, "buf");
  Param<float> step(1.0f, "step");
  auto gate = std::make_shared<LaunchGate>();
  Graph g{ctx};
  g.edit([&](Edit& e) {
    Node<HostNode> hold = e.host([gate] { gate->wait(); });
    e.after(hold).launch(k.fill, Grid{1}, Block{4}, buf, step, 4);
  });
  GraphExec exec = g.instantiate();
  SharedBuffer<float> b1 = buffer(4, 0.0f);
  exec.set(buf, b1);
  exec.launch(stream);  // runs with b1, held at the gate
  REQUIRE(eventually([&] { return gate->waiting.load() == 1; }));
  const long kept = b1.use_count();
  for (int i = 0; i < 3; ++i) exec.set(step, static_cast<float>(i + 2));  // value sets: nothing retired
  CHECK(exec.live_node_versions() == 1);
  exec.set(buf, buffer(4, 0.0f));  // now b1's version goes, but the launch in flight still uses b1
  CHECK(exec.live_node_versions() == 2);
  std::this_thread::sleep_for(20ms);
  CHECK(b1.use_count() == kept);
  gate->open = true;
  stream.synchronize();
  CHECK(read(b1) == std::vector<float>(4, 1.0f));  // the launch ran with the value set before it
  exec.reclaim(stream);
  stream.synchronize();
  CHECK(eventually([&] { return b1.use_count() == 1; }));
}

// Launch parameters: a Param<Launch> binds nodes' dimensions and dynamic shared memory.
namespace {

// `nodes` fills of 8-element buffers, each `fill(x_i, value, 8)` launched with `cfg`, made by
// `how`: a fill writes as many elements as its launch has threads.
Graph make_sized(DslFixture& f, Maker how, int nodes, const Param<Launch>& cfg, const Param<float>& value,
                 std::vector<SharedBuffer<float>>& out) {
  for (int i = 0; i < nodes; ++i) out.push_back(f.buffer(8, 0.0f));
  auto each = [&](auto&& make) {
    for (int i = 0; i < nodes; ++i) make(out[static_cast<std::size_t>(i)]);
  };
  auto on_stream = [&] { each([&](const SharedBuffer<float>& x) { f.stream.launch(f.k.fill, cfg, x, value, 8); }); };
  Graph g{f.ctx};
  switch (how) {
    case Maker::launch: g.edit([&](Edit& e) { each([&](const SharedBuffer<float>& x) { e.launch(f.k.fill, cfg, x, value, 8); }); }); break;
    case Maker::spec:
      g.edit([&](Edit& e) { each([&](const SharedBuffer<float>& x) { e.add(tether::kernel(f.k.fill, cfg, x, value, 8)); }); });
      break;
    case Maker::capture: g = tether::capture(f.stream, on_stream); break;
    case Maker::exclusive_capture: g = tether::capture(f.stream, CaptureMode::global, CaptureStreams::exclusive, on_stream); break;
    case Maker::edit_capture: g.edit([&](Edit& e) { e.capture(f.stream, on_stream); }); break;
  }
  return g;
}

// How many leading elements of `x` hold `v` (a fill of n threads writes n).
std::size_t written(const DslFixture& f, const SharedBuffer<float>& x, float v) {
  std::size_t n = 0;
  for (float e : f.read(x)) {
    if (e != v) break;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE_FIXTURE(DslFixture, "a launch parameter set changes the dimensions of every node bound to it, however the "
                              "nodes were made, with one driver call per node, and leaves their other parameters") {
  for (Maker how : kMakers)
    for (int nodes : {1, 3})
      for (bool in_exec : {true, false}) {
        const std::string maker = name_of(how);
        CAPTURE(maker);
        CAPTURE(nodes);
        CAPTURE(in_exec);
        Param<Launch> cfg(Launch{Grid{1}, Block{2}}, "cfg");
        Param<float> value(1.0f, "value");
        std::vector<SharedBuffer<float>> out;
        Graph g = make_sized(*this, how, nodes, cfg, value, out);
        GraphExec exec = g.instantiate();
        const bool nested = how == Maker::edit_capture;
        CHECK(exec.bound_nodes(cfg) == (nested ? 0u : static_cast<std::size_t>(nodes)));
        exec.launch(stream);
        stream.synchronize();
        for (const auto& x : out) CHECK(written(*this, x, 1.0f) == 2);
        if (simulated) sim::reset_call_counts();
        const Launch wider{Grid{2}, Block{3}};  // 6 threads
        if (in_exec && nested) {
          CHECK_THROWS_WITH_AS(exec.set(cfg, wider), doctest::Contains("parameter 'cfg' is bound to"), UsageError);
          continue;
        }
        if (in_exec) {
          CHECK(exec.set(cfg, wider) == static_cast<std::size_t>(nodes));
          CHECK(exec.set(value, 4.0f) == static_cast<std::size_t>(nodes));  // keeps the new dimensions
          if (simulated) CHECK(sim::call_count("cuGraphExecKernelNodeSetParams") == 2u * static_cast<std::uint64_t>(nodes));
        } else {
          g.edit([&](Edit& e) {
            CHECK(e.set(cfg, wider) == static_cast<std::size_t>(nodes));
            CHECK(e.set(value, 4.0f) == static_cast<std::size_t>(nodes));
          });
          if (simulated) {
            CHECK(sim::call_count("cuGraphKernelNodeSetParams") == 2u * static_cast<std::uint64_t>(nodes));
            CHECK(sim::call_count("cuGraphKernelNodeSetAttribute") == 0);  // the Launch sets none
          }
          REQUIRE(exec.update(g));
        }
        exec.launch(stream);
        stream.synchronize();
        for (const auto& x : out) CHECK(written(*this, x, 4.0f) == 6);
        CHECK(cfg.value().block().x == 2);  // sets change nodes, not what new nodes take
      }
}

TEST_CASE_FIXTURE(DslFixture, "an executable refuses a launch parameter's Launch that sets an attribute, naming the "
                              "parameter and the attribute; an edit sets it on the nodes and a rollback puts it back") {
  SharedBuffer<float> x = buffer(8, 0.0f), y = buffer(8, 0.0f);
  Param<Launch> cfg(Launch{Grid{1}, Block{2}}.priority(-1), "cfg");
  Graph g{ctx};
  Node<Fill> a, b;
  g.edit([&](Edit& e) {
    a = e.launch(k.fill, cfg, x, 1.0f, 8);
    b = e.launch(k.fill, cfg, y, 2.0f, 8);
  });
  auto priority = [&](const Node<Fill>& n) {
    CUlaunchAttributeValue v{};
    detail::call<Entry::cuGraphKernelNodeGetAttribute>(table(), "reading the priority", n.get(),
                                                       CU_LAUNCH_ATTRIBUTE_PRIORITY, &v);
    return v.priority;
  };
  CHECK(priority(a) == -1);
  GraphExec exec = g.instantiate();
  if (simulated) sim::reset_call_counts();
  try {
    exec.set(cfg, Launch{Grid{1}, Block{8}}.priority(-2));
    FAIL("the set was not refused");
  } catch (const UsageError& e) {
    const std::string m = e.what();
    CHECK(m.find("GraphExec::set: the new Launch of launch parameter 'cfg' sets CU_LAUNCH_ATTRIBUTE_PRIORITY "
                 "(Launch::priority)") != std::string::npos);
    CHECK(m.find("Edit::set") != std::string::npos);
  }
  if (simulated) CHECK(sim::call_count("cuGraphExecKernelNodeSetParams") == 0);
  // Without attributes the nodes keep the ones they were made with.
  CHECK(exec.set(cfg, Launch{Grid{1}, Block{4}}) == 2);
  exec.launch(stream);
  stream.synchronize();
  CHECK(written(*this, x, 1.0f) == 4);
  // An edit takes attributes: set on every bound node, put back when the edit rolls back.
  CHECK_THROWS_AS(g.edit([&](Edit& e) {
    CHECK(e.set(cfg, Launch{Grid{1}, Block{8}}.priority(-3)) == 2);
    CHECK(priority(a) == -3);
    CHECK(priority(b) == -3);
    throw std::runtime_error("rolled back");
  }), std::runtime_error);
  CHECK(priority(a) == -1);
  CHECK(priority(b) == -1);
  g.edit([&](Edit& e) { e.set(cfg, Launch{Grid{1}, Block{8}}.priority(-3)); });
  CHECK(priority(b) == -3);
  run(g);
  CHECK(written(*this, y, 2.0f) == 8);
}

TEST_CASE_FIXTURE(DslFixture, "a refused attribute of a launch parameter's set in an edit puts the node back and "
                              "names the attribute, and the sets before it are undone") {
  if (!simulated) return;  // faults are injected by the simulator
  SharedBuffer<float> x = buffer(8, 0.0f), y = buffer(8, 0.0f);
  Param<Launch> cfg(Launch{Grid{1}, Block{2}}, "cfg");
  Graph g{ctx};
  g.edit([&](Edit& e) {
    e.launch(k.fill, cfg, x, 1.0f, 8);
    e.launch(k.fill, cfg, y, 1.0f, 8);
  });
  g.edit([&](Edit& e) {
    sim::fail_call("cuGraphKernelNodeSetAttribute", 2);  // the second node's
    CHECK_THROWS_WITH_AS(e.set(cfg, Launch{Grid{1}, Block{8}}.priority(1)),
                         doctest::Contains("setting parameter 'cfg' on kernel node 2 of the 2 bound to it in a graph "
                                           "(kernel fill, setting CU_LAUNCH_ATTRIBUTE_PRIORITY (Launch::priority))"),
                         DriverError);
    sim::clear_faults();
  });
  run(g);
  CHECK(written(*this, x, 1.0f) == 2);
  CHECK(written(*this, y, 1.0f) == 2);
}

TEST_CASE_FIXTURE(DslFixture, "a refused launch parameter set in an executable changes no node's dimensions") {
  if (!simulated) return;
  SharedBuffer<float> x = buffer(8, 0.0f), y = buffer(8, 0.0f);
  Param<Launch> cfg(Launch{Grid{1}, Block{2}}, "cfg");
  Graph g{ctx};
  g.edit([&](Edit& e) {
    e.launch(k.fill, cfg, x, 1.0f, 8);
    e.launch(k.fill, cfg, y, 1.0f, 8);
  });
  GraphExec exec = g.instantiate();
  sim::fail_call("cuGraphExecKernelNodeSetParams", 2);
  CHECK_THROWS_WITH_AS(exec.set(cfg, Launch{Grid{1}, Block{8}}),
                       doctest::Contains("setting parameter 'cfg' on kernel node 2 of the 2"), DriverError);
  sim::clear_faults();
  exec.launch(stream);
  stream.synchronize();
  CHECK(written(*this, x, 1.0f) == 2);
  CHECK(written(*this, y, 1.0f) == 2);
  CHECK(exec.live_node_versions() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "a launch parameter asking for more than 48 KiB of dynamic shared memory raises the "
                              "kernel's limit before the set, and a size the device refuses changes nothing") {
  SharedBuffer<float> x = buffer(8, 0.0f);
  Param<Launch> cfg(Launch{Grid{1}, Block{2}}, "cfg");
  Graph g{ctx};
  Node<Fill> n;
  g.edit([&](Edit& e) { n = e.launch(k.fill, cfg, x, 1.0f, 8); });
  GraphExec exec = g.instantiate();
  const std::size_t bytes = 100000;
  CHECK(exec.set(cfg, Launch{Grid{1}, Block{8}}.shared_memory(bytes)) == 1);
  int max = 0;
  detail::call<Entry::cuFuncGetAttribute>(table(), "reading the limit", &max, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          k.fill.function());
  CHECK(max >= static_cast<int>(bytes));
  exec.launch(stream);
  stream.synchronize();
  CHECK(written(*this, x, 1.0f) == 8);
  CHECK_THROWS_WITH_AS(exec.set(cfg, Launch{Grid{1}, Block{4}}.shared_memory(300000)),
                       doctest::Contains("raising kernel 'fill''s dynamic shared memory limit to 300000 bytes"), DriverError);
  g.edit([&](Edit& e) { CHECK(e.set(cfg, Launch{Grid{1}, Block{4}}.shared_memory(bytes)) == 1); });
  CUDA_KERNEL_NODE_PARAMS p{};
  detail::call<Entry::cuGraphKernelNodeGetParams>(table(), "reading the node", n.get(), &p);
  CHECK(p.sharedMemBytes == bytes);
  CHECK(p.blockDimX == 4);
}

TEST_CASE_FIXTURE(DslFixture, "a launch parameter with a zero dimension is refused where it is made, set or bound, "
                              "naming the parameter, before any driver call") {
  CHECK_THROWS_WITH_AS((Param<Launch>(Launch{Grid{0}, Block{4}}, "cfg")),
                       doctest::Contains("Param (launch parameter 'cfg')"), UsageError);
  Param<Launch> cfg(Launch{Grid{1}, Block{4}}, "cfg");
  CHECK_THROWS_WITH_AS(cfg.set_value(Launch{Grid{1}, Block{0}}), doctest::Contains("Param::set_value (launch parameter 'cfg')"),
                       UsageError);
  CHECK(cfg.value().block().x == 4);
  SharedBuffer<float> x = buffer(8, 0.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) { e.launch(k.fill, cfg, x, 1.0f, 8); });
  GraphExec exec = g.instantiate();
  if (simulated) sim::reset_call_counts();
  CHECK_THROWS_WITH_AS(exec.set(cfg, Launch{Grid{1, 0}, Block{4}}), doctest::Contains("GraphExec::set (launch parameter 'cfg')"),
                       UsageError);
  CHECK_THROWS_WITH_AS(g.edit([&](Edit& e) { e.set(cfg, Launch{Grid{1}, Block{4, 1, 0}}); }),
                       doctest::Contains("Edit::set (launch parameter 'cfg')"), UsageError);
  if (simulated) CHECK(sim::call_count("cuGraphExecKernelNodeSetParams") + sim::call_count("cuGraphKernelNodeSetParams") == 0);
  Param<Launch> empty;
  CHECK_THROWS_WITH_AS(g.edit([&](Edit& e) { e.launch(k.fill, empty, x, 1.0f, 8); }),
                       doctest::Contains("binding a launch parameter: this Param is moved from or empty"), UsageError);
  CHECK_THROWS_WITH_AS(exec.set(empty, Launch{Grid{1}, Block{1}}), doctest::Contains("GraphExec::set: this Param"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "a per-node update with a launch parameter binds the node to it, one with a Launch "
                              "unbinds it, and inspect names both kinds of parameter") {
  SharedBuffer<float> x = buffer(8, 0.0f);
  Param<Launch> cfg(Launch{Grid{1}, Block{2}}, "cfg");
  Param<float> step(1.0f, "step");
  Graph g{ctx};
  Node<Fill> n;
  g.edit([&](Edit& e) { n = e.launch(k.fill, Launch{Grid{1}, Block{1}}, x, step, 8); });
  GraphExec exec = g.instantiate();
  CHECK(exec.bound_nodes(cfg) == 0);
  exec.update(n, cfg, x, step, 8);
  CHECK(exec.bound_nodes(cfg) == 1);
  CHECK(exec.bound_nodes(step) == 1);
  CHECK(exec.set(cfg, Launch{Grid{1}, Block{5}}) == 1);
  exec.launch(stream);
  stream.synchronize();
  CHECK(written(*this, x, 1.0f) == 5);
  exec.update(n, Launch{Grid{1}, Block{3}}, x, step, 8);
  CHECK(exec.bound_nodes(cfg) == 0);
  CHECK(exec.set(cfg, Launch{Grid{1}, Block{8}}) == 0);
  CHECK_THROWS_WITH_AS(exec.update(n, Param<Launch>(Launch{Grid{1}, Block{1}}.cooperative(), "coop"), x, step, 8),
                       doctest::Contains("the Launch sets cooperative, a node attribute"), UsageError);
  g.edit([&](Edit& e) { e.update(n, cfg, x, step, 8); });
  CHECK(fmt::format("{}", inspect(g)).find("kernel fill with launch parameter cfg and parameter step") != std::string::npos);
  Graph h{ctx};
  g.edit([&](Edit& e) { e.launch(k.fill, cfg, x, 2.0f, 8); });
  CHECK(fmt::format("{}", inspect(g)).find("kernel fill with launch parameter cfg (and 1 other owner)") != std::string::npos);
}

// The driver facts the parameter sets rest on, checked with raw driver calls on both drivers.
namespace {

// The driver's parameters of `fill<<<1, 4>>>(args...)`; `args` are fill's three arguments.
CUDA_KERNEL_NODE_PARAMS fill_params(const DslFixture& f, void** args) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = f.k.fill.function();
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 4;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

}  // namespace

TEST_CASE_FIXTURE(DslFixture, "P1: cuGraphExecKernelNodeSetParams copies the argument values at the call") {
  SharedBuffer<float> x = buffer(4, 0.0f);
  const detail::DriverTable& t = table();
  CUdeviceptr dx = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(x.data()));
  float v = 1.0f;
  int n = 4;
  void* args[] = {&dx, &v, &n};
  CUDA_KERNEL_NODE_PARAMS p = fill_params(*this, args);
  CUgraph g = nullptr;
  REQUIRE(detail::raw<detail::Entry::cuGraphCreate>(t, &g, 0u) == CUDA_SUCCESS);
  CUgraphNode node = nullptr;
  REQUIRE(detail::raw<detail::Entry::cuGraphAddKernelNode>(t, &node, g, static_cast<const CUgraphNode*>(nullptr),
                                                           std::size_t{0}, &p) == CUDA_SUCCESS);
  CUgraphExec e = nullptr;
  REQUIRE(detail::raw<detail::Entry::cuGraphInstantiateWithFlags>(t, &e, g, 0ull) == CUDA_SUCCESS);
  v = 3.0f;
  CHECK(detail::raw<detail::Entry::cuGraphExecKernelNodeSetParams>(t, e, node, &p) == CUDA_SUCCESS);
  v = 9.0f;  // after the call: the executable must not see it
  launch(e);
  CHECK(read(x) == std::vector<float>(4, 3.0f));
  destroy(e);
  CHECK(detail::raw<detail::Entry::cuGraphDestroy>(t, g) == CUDA_SUCCESS);
}

TEST_CASE_FIXTURE(DslFixture, "P2: after a whole update from another graph, a per-node update with the first graph's "
                              "i-th node changes the node paired with it in creation order") {
  SharedBuffer<float> x = buffer(4, 0.0f), y = buffer(4, 0.0f), z = buffer(4, 0.0f);
  const detail::DriverTable& t = table();
  auto ptr = [](const SharedBuffer<float>& b) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(b.data())); };
  int n = 4;
  auto add = [&](CUgraph g, CUdeviceptr d, float v) {
    void* args[] = {&d, &v, &n};
    CUDA_KERNEL_NODE_PARAMS p = fill_params(*this, args);
    CUgraphNode node = nullptr;
    REQUIRE(detail::raw<detail::Entry::cuGraphAddKernelNode>(t, &node, g, static_cast<const CUgraphNode*>(nullptr),
                                                             std::size_t{0}, &p) == CUDA_SUCCESS);
    return node;
  };
  CUgraph g1 = nullptr, g2 = nullptr;
  REQUIRE(detail::raw<detail::Entry::cuGraphCreate>(t, &g1, 0u) == CUDA_SUCCESS);
  REQUIRE(detail::raw<detail::Entry::cuGraphCreate>(t, &g2, 0u) == CUDA_SUCCESS);
  add(g1, ptr(x), 1.0f);                           // two independent nodes: only their order pairs them
  CUgraphNode b1 = add(g1, ptr(y), 2.0f);
  add(g2, ptr(x), 5.0f);
  add(g2, ptr(y), 6.0f);
  CUgraphExec e = nullptr;
  REQUIRE(detail::raw<detail::Entry::cuGraphInstantiateWithFlags>(t, &e, g1, 0ull) == CUDA_SUCCESS);
  CUgraphExecUpdateResultInfo info{};
  REQUIRE(detail::raw<detail::Entry::cuGraphExecUpdate>(t, e, g2, &info) == CUDA_SUCCESS);
  CUdeviceptr dz = ptr(z);
  float v = 7.0f;
  void* args[] = {&dz, &v, &n};
  CUDA_KERNEL_NODE_PARAMS p = fill_params(*this, args);
  CHECK(detail::raw<detail::Entry::cuGraphExecKernelNodeSetParams>(t, e, b1, &p) == CUDA_SUCCESS);
  launch(e);
  CHECK(read(x) == std::vector<float>(4, 5.0f));  // g2's first node
  CHECK(read(z) == std::vector<float>(4, 7.0f));  // the second, set through g1's second node
  CHECK(read(y) == std::vector<float>(4, 0.0f));
  destroy(e);
  CHECK(detail::raw<detail::Entry::cuGraphDestroy>(t, g1) == CUDA_SUCCESS);
  CHECK(detail::raw<detail::Entry::cuGraphDestroy>(t, g2) == CUDA_SUCCESS);
}
