// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Empty states, generated over the public API: every member of every type that can be empty
// (moved from, default-constructed, reset, released), and every place an empty value can be
// passed, throws UsageError naming the type and "moved from or empty" before any driver call;
// the types that share or copy stay usable when moved from.
#include <doctest/doctest.h>

#include <memory>
#include <span>
#include <vector>

#include "hardening/families.hpp"
#include "support/messages.hpp"

using namespace tether;
using namespace tether_test;
using namespace hardening;

TEST_SUITE_BEGIN("hardening: empty states");

namespace {

constexpr std::string_view kEmpty = "moved from or empty";

/// How a live object is made empty: name, and what to do to it.
template <class T>
using States = std::vector<std::pair<std::string, std::function<void(T&)>>>;

/// The ways a live, non-default-constructible object becomes empty; `make` gives another live one.
template <class T>
States<T> moved_or_reset(std::function<T()> make) {
  return {
      {"moved from (construction)", [](T& x) { T sink = std::move(x); }},
      {"moved from (assignment)", [make](T& x) {
         T other = make();
         other = std::move(x);
       }},
      {"after reset()", [](T& x) { reset_of(x); }},
  };
}

}  // namespace

TEST_CASE("the contract's new declarations exist (wait_released, Graph::reset, GraphExec::reset, operator bool)") {
  CHECK_MESSAGE(has_wait_released<>, "tether::wait_released(const Context&, std::chrono::milliseconds) -> bool is not declared");
  CHECK_MESSAGE(has_graph_reset<>, "Graph::reset() is not declared");
  CHECK_MESSAGE(has_exec_reset<>, "GraphExec::reset() is not declared");
  CHECK_MESSAGE((std::is_constructible_v<bool, const Graph&> && !std::is_convertible_v<const Graph&, bool>),
                "Graph has no explicit operator bool");
  CHECK_MESSAGE((std::is_constructible_v<bool, const GraphExec&> && !std::is_convertible_v<const GraphExec&, bool>),
                "GraphExec has no explicit operator bool");
}

namespace {

/// The members of a GraphExec that need an executable; `a` gives the nodes, `z` a buffer.
Table exec_members(GraphExec& exec, Fixture::AllKinds& a, SharedBuffer<float>& z, const Stream& stream) {
  return {
      {"launch(s)", [&] { exec.launch(stream); }},
      {"upload(s)", [&] { exec.upload(stream); }},
      {"update(graph)", [&] { (void)exec.update(a.g); }},
      {"update_or_reinstantiate(graph)", [&] { (void)exec.update_or_reinstantiate(a.g); }},
      {"plan_update(graph)", [&] { (void)exec.plan_update(a.g); }},
      {"update(kernel_node, ...)", [&] { exec.update(a.kernel, Grid{1}, Block{8}, z, 1.0f, 8); }},
      {"update(memset_node, ...)", [&] { exec.update(a.memset, z, 1.0f); }},
      {"update(memcpy_node, ...)", [&] { exec.update(a.memcpy, z, a.x); }},
      {"update(host_node, fn)", [&] { exec.update(a.host, [] {}); }},
      {"update(record_node, event)", [&] { exec.update(a.record, a.ev); }},
      {"update(wait_node, event)", [&] { exec.update(a.wait, a.ev); }},
      {"update(child_node, graph)", [&] { exec.update(a.embedded, a.child); }},
      {"enable(node, false)", [&] { exec.enable(a.kernel, false); }},
      {"enabled(node)", [&] { (void)exec.enabled(a.kernel); }},
      {"reclaim(s)", [&] { exec.reclaim(stream); }},
      {"tether::inspect(exec)", [&] { (void)inspect(exec); }},
      {"tether::to_dot(exec)", [&] { (void)to_dot(exec); }},
  };
}

}  // namespace

