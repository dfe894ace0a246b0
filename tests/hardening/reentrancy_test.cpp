// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Re-entrancy, generated over the public API: from inside a host callable every public call that
// would reach the driver or take a tether lock throws UsageError ("host callback") before any
// driver call; dropping tether objects there is allowed and released later. From an owner's
// destructor on the reclaimer, calls succeed and do not deadlock. wait_released says when
// everything whose last consumer is gone has been released.
#include <doctest/doctest.h>

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "hardening/families.hpp"

using namespace tether;
using namespace tether_test;
using namespace hardening;

TEST_SUITE_BEGIN("hardening: re-entrancy");

namespace {

/// What one member did: "UsageError: ...", "DriverError: ...", "no exception", ...; and the
/// simulator violations it caused.
struct Outcome {
  std::string name, result;
  std::vector<std::string> violations;
};

/// Runs each member, catching everything, and records what happened (safe inside a host callable
/// and a destructor: nothing escapes).
std::vector<Outcome> run_members(const Table& table) {
  std::vector<Outcome> out;
  for (const Member& m : table) {
    std::size_t before = sim::violations().size();
    Outcome o{m.first, "no exception", {}};
    try {
      m.second();
    } catch (const Missing& e) {
      o.result = std::string("not implemented: ") + e.what();
    } catch (const UsageError& e) {
      o.result = std::string("UsageError: ") + e.what();
    } catch (const DriverError& e) {
      o.result = std::string("DriverError: ") + e.what();
    } catch (const std::exception& e) {
      o.result = std::string(typeid(e).name()) + ": " + e.what();
    } catch (...) {
      o.result = "a non-std exception";
    }
    std::vector<sim::Violation> v = sim::violations();
    for (std::size_t i = before; i < v.size(); ++i)
      o.violations.push_back(std::string(sim::to_string(v[i].kind)) + " in '" + v[i].entry_point + "'");
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "every call that reaches the driver or a tether lock throws UsageError saying host callback inside a host callable, before any driver call") {
  // Objects the callable uses: none of them belongs to the graph whose launch runs it.
  Graph other{ctx};
  Scale node;
  SharedBuffer<float> x = buffer(4, 1.0f);
  other.edit([&](Edit& e) { node = e.launch(k.fill, Grid{1}, Block{4}, x, 2.0f, 4); });
  GraphExec exec = other.instantiate();
  GraphRef view = other.ref();
  Stream s = ctx.make_stream();
  Event ev = ctx.make_event(), ev2 = ctx.make_event();
  ev.record(s);
  ev2.record(s);
  s.synchronize();
  Module m = k.fill.module();
  SharedBuffer<float> buf = buffer(4, 0.0f);
  DeviceBuffer<float> dbuf = ctx.alloc<float>(4);
  std::vector<float> host(4, 3.0f);
  const Image image = Image::from_file(beside_executable("kernels.fatbin"));
  MemPool pool = MemPool::create(ctx);
  nccl::Communicator comm = nccl::Communicator::create(ctx, nccl::UniqueId::generate(rt), 1, 0);

  const Table members = {
      {"Graph{ctx}", [&] { Graph g{ctx}; }},
      {"Graph::edit()", [&] { Edit e = other.edit(); }},
      {"Graph::edit(fn)", [&] { other.edit([](Edit&) {}); }},
      {"Graph::clone()", [&] { (void)other.clone(); }},
      {"Graph::instantiate()", [&] { (void)other.instantiate(); }},
      {"Graph::node_count()", [&] { (void)other.node_count(); }},
      {"GraphRef::edit()", [&] { auto e = view.edit(); }},
      {"GraphRef::node_count()", [&] { (void)view.node_count(); }},
      {"Graph::nodes()", [&] { (void)other.nodes(); }},
      {"Graph::roots()", [&] { (void)other.roots(); }},
      {"Graph::edges()", [&] { (void)other.edges(); }},
      {"GraphRef::nodes()", [&] { (void)view.nodes(); }},
      {"GraphRef::edges()", [&] { (void)view.edges(); }},
      {"Graph::adopt(ctx, graph)", [&] { (void)Graph::adopt(ctx, other.get()); }},
      {"tether::inspect(graph)", [&] { (void)inspect(other); }},
      {"tether::inspect(view)", [&] { (void)inspect(view); }},
      {"tether::inspect(exec)", [&] { (void)inspect(exec); }},
      {"tether::to_dot(graph)", [&] { (void)to_dot(other); }},
      {"tether::to_dot(exec)", [&] { (void)to_dot(exec); }},
      {"tether::debug_dot_print(graph, path)", [&] { debug_dot_print(other, "/tmp/tether_never_written.dot"); }},
      {"GraphExec::launch(s)", [&] { exec.launch(s); }},
      {"GraphExec::upload(s)", [&] { exec.upload(s); }},
      {"GraphExec::update(graph)", [&] { (void)exec.update(other); }},
      {"GraphExec::plan_update(graph)", [&] { (void)exec.plan_update(other); }},
      {"GraphExec::update_or_reinstantiate(graph)", [&] { (void)exec.update_or_reinstantiate(other); }},
      {"GraphExec::update(kernel_node, ...)", [&] { exec.update(node, Grid{1}, Block{4}, x, 3.0f, 4); }},
      {"GraphExec::enable(node, true)", [&] { exec.enable(node, true); }},
      {"GraphExec::enabled(node)", [&] { (void)exec.enabled(node); }},
      {"GraphExec::reclaim(s)", [&] { exec.reclaim(s); }},
      {"Context::make_stream()", [&] { (void)ctx.make_stream(); }},
      {"Context::make_event()", [&] { (void)ctx.make_event(); }},
      {"Context::load_module(image)", [&] { (void)ctx.load_module(image); }},
      {"Context::alloc<float>(1)", [&] { (void)ctx.alloc<float>(1); }},
      {"Context::alloc_pinned<float>(1)", [&] { (void)ctx.alloc_pinned<float>(1); }},
      {"Context::synchronize()", [&] { ctx.synchronize(); }},
      {"Context::make_current()", [&] { ctx.make_current(); }},
      {"Runtime::context(0)", [&] { (void)rt.context(0); }},
      {"Stream::synchronize()", [&] { s.synchronize(); }},
      {"Stream::query()", [&] { (void)s.query(); }},
      {"Stream::capturing()", [&] { (void)s.capturing(); }},
      {"Stream::launch(kernel, ...)", [&] { s.launch(k.fill, Grid{1}, Block{4}, x, 1.0f, 4); }},
      {"Stream::memset(dst, value)", [&] { s.memset(x, 1.0f); }},
      {"Stream::memcpy(dst, src)", [&] { s.memcpy(buf, x); }},
      {"Stream::host(fn)", [&] { s.host([] {}); }},
      {"Stream::record(event)", [&] { s.record(ev); }},
      {"Stream::wait(event)", [&] { s.wait(ev); }},
      {"Stream::record_external(event)", [&] { s.record_external(ev); }},
      {"Stream::wait_external(event)", [&] { s.wait_external(ev); }},
      {"Stream::alloc_async<float>(4)", [&] { (void)s.alloc_async<float>(4); }},
      {"Stream::free_async(memory)", [&] { s.free_async(unowned(x.data(), 4)); }},
      {"Stream::alloc_buffer<float>(4)", [&] { (void)s.alloc_buffer<float>(4); }},
      {"Stream::alloc_buffer<float>(4, pool)", [&] { (void)s.alloc_buffer<float>(4, pool); }},
      {"MemPool::create(ctx)", [&] { (void)MemPool::create(ctx); }},
      {"MemPool::device_default(ctx)", [&] { (void)MemPool::device_default(ctx); }},
      {"MemPool::release_threshold()", [&] { (void)pool.release_threshold(); }},
      {"MemPool::set_release_threshold(bytes)", [&] { pool.set_release_threshold(0); }},
      {"MemPool::trim_to(bytes)", [&] { pool.trim_to(0); }},
      {"MemPool::used_bytes()", [&] { (void)pool.used_bytes(); }},
      {"MemPool::reserved_bytes()", [&] { (void)pool.reserved_bytes(); }},
      {"MemPool::reset_peaks()", [&] { pool.reset_peaks(); }},
      {"Capture(s)", [&] { Capture c(s); }},
      {"tether::capture(s, fn)", [&] { (void)capture(s, [] {}); }},
      {"Event::record(s)", [&] { ev.record(s); }},
      {"Event::synchronize()", [&] { ev.synchronize(); }},
      {"Event::query()", [&] { (void)ev.query(); }},
      {"Event::elapsed_ms(a, b)", [&] { (void)Event::elapsed_ms(ev, ev2); }},
      {"Module::function(name)", [&] { (void)m.function("fill"); }},
      {"Module::kernel<...>(name)", [&] { (void)m.kernel<float*, float, int>("scale"); }},
      {"SharedBuffer::copy_from", [&] { buf.copy_from(host); }},
      {"SharedBuffer::copy_to", [&] { buf.copy_to(host); }},
      {"SharedBuffer::fill_bytes", [&] { buf.fill_bytes(0); }},
      {"DeviceBuffer::copy_from", [&] { dbuf.copy_from(host); }},
      {"DeviceBuffer::copy_to", [&] { dbuf.copy_to(host); }},
      {"DeviceBuffer::fill_bytes", [&] { dbuf.fill_bytes(0); }},
      {"tether::wait_released(ctx, timeout)", [&] { (void)wait_released_of(ctx, 100ms); }},
      {"nccl::UniqueId::generate(rt)", [&] { (void)nccl::UniqueId::generate(rt); }},
      {"nccl::Communicator::create", [&] { (void)nccl::Communicator::create(ctx, nccl::UniqueId{}, 1, 0); }},
      {"nccl::Communicator::create_all", [&] { (void)nccl::Communicator::create_all(std::vector<Context>{ctx}); }},
      {"Communicator::all_reduce", [&] { (void)comm.all_reduce(s, buf, buf); }},
      {"Communicator::send", [&] { (void)comm.send(s, buf, 0); }},
      {"Communicator::async_error", [&] { (void)comm.async_error(); }},
      {"Communicator::register_buffer", [&] { (void)comm.register_buffer(buf); }},
      {"nccl::alloc<float>(ctx, n)", [&] { (void)nccl::alloc<float>(ctx, 4); }},
  };

  auto outcomes = std::make_shared<std::vector<Outcome>>();
  Graph g{ctx};
  g.edit([&](Edit& e) { e.host([&members, outcomes] { *outcomes = run_members(members); }); });
  g.instantiate().launch(stream);
  stream.synchronize();

  REQUIRE(outcomes->size() == members.size());
  for (const Outcome& o : *outcomes) {
    SUBCASE(o.name.c_str()) {
      INFO("member: " << o.name << " -> " << o.result);
      CHECK_MESSAGE(o.result.starts_with("UsageError: "), "expected UsageError, got " << o.result);
      CHECK_MESSAGE(contains(o.result, "host callback"), "\"" << o.result << "\" does not contain \"host callback\"");
      for (const std::string& v : o.violations) FAIL_CHECK("reached the driver: " << v);
    }
  }
  sim::clear_violations();
}

namespace {

/// Holds `T` and drops it when the host callable runs.
template <class T>
struct DropInside {
  std::shared_ptr<std::optional<T>> held;
  std::shared_ptr<std::string> error;
  void operator()() const {
    try {
      held->reset();
    } catch (const std::exception& e) {
      *error = e.what();
    }
  }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "dropping tether objects inside a host callable is allowed and their owners are released later") {
  auto run_host = [&](auto callable) {
    Graph g{ctx};
    g.edit([&](Edit& e) { e.host(std::move(callable)); });
    g.instantiate().launch(stream);
    stream.synchronize();
  };
  auto graph_with_witness = [&](std::shared_ptr<WitnessLog> log) {
    Graph inner{ctx};
    inner.edit([&](Edit& e) { e.host([w = Witness(log)] {}); });
    return inner;
  };
  const Table members = {
      {"a SharedBuffer", [&] {
         std::size_t before = sim::stats().device_allocations;
         auto error = std::make_shared<std::string>();
         auto held = std::make_shared<std::optional<SharedBuffer<float>>>(ctx.alloc<float>(4).share());
         if (simulated) CHECK(sim::stats().device_allocations == before + 1);
         run_host(DropInside<SharedBuffer<float>>{held, error});
         CHECK(error->empty());
         CHECK(released());
         if (simulated) CHECK(eventually([&] { return sim::stats().device_allocations == before; }));
       }},
      {"a Graph whose node keeps an owner", [&] {
         auto log = std::make_shared<WitnessLog>();
         auto error = std::make_shared<std::string>();
         auto held = std::make_shared<std::optional<Graph>>(graph_with_witness(log));
         run_host(DropInside<Graph>{held, error});
         CHECK(error->empty());
         CHECK(released());
         CHECK(log->destroyed.load() == 1);
         CHECK(log->outside_reclaimer.load() == 0);
       }},
      {"a Graph reset inside", [&] {
         auto log = std::make_shared<WitnessLog>();
         auto error = std::make_shared<std::string>();
         auto held = std::make_shared<Graph>(graph_with_witness(log));
         run_host([held, error] {
           try {
             reset_of(*held);
           } catch (const std::exception& e) {
             *error = e.what();
           }
         });
         CHECK_MESSAGE(error->empty(), *error);
         CHECK(released());
         CHECK(log->destroyed.load() == 1);
       }},
      {"a GraphExec (its graph already gone)", [&] {
         auto log = std::make_shared<WitnessLog>();
         auto error = std::make_shared<std::string>();
         std::shared_ptr<std::optional<GraphExec>> held;
         {
           Graph inner = graph_with_witness(log);
           held = std::make_shared<std::optional<GraphExec>>(inner.instantiate());
         }
         run_host(DropInside<GraphExec>{held, error});
         CHECK(error->empty());
         CHECK(released());
         CHECK(log->destroyed.load() == 1);
         CHECK(log->outside_reclaimer.load() == 0);
       }},
      {"a GraphExec reset inside", [&] {
         auto log = std::make_shared<WitnessLog>();
         auto error = std::make_shared<std::string>();
         std::shared_ptr<GraphExec> held;
         {
           Graph inner = graph_with_witness(log);
           held = std::make_shared<GraphExec>(inner.instantiate());
         }
         run_host([held, error] {
           try {
             reset_of(*held);
           } catch (const std::exception& e) {
             *error = e.what();
           }
         });
         CHECK_MESSAGE(error->empty(), *error);
         CHECK(released());
         CHECK(log->destroyed.load() == 1);
       }},
      {"a Stream and an Event", [&] {
         std::size_t streams = sim::stats().streams, events = sim::stats().events;
         auto error = std::make_shared<std::string>();
         auto s = std::make_shared<std::optional<Stream>>(ctx.make_stream());
         auto ev = std::make_shared<std::optional<Event>>(ctx.make_event());
         run_host([s, ev, error] {
           try {
             s->reset();
             ev->reset();
           } catch (const std::exception& e) {
             *error = e.what();
           }
         });
         CHECK(error->empty());
         CHECK(released());
         CHECK(eventually([&] { return sim::stats().streams == streams && sim::stats().events == events; }));
       }},
      {"tether::reclaim() inside returns 0", [&] {
         auto result = std::make_shared<std::size_t>(12345);
         run_host([result] { *result = tether::reclaim(); });
         CHECK(*result == 0);
       }},
  };
  each_ok(members);
}

namespace {

/// An owner whose destructor runs `members` (on the reclaimer, when the node version holding it
/// is released) and records what they did.
struct RunsOnRelease {
  std::shared_ptr<const Table> members;
  std::shared_ptr<std::vector<Outcome>> outcomes;
  std::shared_ptr<std::atomic<bool>> on_reclaimer;
  RunsOnRelease(std::shared_ptr<const Table> m, std::shared_ptr<std::vector<Outcome>> o,
                std::shared_ptr<std::atomic<bool>> r)
      : members(std::move(m)), outcomes(std::move(o)), on_reclaimer(std::move(r)) {}
  RunsOnRelease(RunsOnRelease&& other) noexcept = default;
  ~RunsOnRelease() {
    if (!members) return;  // moved from
    on_reclaimer->store(detail::on_reclaimer_thread());
    *outcomes = run_members(*members);
  }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "calls from an owner's destructor on the reclaimer succeed and do not deadlock") {
  auto log = std::make_shared<WitnessLog>();
  const Context c = ctx;
  const auto kfill = k.fill;
  auto dropped = std::make_shared<std::optional<SharedBuffer<float>>>(c.alloc<float>(4).share());
  auto members = std::make_shared<const Table>(Table{
      {"Graph{ctx}", [c] { Graph g{c}; }},
      {"edit and commit", [c, kfill] {
         Graph g{c};
         SharedBuffer<float> x = c.alloc<float>(4).share();
         Edit e = g.edit();
         e.launch(kfill, Grid{1}, Block{4}, x, 1.0f, 4);
         e.commit();
         CHECK(g.node_count() == 1);
       }},
      {"instantiate, launch and synchronize", [c, kfill] {
         Graph g{c};
         SharedBuffer<float> x = c.alloc<float>(4).share();
         g.edit([&](Edit& e) { e.launch(kfill, Grid{1}, Block{4}, x, 6.0f, 4); });
         Stream s = c.make_stream();
         GraphExec exec = g.instantiate();
         exec.launch(s);
         s.synchronize();
         std::vector<float> h(4);
         x.copy_to(h);
         CHECK(h == std::vector<float>(4, 6.0f));
       }},
      {"alloc and copy", [c] {
         DeviceBuffer<float> b = c.alloc<float>(2);
         b.copy_from(std::vector<float>{1, 2});
       }},
      {"drop a graph whose node keeps an owner", [c, log] {
         Graph g{c};
         g.edit([&](Edit& e) { e.host([w = Witness(log)] {}); });
       }},
      {"drop a buffer", [dropped] { dropped->reset(); }},
  });
  auto outcomes = std::make_shared<std::vector<Outcome>>();
  auto on_reclaimer = std::make_shared<std::atomic<bool>>(false);
  {
    Graph g{ctx};
    g.edit([&](Edit& e) { e.after().keeping(Owners{RunsOnRelease(members, outcomes, on_reclaimer)}).empty(); });
  }
  CHECK(released(5s));
  CHECK(eventually([&] { return outcomes->size() == members->size(); }, 10s));
  CHECK(released(5s));
  CHECK(on_reclaimer->load());
  REQUIRE(outcomes->size() == members->size());
  for (const Outcome& o : *outcomes) {
    SUBCASE(o.name.c_str()) {
      INFO("member: " << o.name);
      CHECK_MESSAGE(o.result == "no exception", o.result);
      for (const std::string& v : o.violations) FAIL_CHECK("simulator violation: " << v);
    }
  }
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
  sim::clear_violations();
}

TEST_CASE_FIXTURE(Fixture, "wait_released returns true once everything whose last consumer is gone has been released") {
  const Table members = {
      {"nothing pending", [&] { CHECK(wait_released_of(ctx, 1s)); }},
      {"a dropped graph's owners", [&] {
         auto log = std::make_shared<WitnessLog>();
         {
           Graph g{ctx};
           g.edit([&](Edit& e) { e.host([w = Witness(log)] {}); });
         }
         CHECK(wait_released_of(ctx, 5s));
         CHECK(log->destroyed.load() == 1);
       }},
      {"owners an executable still uses are not waited for", [&] {
         auto log = std::make_shared<WitnessLog>();
         std::optional<GraphExec> exec;
         {
           Graph g{ctx};
           g.edit([&](Edit& e) { e.host([w = Witness(log)] {}); });
           exec.emplace(g.instantiate());
         }
         CHECK(wait_released_of(ctx, 1s));
         CHECK(log->destroyed.load() == 0);
         exec.reset();
         CHECK(wait_released_of(ctx, 5s));
         CHECK(log->destroyed.load() == 1);
       }},
      {"after a launch completes and its executable is gone", [&] {
         auto log = std::make_shared<WitnessLog>();
         {
           Graph g{ctx};
           g.edit([&](Edit& e) { e.host([w = Witness(log)] {}); });
           g.instantiate().launch(stream);
         }
         stream.synchronize();
         CHECK(wait_released_of(ctx, 5s));
         CHECK(log->destroyed.load() == 1);
       }},
  };
  each_ok(members);
}