namespace {

/// The members of a Graph that need a graph (`node` is a node of another graph, for find/child/bodies).
Table graph_members(Graph& g, const Node<EmptyNode>& node, const Stream& stream) {
  return {
      {"edit()", [&] { Edit e = g.edit(); }},
      {"edit(fn)", [&] { g.edit([](Edit&) {}); }},
      {"clone()", [&] { (void)g.clone(); }},
      {"find(node)", [&] { (void)g.find(node); }},
      {"instantiate()", [&] { (void)g.instantiate(); }},
      {"instantiate(options)", [&] { (void)g.instantiate(InstantiateOptions{.upload = &stream}); }},
      {"ref()", [&] { (void)g.ref(); }},
      {"node_count()", [&] { (void)g.node_count(); }},
      {"nodes()", [&] { (void)g.nodes(); }},
      {"roots()", [&] { (void)g.roots(); }},
      {"edges()", [&] { (void)g.edges(); }},
      {"child(node)", [&] { (void)g.child(node); }},
      {"bodies(node)", [&] { (void)g.bodies(node); }},
      {"anonymous_owners()", [&] { (void)g.anonymous_owners(); }},
      {"tether::inspect(g)", [&] { (void)inspect(g); }},
      {"tether::to_dot(g)", [&] { (void)to_dot(g); }},
      {"tether::debug_dot_print(g, path)", [&] { debug_dot_print(g, "/tmp/tether_never_written.dot"); }},
  };
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "every member of a moved-from or reset Graph throws UsageError naming Graph and saying moved from or empty") {
  // A node of another graph and its clone, for find().
  Graph source{ctx};
  Node<EmptyNode> node;
  source.edit([&](Edit& e) { node = e.empty(); });
  for (const auto& [state, make_empty] : moved_or_reset<Graph>([c = ctx] { return Graph{c}; })) {
    SUBCASE(state.c_str()) {
      Graph g{ctx};
      g.edit([&](Edit& e) { e.empty(); });
      expect_ok([&] { make_empty(g); });
      each_throws(graph_members(g, node, stream), {"Graph", kEmpty}, {}, state + " / ");
      const Observations observations = {
          {"operator bool is false", [&] { return !truthy(g); }},
          {"get() is null", [&] { return g.get() == nullptr; }},
          {"context() is still the graph's context", [&] { return g.context() == ctx; }},
      };
      each_holds(observations, state + " / ");
    }
  }
}

TEST_CASE_FIXTURE(Fixture, "every member of a default-constructed Graph throws UsageError naming Graph and saying moved "
                           "from or empty, context() included") {
  Graph source{ctx};
  Node<EmptyNode> node;
  source.edit([&](Edit& e) { node = e.empty(); });
  Graph g;
  Table members = graph_members(g, node, stream);
  members.push_back({"context()", [&] { (void)g.context(); }});
  each_throws(members, {"Graph", kEmpty});
  const Observations observations = {
      {"operator bool is false", [&] { return !truthy(g); }},
      {"get() is null", [&] { return g.get() == nullptr; }},
      {"reset() leaves it empty", [&] {
         g.reset();
         return !truthy(g);
       }},
      {"a live graph assigned to it is usable, and its context is the new graph's", [&] {
         g = Graph{ctx};
         g.edit([](Edit& e) { e.empty(); });
         return truthy(g) && g.node_count() == 1 && g.context() == ctx && g.get() != nullptr;
       }},
      {"assigning it to a live graph empties that graph", [&] {
         Graph live{ctx};
         live = std::move(g);
         return !truthy(live) && live.get() == nullptr;
       }},
      {"it is nothrow default-constructible",
       [&] { return std::is_nothrow_default_constructible_v<Graph> && !truthy(Graph{}); }},
  };
  each_holds(observations);
}

TEST_CASE_FIXTURE(Fixture, "a default-constructed GraphExec is empty: every member throws UsageError naming GraphExec, "
                           "and an executable can be assigned to it") {
  AllKinds a = all_kinds();
  GraphExec exec;
  SharedBuffer<float> z = buffer(8, 0.0f);
  each_throws(exec_members(exec, a, z, stream), {"GraphExec", kEmpty});
  const Observations observations = {
      {"operator bool is false", [&] { return !truthy(exec); }},
      {"get() is null", [&] { return exec.get() == nullptr; }},
      {"live_node_versions() is 0", [&] { return exec.live_node_versions() == 0; }},
      {"nothrow default-constructible", [] { return std::is_nothrow_default_constructible_v<GraphExec>; }},
      {"exec = g.instantiate() makes it launchable", [&] {
         exec = a.g.instantiate();
         exec.launch(stream);
         stream.synchronize();
         return truthy(exec) && exec.get() != nullptr;
       }},
  };
  each_holds(observations);
}

namespace {

/// A class that makes its graph and executable after construction: the members start empty.
struct Pipeline {
  Graph graph;
  GraphExec exec;
  void build(const Context& ctx, const Kernel<float*, float, int>& fill, const SharedBuffer<float>& x) {
    graph = Graph{ctx};
    graph.edit([&](Edit& e) { e.launch(fill, Grid{1}, Block{8}, x, 3.0f, 8); });
    exec = graph.instantiate();
  }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "Graph and GraphExec as class members start empty and are assigned later") {
  Pipeline p;
  CHECK_FALSE(truthy(p.graph));
  CHECK_FALSE(truthy(p.exec));
  CHECK(contains(message_of([&] { p.exec.launch(stream); }), "GraphExec::launch: this GraphExec is moved from or empty"));
  SharedBuffer<float> x = buffer(8, 0.0f);
  p.build(ctx, k.fill, x);
  p.exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(8, 3.0f));
  Pipeline moved = std::move(p);
  CHECK_FALSE(truthy(p.exec));
  CHECK(truthy(moved.exec));
}

TEST_CASE_FIXTURE(Fixture, "an empty Graph passed to embed, replace or an executable's update throws UsageError saying moved from or empty") {
  for (const auto& [state, make_empty] : moved_or_reset<Graph>([c = ctx] { return Graph{c}; })) {
    SUBCASE(state.c_str()) {
      AllKinds a = all_kinds();
      GraphExec exec = a.g.instantiate();
      Graph empty{ctx};
      expect_ok([&] { make_empty(empty); });
      const Table members = {
          {"Edit::embed(g)", [&] { a.g.edit([&](Edit& e) { e.embed(empty); }); }},
          {"Inserter::embed(g)", [&] { a.g.edit([&](Edit& e) { e.after(a.kernel).embed(empty); }); }},
          {"Edit::replace(child_node, g)", [&] { a.g.edit([&](Edit& e) { e.replace(a.embedded, empty); }); }},
          {"GraphExec::update(g)", [&] { (void)exec.update(empty); }},
          {"GraphExec::update(child_node, g)", [&] { exec.update(a.embedded, empty); }},
      };
      each_throws(members, {kEmpty}, {}, state + " / ");
      // Nothing of the failed calls stayed behind.
      CHECK(a.g.node_count() == 7);
      expect_ok([&] {
        exec.launch(stream);
        stream.synchronize();
      });
    }
  }
}

TEST_CASE_FIXTURE(Fixture, "reset() of a live Graph drops it and its owners are released later, like destruction") {
  const Table members = {
      {"reset with nothing else using the graph", [&] {
         auto log = std::make_shared<WitnessLog>();
         Graph g{ctx};
         g.edit([&](Edit& e) { e.host([w = Witness(log)] {}); });
         reset_of(g);
         CHECK_FALSE(truthy(g));
         CHECK(released());
         CHECK(log->destroyed.load() == 1);
         CHECK(log->outside_reclaimer.load() == 0);
       }},
      {"reset while an executable still uses the graph's versions", [&] {
         auto log = std::make_shared<WitnessLog>();
         Graph g{ctx};
         g.edit([&](Edit& e) { e.host([w = Witness(log)] {}); });
         GraphExec exec = g.instantiate();
         reset_of(g);
         CHECK(released());
         CHECK(log->destroyed.load() == 0);  // the executable keeps them
         exec.launch(stream);
         stream.synchronize();
         { GraphExec gone = std::move(exec); }
         CHECK(released());
         CHECK(log->destroyed.load() == 1);
         CHECK(log->outside_reclaimer.load() == 0);
       }},
      {"reset of an already empty graph", [&] {
         Graph g{ctx};
         reset_of(g);
         reset_of(g);
         CHECK_FALSE(truthy(g));
       }},
  };
  each_ok(members);
}

TEST_CASE_FIXTURE(Fixture, "every member of a moved-from or reset GraphExec throws UsageError naming GraphExec and saying moved from or empty") {
  Graph other{ctx};
  for (const auto& [state, make_empty] : moved_or_reset<GraphExec>([&other] { return other.instantiate(); })) {
    SUBCASE(state.c_str()) {
      AllKinds a = all_kinds();
      GraphExec exec = a.g.instantiate();
      expect_ok([&] { make_empty(exec); });
      SharedBuffer<float> z = buffer(8, 0.0f);
      each_throws(exec_members(exec, a, z, stream), {"GraphExec", kEmpty}, {}, state + " / ");
      const Observations observations = {
          {"operator bool is false", [&] { return !truthy(exec); }},
          {"get() is null", [&] { return exec.get() == nullptr; }},
          {"live_node_versions() is 0", [&] { return exec.live_node_versions() == 0; }},
      };
      each_holds(observations, state + " / ");
    }
  }
}

TEST_CASE_FIXTURE(Fixture, "every use of an empty Stream throws UsageError naming Stream and saying moved from or empty, never the legacy stream") {
  // Each state starts from a default-constructed Stream.
  const States<Stream> states = {
      {"default-constructed", [](Stream&) {}},
      {"moved from (construction)", [this](Stream& s) {
         s = ctx.make_stream();
         Stream sink = std::move(s);
       }},
      {"moved from (assignment)", [this](Stream& s) {
         s = ctx.make_stream();
         Stream other = ctx.make_stream();
         other = std::move(s);
       }},
      {"after reset()", [this](Stream& s) {
         s = ctx.make_stream();
         s.reset();
       }},
  };
  for (const auto& [state, make_empty] : states) {
    SUBCASE(state.c_str()) {
      AllKinds a = all_kinds();
      GraphExec exec = a.g.instantiate();
      Event ev = ctx.make_event();
      Stream s;
      make_empty(s);
      const Table members = {
          {"GraphExec::launch(s)", [&] { exec.launch(s); }},
          {"GraphExec::upload(s)", [&] { exec.upload(s); }},
          {"Graph::instantiate({.upload = &s})", [&] { (void)a.g.instantiate(InstantiateOptions{.upload = &s}); }},
          {"GraphExec::reclaim(s) before any launch", [&] { exec.reclaim(s); }},
          {"GraphExec::reclaim(s) after a launch", [&] {
             exec.launch(stream);
             stream.synchronize();
             exec.reclaim(s);
           }},
          {"Event::record(s)", [&] { ev.record(s); }},
          {"Stream::synchronize()", [&] { s.synchronize(); }},
          {"Stream::query()", [&] { (void)s.query(); }},
          {"Stream::context()", [&] { (void)s.context(); }},
          {"Stream::capturing()", [&] { (void)s.capturing(); }},
          {"Stream::launch(kernel, ...)", [&] { s.launch(k.fill, Grid{1}, Block{8}, a.x, 1.0f, 8); }},
          {"Stream::memset(dst, value)", [&] { s.memset(a.x, 1.0f); }},
          {"Stream::memcpy(dst, src)", [&] { s.memcpy(a.x, a.x); }},
          {"SharedBuffer::copy_to(span, s)", [&] {
             std::vector<float> h(1);
             a.x.copy_to(h, s);
           }},
          {"SharedBuffer::copy_from(span, s)", [&] {
             std::vector<float> h(1, 1.0f);
             a.x.copy_from(h, s);
           }},
          {"SharedBuffer::copy_to(0 elements, s)", [&] { a.x.copy_to(std::span<float>{}, s); }},
          {"Stream::host(fn)", [&] { s.host([] {}); }},
          {"Stream::record(event)", [&] { s.record(ev); }},
          {"Stream::wait(event)", [&] { s.wait(ev); }},
          {"Stream::record_external(event)", [&] { s.record_external(ev); }},
          {"Stream::wait_external(event)", [&] { s.wait_external(ev); }},
          {"Stream::alloc_async<float>(4)", [&] { (void)s.alloc_async<float>(4); }},
          {"Stream::free_async(memory)", [&] { s.free_async(unowned(a.x.data(), 8)); }},
          {"Stream::alloc_buffer<float>(4)", [&] { (void)s.alloc_buffer<float>(4); }},
          {"Capture(s)", [&] { Capture c(s); }},
          {"tether::capture(s, fn)", [&] { (void)capture(s, [] {}); }},
          {"Edit::capture(s, fn)", [&] { a.g.edit([&](Edit& e) { e.capture(s, [] {}); }); }},
      };
      each_throws(members, {"Stream", kEmpty}, {}, state + " / ");
      const Observations observations = {
          {"get() is null", [&] { return s.get() == nullptr; }},
          {"operator bool is false", [&] { return !s; }},
      };
      each_holds(observations, state + " / ");
    }
  }
}

namespace {

/// The members of buffer type B that need an allocation.
template <class B>
Table buffer_members(B& b, const Stream& stream) {
  Table t;
  if constexpr (std::is_same_v<B, SharedBuffer<float>>) {
    t.push_back({"copy_from(1 element, stream)", [&b, &stream] {
                   std::vector<float> h(1, 1.0f);
                   b.copy_from(h, stream);
                 }});
    t.push_back({"copy_from(0 elements, stream)", [&b, &stream] { b.copy_from(std::span<const float>{}, stream); }});
    t.push_back({"copy_to(1 element, stream)", [&b, &stream] {
                   std::vector<float> h(1);
                   b.copy_to(h, stream);
                 }});
    t.push_back({"copy_to(0 elements, stream)", [&b, &stream] { b.copy_to(std::span<float>{}, stream); }});
  }
  if constexpr (requires { b.copy_from(std::span<const typename B::value_type>{}); }) {
    t.push_back({"copy_from(1 element)", [&b] {
                   std::vector<float> h(1, 1.0f);
                   b.copy_from(h);
                 }});
    t.push_back({"copy_from(0 elements)", [&b] { b.copy_from(std::span<const float>{}); }});
    t.push_back({"copy_to(1 element)", [&b] {
                   std::vector<float> h(1);
                   b.copy_to(h);
                 }});
    t.push_back({"copy_to(0 elements)", [&b] { b.copy_to(std::span<float>{}); }});
    t.push_back({"fill_bytes(0)", [&b] { b.fill_bytes(0); }});
  }
  t.push_back({"context()", [&b] { (void)b.context(); }});
  return t;
}

template <class B>
Observations buffer_observations(B& b) {
  return {
      {"data() is null", [&b] { return b.data() == nullptr; }},
      {"size() is 0", [&b] { return b.size() == 0; }},
      {"bytes() is 0", [&b] { return b.bytes() == 0; }},
      {"operator bool is false", [&b] { return !b; }},
  };
}

/// Family over one buffer type: each state, each member.
/// Each state starts from a default-constructed B and `make` gives a live one.
template <class B>
void buffer_family(const std::string& type, const std::function<B()>& make, const States<B>& states,
                   const Stream& stream) {
  States<B> all = {{"default-constructed", [](B&) {}}};
  for (const auto& [state, make_empty] : states)
    all.push_back({state, [make, make_empty](B& b) {
                     b = make();
                     make_empty(b);
                   }});
  for (const auto& [state, make_empty] : all) {
    SUBCASE((type + ", " + state).c_str()) {
      B b;
      make_empty(b);
      each_throws(buffer_members(b, stream), {type, kEmpty}, {}, type + ", " + state + " / ");
      each_holds(buffer_observations(b), type + ", " + state + " / ");
    }
  }
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "every member of an empty device or pinned buffer throws UsageError naming its type and saying moved from or empty") {
  const Context c = ctx;
  buffer_family<DeviceBuffer<float>>("DeviceBuffer", [c] { return c.alloc<float>(4); },
                                     {
                                         {"moved from", [](DeviceBuffer<float>& b) { auto sink = std::move(b); }},
                                         {"shared away", [](DeviceBuffer<float>& b) { auto sink = std::move(b).share(); }},
                                         {"after reset()", [](DeviceBuffer<float>& b) { b.reset(); }},
                                         {"after release()", [c](DeviceBuffer<float>& b) {
                                            std::size_t n = b.size();
                                            CUdeviceptr p = b.release();
                                            auto adopt = DeviceBuffer<float>::from_native_handle(c, p, n);  // frees it
                                          }},
                                     },
                                     stream);
  buffer_family<PinnedBuffer<float>>("PinnedBuffer", [c] { return c.alloc_pinned<float>(4); },
                                     {
                                         {"moved from", [](PinnedBuffer<float>& b) { auto sink = std::move(b); }},
                                         {"shared away", [](PinnedBuffer<float>& b) { auto sink = std::move(b).share(); }},
                                         {"after reset()", [](PinnedBuffer<float>& b) { b.reset(); }},
                                         {"after release()", [c](PinnedBuffer<float>& b) {
                                            std::size_t n = b.size();
                                            float* p = b.release();
                                            auto adopt = PinnedBuffer<float>::from_native_handle(c, p, n);
                                          }},
                                     },
                                     stream);
  buffer_family<SharedBuffer<float>>("SharedBuffer", [c] { return c.alloc<float>(4).share(); },
                                     {
                                         {"moved from", [](SharedBuffer<float>& b) { auto sink = std::move(b); }},
                                     },
                                     stream);
  buffer_family<SharedPinnedBuffer<float>>(
      "SharedPinnedBuffer", [c] { return c.alloc_pinned<float>(4).share(); },
      {
          {"moved from", [](SharedPinnedBuffer<float>& b) { auto sink = std::move(b); }},
      },
      stream);
}

TEST_CASE_FIXTURE(Fixture, "an empty buffer as a kernel argument, memset destination or memcpy end throws UsageError saying moved from or empty") {
  AllKinds a = all_kinds();
  GraphExec exec = a.g.instantiate();
  SharedBuffer<float> live = buffer(8, 1.0f);
  SharedPinnedBuffer<float> live_pinned = ctx.alloc_pinned<float>(8).share();
  SharedBuffer<float> empty;
  SharedBuffer<float> moved = buffer(8, 1.0f);
  { SharedBuffer<float> sink = std::move(moved); }
  SharedPinnedBuffer<float> empty_pinned;
  auto empty_device = [] { return DeviceBuffer<float>{}; };
  auto empty_host = [] { return PinnedBuffer<float>{}; };
  auto in_edit = [&](auto fn) { return [&a, fn] { a.g.edit([&](Edit& e) { fn(e); }); }; };

  // Kernel arguments name the (0-based) argument.
  const Table argument0 = {
      {"launch, default SharedBuffer", in_edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{1}, empty, 1.0f, 1); })},
      {"launch, moved-from SharedBuffer", in_edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{1}, moved, 1.0f, 1); })},
      {"launch, std::move(empty DeviceBuffer)",
       in_edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{1}, empty_device(), 1.0f, 1); })},
      {"after(n).launch, default SharedBuffer",
       in_edit([&](Edit& e) { e.after(a.kernel).launch(k.fill, Grid{1}, Block{1}, empty, 1.0f, 1); })},
      {"Edit::update(kernel_node), default SharedBuffer",
       in_edit([&](Edit& e) { e.update(a.kernel, Grid{1}, Block{1}, empty, 1.0f, 1); })},
      {"Edit::update(kernel_node), std::move(empty DeviceBuffer)",
       in_edit([&](Edit& e) { e.update(a.kernel, Grid{1}, Block{1}, empty_device(), 1.0f, 1); })},
      {"GraphExec::update(kernel_node), default SharedBuffer",
       [&] { exec.update(a.kernel, Grid{1}, Block{1}, empty, 1.0f, 1); }},
      {"GraphExec::update(kernel_node), std::move(empty DeviceBuffer)",
       [&] { exec.update(a.kernel, Grid{1}, Block{1}, empty_device(), 1.0f, 1); }},
  };
  SUBCASE("kernel argument 0") { each_throws(argument0, {"argument 0", kEmpty}); }
  const Table argument1 = {
      {"launch axpy, default SharedBuffer second",
       in_edit([&](Edit& e) { e.launch(k.axpy, Grid{1}, Block{1}, live, empty, 1.0f, 1); })},
      {"launch axpy, std::move(empty DeviceBuffer) second",
       in_edit([&](Edit& e) { e.launch(k.axpy, Grid{1}, Block{1}, live, empty_device(), 1.0f, 1); })},
  };
  SUBCASE("kernel argument 1") { each_throws(argument1, {"argument 1", kEmpty}); }

  const Table memory_ends = {
      {"Edit::memset, default SharedBuffer destination", in_edit([&](Edit& e) { e.memset(empty, 1.0f); })},
      {"Edit::memset, std::move(empty DeviceBuffer) destination", in_edit([&](Edit& e) { e.memset(empty_device(), 1.0f); })},
      {"Edit::update(memset_node), default SharedBuffer", in_edit([&](Edit& e) { e.update(a.memset, empty, 1.0f); })},
      {"Edit::update(memset_node), std::move(empty DeviceBuffer)",
       in_edit([&](Edit& e) { e.update(a.memset, empty_device(), 1.0f); })},
      {"GraphExec::update(memset_node), default SharedBuffer", [&] { exec.update(a.memset, empty, 1.0f); }},
      {"GraphExec::update(memset_node), moved-from SharedBuffer", [&] { exec.update(a.memset, moved, 1.0f); }},
      {"Edit::memcpy, empty device destination", in_edit([&](Edit& e) { e.memcpy(empty, live); })},
      {"Edit::memcpy, empty device source", in_edit([&](Edit& e) { e.memcpy(live, empty); })},
      {"Edit::memcpy, std::move(empty DeviceBuffer) destination", in_edit([&](Edit& e) { e.memcpy(empty_device(), live); })},
      {"Edit::memcpy, std::move(empty DeviceBuffer) source", in_edit([&](Edit& e) { e.memcpy(live, empty_device()); })},
      {"Edit::memcpy, empty SharedPinnedBuffer destination", in_edit([&](Edit& e) { e.memcpy(empty_pinned, live); })},
      {"Edit::memcpy, empty SharedPinnedBuffer source", in_edit([&](Edit& e) { e.memcpy(live, empty_pinned); })},
      {"Edit::memcpy, std::move(empty PinnedBuffer) destination", in_edit([&](Edit& e) { e.memcpy(empty_host(), live); })},
      {"Edit::memcpy, std::move(empty PinnedBuffer) source", in_edit([&](Edit& e) { e.memcpy(live_pinned, empty_host()); })},
      {"Edit::memcpy with a count, empty source", in_edit([&](Edit& e) { e.memcpy(live, empty, 1); })},
      {"Edit::update(memcpy_node), empty destination", in_edit([&](Edit& e) { e.update(a.memcpy, empty, live); })},
      {"Edit::update(memcpy_node), empty source", in_edit([&](Edit& e) { e.update(a.memcpy, live, empty); })},
      {"Edit::update(memcpy_node), empty pinned source", in_edit([&](Edit& e) { e.update(a.memcpy, live, empty_pinned); })},
      {"GraphExec::update(memcpy_node), empty destination", [&] { exec.update(a.memcpy, empty, live); }},
      {"GraphExec::update(memcpy_node), empty source", [&] { exec.update(a.memcpy, live, empty); }},
      {"GraphExec::update(memcpy_node), std::move(empty DeviceBuffer) source",
       [&] { exec.update(a.memcpy, live, empty_device()); }},
      {"GraphExec::update(memcpy_node), empty pinned destination", [&] { exec.update(a.memcpy, empty_pinned, live); }},
  };
  SUBCASE("memset and memcpy ends") { each_throws(memory_ends, {kEmpty}); }
  CHECK(a.g.node_count() == 7);
}

TEST_CASE_FIXTURE(Fixture, "a default Owners bundle is empty and can be kept with a node") {
  Owners none;
  const Observations observations = {
      {"empty()", [&] { return none.empty(); }},
      {"size() is 0", [&] { return none.size() == 0; }},
      {"keeping(Owners{}) makes a node", [&] {
         Graph g{ctx};
         g.edit([&](Edit& e) { e.after().keeping(Owners{}).empty(); });
         return g.node_count() == 1;
       }},
      {"keeping(moved-from Owners) makes a node", [&] {
         Owners bundle{buffer(1, 0.0f)};
         Owners sink = std::move(bundle);
         Graph g{ctx};
         g.edit([&](Edit& e) { e.after().keeping(std::move(bundle)).empty(); });
         return g.node_count() == 1 && bundle.empty();
       }},
  };
  each_holds(observations);
}

TEST_CASE_FIXTURE(Fixture, "a default-constructed Node is invalid and every use throws UsageError saying valid") {
  AllKinds a = all_kinds();
  GraphExec exec = a.g.instantiate();
  Graph copy = a.g.clone();
  Node<> any;
  Node<EmptyNode> none;
  Scale kernel;
  Node<MemsetNode> memset;
  Node<MemcpyNode> memcpy;
  Node<HostNode> host;
  Node<EventRecordNode> record;
  Node<ChildNode> child;
  SharedBuffer<float> z = buffer(8, 0.0f);
  auto in_edit = [&](auto fn) { return [&a, fn] { a.g.edit([&](Edit& e) { fn(e); }); }; };
  const Observations observations = {
      {"valid() is false", [&] { return !any.valid() && !kernel.valid() && !none.valid(); }},
  };
  each_holds(observations);
  SUBCASE("get() throws UsageError") { each_throws({{"get()", [&] { (void)none.get(); }}}, {}); }
  const Table members = {
      {"Edit::after(n)", in_edit([&](Edit& e) { e.after(none).empty(); })},
      {"Edit::after(live, n)", in_edit([&](Edit& e) { e.after(a.kernel, any).empty(); })},
      {"Edit::update(kernel_node, ...)", in_edit([&](Edit& e) { e.update(kernel, Grid{1}, Block{1}, z, 1.0f, 1); })},
      {"Edit::update(memset_node, ...)", in_edit([&](Edit& e) { e.update(memset, z, 1.0f); })},
      {"Edit::update(memcpy_node, ...)", in_edit([&](Edit& e) { e.update(memcpy, z, a.x); })},
      {"Edit::update(host_node, fn)", in_edit([&](Edit& e) { e.update(host, [] {}); })},
      {"Edit::update(record_node, event)", in_edit([&](Edit& e) { e.update(record, a.ev); })},
      {"Edit::remove(n)", in_edit([&](Edit& e) { e.remove(none); })},
      {"Edit::connect(n, live)", in_edit([&](Edit& e) { e.connect(none, a.kernel); })},
      {"Edit::connect(live, n)", in_edit([&](Edit& e) { e.connect(a.kernel, none); })},
      {"Edit::disconnect(n, live)", in_edit([&](Edit& e) { e.disconnect(none, a.kernel); })},
      {"Edit::replace(child_node, g)", in_edit([&](Edit& e) { e.replace(child, a.child); })},
      {"GraphExec::update(kernel_node, ...)", [&] { exec.update(kernel, Grid{1}, Block{1}, z, 1.0f, 1); }},
      {"GraphExec::update(memset_node, ...)", [&] { exec.update(memset, z, 1.0f); }},
      {"GraphExec::update(host_node, fn)", [&] { exec.update(host, [] {}); }},
      {"GraphExec::update(child_node, g)", [&] { exec.update(child, a.child); }},
      {"GraphExec::enable(n, true)", [&] { exec.enable(kernel, true); }},
      {"GraphExec::enabled(n)", [&] { (void)exec.enabled(memset); }},
      {"Graph::find(n) on a clone", [&] { (void)copy.find(none); }},
  };
  SUBCASE("uses say valid") { each_throws(members, {"valid"}); }
  CHECK(a.g.node_count() == 7);
}

TEST_CASE_FIXTURE(Fixture, "a default GraphRef or BodyRef is invalid and every use throws UsageError") {
  Graph g{ctx};
  GraphRef view;
  BodyRef body;
  const Observations observations = {
      {"GraphRef::valid() is false", [&] { return !view.valid(); }},
      {"BodyRef::valid() is false", [&] { return !body.valid(); }},
  };
  each_holds(observations);
  const Table invalid = {
      {"GraphRef::edit()", [&] { auto e = view.edit(); }},
      {"GraphRef::edit(fn)", [&] { view.edit([](Edit&) {}); }},
      {"GraphRef::node_count()", [&] { (void)view.node_count(); }},
      {"GraphRef::get()", [&] { (void)view.get(); }},
      {"BodyRef::edit()", [&] { auto e = body.edit(); }},
      {"BodyRef::edit(fn)", [&] { body.edit([](BodyEdit&) {}); }},
      {"BodyRef::node_count()", [&] { (void)body.node_count(); }},
      {"BodyRef::get()", [&] { (void)body.get(); }},
      {"GraphRef::nodes()", [&] { (void)view.nodes(); }},
      {"GraphRef::roots()", [&] { (void)view.roots(); }},
      {"GraphRef::edges()", [&] { (void)view.edges(); }},
      {"GraphRef::child(node)", [&] { (void)view.child(Node<>{}); }},
      {"BodyRef::bodies(node)", [&] { (void)body.bodies(Node<>{}); }},
      {"tether::inspect(GraphRef{})", [&] { (void)inspect(view); }},
      {"tether::inspect(BodyRef{})", [&] { (void)inspect(body); }},
  };
  SUBCASE("members say invalid") { each_throws(invalid, {"invalid"}); }
  const Table in = {
      {"Edit::in(GraphRef{})", [&] { g.edit([&](Edit& e) { e.in(view).empty(); }); }},
      {"Edit::in(BodyRef{})", [&] { g.edit([&](Edit& e) { e.in(body).empty(); }); }},
  };
  SUBCASE("e.in(view)") { each_throws(in, {}); }
  CHECK(g.node_count() == 0);
}

TEST_CASE_FIXTURE(Fixture, "a default Condition has handle 0 and every conditional creator refuses it with UsageError naming Condition") {
  Condition c;
  CHECK(c.handle() == 0);
  Graph g{ctx};
  auto in_edit = [&](auto fn) { return [&g, fn] { g.edit([&](Edit& e) { fn(e); }); }; };
  const Table members = {
      {"if_(c)", in_edit([&](Edit& e) { e.if_(c); })},
      {"if_else(c)", in_edit([&](Edit& e) { e.if_else(c); })},
      {"while_(c)", in_edit([&](Edit& e) { e.while_(c); })},
      {"switch_(c, 2)", in_edit([&](Edit& e) { e.switch_(c, 2); })},
      {"after().if_(c)", in_edit([&](Edit& e) { e.after().if_(c); })},
  };
  each_throws(members, {"Condition"});
  CHECK(g.node_count() == 0);
}

TEST_CASE_FIXTURE(Fixture, "a default UpdateResult is a success without a node") {
  UpdateResult r{};
  CHECK(static_cast<bool>(r));
  CHECK(r.reason == UpdateResult::Reason::success);
  CHECK_FALSE(r.node.valid());
}

// Last in this file: before the fix a moved-from Kernel had a null record, and reading it crashed.
TEST_CASE_FIXTURE(Fixture, "moved-from Kernel, Event, Module, Context, Image and Runtime stay fully usable") {
  const Table members = {
      {"Kernel: name() unchanged and it still launches", [&] {
         Kernel<float*, float, int> fill = k.fill;
         Kernel<float*, float, int> sink = std::move(fill);
         CHECK(fill.name() == "fill");
         CHECK(fill == sink);
         SharedBuffer<float> x = buffer(4, 0.0f);
         Graph g{ctx};
         g.edit([&](Edit& e) { e.launch(fill, Grid{1}, Block{4}, x, 5.0f, 4); });
         g.instantiate().launch(stream);
         stream.synchronize();
         CHECK(read(x) == std::vector<float>(4, 5.0f));
       }},
      {"Kernel: move-assigned from", [&] {
         Kernel<float*, float, int> fill = k.fill;
         Kernel<float*, float, int> other = k.scale;
         other = std::move(fill);
         CHECK(fill.name() == "fill");
         CHECK(other.name() == "fill");
         CHECK(fill.module() == other.module());
       }},
      {"Event: records, synchronizes and queries", [&] {
         Event ev = ctx.make_event();
         Event sink = std::move(ev);
         ev.record(stream);
         ev.synchronize();
         CHECK(ev.query());
         CHECK(ev == sink);
         CHECK(ev.context() == ctx);
       }},
      {"Module: gives functions and kernels", [&] {
         Module m = k.fill.module();
         Module sink = std::move(m);
         CHECK(m.function("fill") != nullptr);
         CHECK(m.kernel<float*, float, int>("scale").name() == "scale");
         CHECK(m == sink);
       }},
      {"Context: makes streams and buffers", [&] {
         Context c = ctx;
         Context sink = std::move(c);
         CHECK(c == ctx);
         Stream s = c.make_stream();
         s.synchronize();
         CHECK(c.alloc<float>(1).size() == 1);
       }},
      {"Image: same bytes, still loads", [&] {
         Image img = Image::from_file(beside_executable("kernels.fatbin"));
         std::size_t size = img.size();
         Image sink = std::move(img);
         CHECK(img.size() == size);
         CHECK(img.data() != nullptr);
         Module m = ctx.load_module(img);
         CHECK(m.function("fill") != nullptr);
       }},
      {"Runtime: still opens contexts", [&] {
         Runtime r = rt;
         Runtime sink = std::move(r);
         CHECK(sink == rt);
         CHECK(r == rt);
         CHECK(r.context(0) == ctx);
         CHECK(r.device_count() >= 1);
       }},
  };
  each_ok(members);
}

TEST_CASE_FIXTURE(Fixture, "every use of an empty Capture throws UsageError naming Capture and saying moved from or empty") {
  const States<Capture> states = {
      {"default-constructed", [](Capture&) {}},
      {"moved from (construction)", [this](Capture& c) {
         c = Capture(stream);
         Capture sink = std::move(c);
       }},
      {"moved from (assignment)", [this](Capture& c) {
         Stream other_stream = ctx.make_stream();
         c = Capture(stream);
         Capture other(other_stream);
         other = std::move(c);
       }},
      {"after end()", [this](Capture& c) {
         c = Capture(stream);
         (void)c.end();
       }},
      {"after abort()", [this](Capture& c) {
         c = Capture(stream);
         c.abort();
       }},
  };
  for (const auto& [state, make_empty] : states) {
    SUBCASE(state.c_str()) {
      Capture c;
      make_empty(c);
      Stream s2 = ctx.make_stream();
      const Table members = {
          {"Capture::fork(stream)", [&] { c.fork(s2); }},
          {"Capture::join(stream)", [&] { c.join(s2); }},
          {"Capture::keeping(owners)", [&] { c.keeping(Owners{1}); }},
          {"Capture::end()", [&] { (void)c.end(); }},
          {"Capture::id()", [&] { (void)c.id(); }},
      };
      each_throws(members, {"Capture", kEmpty}, {}, state + " / ");
      const Observations observations = {
          {"operator bool is false", [&] { return !c; }},
          {"abort() does nothing", [&] {
             c.abort();
             return !c;
           }},
          {"the stream no longer captures", [&] { return !stream.capturing(); }},
      };
      each_holds(observations, state + " / ");
    }
  }
}
