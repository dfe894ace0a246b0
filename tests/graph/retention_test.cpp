// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Scenarios A (retention in a definition) and B (clones and executables keep their own versions)
// of SCENARIOS.md, through the internals: the ops insertion path and transactions build the
// graphs, executables are raw (not wrapped yet). Runs on the driver TETHER_DRIVER selects; the
// simulator's statistics (modules, events, allocations) are checked only there.
#include <doctest/doctest.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "support/owner_probe.hpp"

namespace {

using namespace tether_test;
using tether::Owners;
namespace td = tether::detail;


// A move-only host callable with captured state: adds `*step` to `*total` on every call.
struct Accumulate {
  std::unique_ptr<int> step;
  std::shared_ptr<std::atomic<int>> total;
  Probe probe;
  void operator()() const { total->fetch_add(*step); }
};
static_assert(!std::is_copy_constructible_v<Accumulate>);

// A host callable that counts its calls (and owns a probe).
struct Count {
  std::shared_ptr<std::atomic<int>> calls;
  Probe probe;
  void operator()() const { calls->fetch_add(1); }
};

NodeRecord* add_counting_host(const std::shared_ptr<Hierarchy>& h, const std::shared_ptr<Tracker>& tr,
                              const std::shared_ptr<std::atomic<int>>& calls) {
  auto c = host_callable(Count{calls, Probe(tr)});
  return edit(h, [&](Transaction& tx) {
    return td::add_host(tx, h->root(), {}, c.fn, c.data, Owners{std::move(c.owner)});
  });
}

// ------------------------------------------------------------------------------ A

TEST_CASE_FIXTURE(
    AttachEnv,
    "A1: a kernel node keeps its module and kernel alive after the user drops them, and the graph "
    "still instantiates and runs") {
  auto tr = tracker();
  const std::size_t modules0 = sim ? tether::sim::stats().modules : 0;
  tether::SharedBuffer<float> out = ctx.alloc<float>(300).share();
  zero(out);
  auto h = graph();
  {
    FillKernel k = load_fill();
    tether::Module m = k.module();
    edit(h, [&](Transaction& tx) {
      return td::add_kernel(tx, h->root(), {}, fill_call(k.function(), out.data(), 5.0f, 300),
                            Owners{std::move(k), std::move(m), Probe(tr)}, "fill");
    });
  }  // the user's Kernel and Module are gone
  if (sim) CHECK(tether::sim::stats().modules == modules0 + 1);
  CHECK(tr->destroyed_after_settle(0));
  Exec e(t, h->root().graph);
  e.run(stream);
  CHECK(all_equal(read(out), 5.0f));
  h.reset();
  e.run(stream);  // still loaded for the executable
  e.reset();
  CHECK(tr->wait_destroyed(1));
  if (sim) CHECK(wait_until([&] { return tether::sim::stats().modules == modules0; }));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "A2: buffers passed as kernel arguments are retained, the launch writes into them, and they are "
    "released after the graph and every consumer are gone") {
  auto tr = tracker();
  FillKernel k = load_fill();
  const std::size_t dev0 = sim ? tether::sim::stats().device_allocations : 0;
  tether::SharedBuffer<float> out = ctx.alloc<float>(1000).share();  // the test keeps one copy, to read
  zero(out);
  auto h = graph();
  {
    tether::DeviceBuffer<float> scratch = ctx.alloc<float>(4096);  // moved in: the graph is its only owner
    float* s = scratch.data();
    edit(h, [&](Transaction& tx) {
      NodeRecord* a = td::add_kernel(tx, h->root(), {}, fill_call(k.function(), s, 1.5f, 4096),
                                     Owners{std::move(scratch), Probe(tr)}, "fill scratch");
      NodeRecord* deps[] = {a};
      td::add_kernel(tx, h->root(), deps, fill_call(k.function(), out.data(), 2.5f, 1000),
                     Owners{out, k, Probe(tr)}, "fill out");
    });
  }
  CHECK(out.use_count() == 2);
  if (sim) CHECK(tether::sim::stats().device_allocations == dev0 + 2);
  Exec e(t, h->root().graph);
  auto clone = td::clone_hierarchy(*h, nullptr);
  h.reset();  // the definition is gone; the executable and the clone remain
  CHECK(tr->destroyed_after_settle(0));
  CHECK(out.use_count() == 2);
  e.run(stream);
  CHECK(all_equal(read(out), 2.5f));
  e.reset();
  CHECK(tr->destroyed_after_settle(0));  // the clone still holds them
  zero(out);
  {
    Exec e2(t, clone->root().graph);
    clone.reset();
    e2.run(stream);
    CHECK(all_equal(read(out), 2.5f));
    CHECK(tr->destroyed_after_settle(0));
  }  // the last consumer
  CHECK(tr->wait_destroyed(2));
  CHECK(wait_until([&] { return out.use_count() == 1; }));
  if (sim) CHECK(wait_until([&] { return tether::sim::stats().device_allocations == dev0 + 1; }));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "A3: event record and wait nodes keep their event alive, and a graph with both runs after the "
    "user dropped the event") {
  auto tr = tracker();
  const std::size_t events0 = sim ? tether::sim::stats().events : 0;
  auto h = graph();
  {
    tether::Event ev = ctx.make_event(tether::EventFlags::disable_timing);
    CUevent raw_ev = ev.get();
    edit(h, [&](Transaction& tx) {
      NodeRecord* rec = td::add_event(tx, h->root(), {}, raw_ev, true, Owners{ev, Probe(tr)});
      NodeRecord* deps[] = {rec};
      td::add_event(tx, h->root(), deps, raw_ev, false, Owners{std::move(ev), Probe(tr)});
    });
  }
  if (sim) CHECK(tether::sim::stats().events == events0 + 1);
  CHECK(tr->destroyed_after_settle(0));
  Exec e(t, h->root().graph);
  e.run(stream);
  e.run(stream);
  h.reset();
  e.run(stream);
  e.reset();
  CHECK(tr->wait_destroyed(2));
  if (sim) CHECK(wait_until([&] { return tether::sim::stats().events == events0; }));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "A4: a move-only host callable with captured state is retained and runs on every launch, not "
    "only the first") {
  auto tr = tracker();
  auto total = std::make_shared<std::atomic<int>>(0);
  auto h = graph();
  {
    auto c = host_callable(Accumulate{std::make_unique<int>(7), total, Probe(tr)});
    edit(h, [&](Transaction& tx) {
      return td::add_host(tx, h->root(), {}, c.fn, c.data, Owners{std::move(c.owner)});
    });
  }  // the user holds nothing of the callable
  CHECK(tr->destroyed_after_settle(0));
  Exec e1(t, h->root().graph);
  for (int i = 0; i < 3; ++i) e1.launch(stream);
  sync();
  CHECK(total->load() == 21);
  Exec e2(t, h->root().graph);
  h.reset();
  e2.run(stream);
  e1.run(stream);
  CHECK(total->load() == 35);
  e1.reset();
  CHECK(tr->destroyed_after_settle(0));
  e2.run(stream);
  CHECK(total->load() == 42);
  e2.reset();
  CHECK(tr->wait_destroyed(1));
  CHECK(tr->destroyed_after_settle(1));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "A5: memset and memcpy operands are retained, explicit extra owners are retained with the node, "
    "unowned pointers are not") {
  auto tr = tracker();
  const std::size_t dev0 = sim ? tether::sim::stats().device_allocations : 0;
  const std::size_t host0 = sim ? tether::sim::stats().host_allocations : 0;
  constexpr std::size_t n = 512;
  tether::SharedPinnedBuffer<float> result = ctx.alloc_pinned<float>(n).share();  // the test reads it
  tether::SharedBuffer<float> unowned = ctx.alloc<float>(n).share();
  auto h = graph();
  {
    tether::DeviceBuffer<float> dev = ctx.alloc<float>(n);
    tether::PinnedBuffer<float> staging = ctx.alloc_pinned<float>(n);
    for (float& f : staging.span()) f = 9.0f;
    CUDA_MEMSET_NODE_PARAMS ms{};
    ms.dst = dev.address();
    ms.elementSize = 4;
    ms.width = n;
    ms.height = 1;
    ms.value = std::bit_cast<std::uint32_t>(1.25f);
    CUDA_MEMSET_NODE_PARAMS ms_unowned = ms;
    ms_unowned.dst = unowned.address();
    CUDA_MEMCPY3D to_host{};
    to_host.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    to_host.srcDevice = dev.address();
    to_host.dstMemoryType = CU_MEMORYTYPE_HOST;
    to_host.dstHost = result.data();
    to_host.WidthInBytes = n * sizeof(float);
    to_host.Height = 1;
    to_host.Depth = 1;
    CUDA_MEMCPY3D from_host = to_host;  // pinned staging -> the unowned buffer
    from_host.srcMemoryType = CU_MEMORYTYPE_HOST;
    from_host.srcHost = staging.data();
    from_host.srcDevice = 0;
    from_host.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    from_host.dstDevice = unowned.address();
    from_host.dstHost = nullptr;
    const CUcontext c = ctx.get();
    edit(h, [&](Transaction& tx) {
      NodeRecord* set = td::add_memset(tx, h->root(), {}, ms, c, Owners{std::move(dev), Probe(tr)});
      NodeRecord* deps[] = {set};
      td::add_memcpy(tx, h->root(), deps, to_host, c, Owners{result, Probe(tr) /* an extra owner */});
      NodeRecord* u = td::add_memset(tx, h->root(), {}, ms_unowned, c, Owners{});  // `unowned`: not retained
      NodeRecord* udeps[] = {u};
      td::add_memcpy(tx, h->root(), udeps, from_host, c, Owners{std::move(staging)});
    });
  }
  CHECK(unowned.use_count() == 1);
  CHECK(result.use_count() == 2);
  CHECK(tr->destroyed_after_settle(0));
  Exec e(t, h->root().graph);
  e.run(stream);
  for (float f : result.span()) CHECK(f == 1.25f);
  std::vector<float> u(n);
  unowned.copy_to(u);
  CHECK(all_equal(u, 9.0f));
  // Dropping the unowned buffer frees it at once although the graph and the executable still
  // name it (neither may be launched again).
  if (sim) CHECK(tether::sim::stats().device_allocations == dev0 + 2);
  unowned = {};
  CHECK(tether::wait_reclaimed(std::chrono::milliseconds(5000)));  // frees run on the reclaimer
  if (sim) CHECK(tether::sim::stats().device_allocations == dev0 + 1);
  e.reset();
  h.reset();
  CHECK(tr->wait_destroyed(2));
  CHECK(wait_until([&] { return result.use_count() == 1; }));
  if (sim) {
    CHECK(wait_until([&] { return tether::sim::stats().device_allocations == dev0; }));
    CHECK(wait_until([&] { return tether::sim::stats().host_allocations == host0 + 1; }));
  }
}

TEST_CASE_FIXTURE(AttachEnv, "A6: destroying the graph releases every owner exactly once") {
  auto tr = tracker();
  const tether::sim::Stats before = sim ? tether::sim::stats() : tether::sim::Stats{};
  auto h = graph();
  {
    FillKernel k = load_fill();
    tether::SharedBuffer<float> buf = ctx.alloc<float>(256).share();
    tether::PinnedBuffer<float> pinned = ctx.alloc_pinned<float>(256);
    tether::Event ev = ctx.make_event();
    auto source = graph();
    edit(source, [&](Transaction& tx) { return td::add_empty(tx, source->root(), {}, Owners{Probe(tr)}); });
    CUDA_MEMSET_NODE_PARAMS ms{};
    ms.dst = buf.address();
    ms.elementSize = 1;
    ms.width = 256 * sizeof(float);
    ms.height = 1;
    CUDA_MEMCPY3D mc{};
    mc.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    mc.srcDevice = buf.address();
    mc.dstMemoryType = CU_MEMORYTYPE_HOST;
    mc.dstHost = pinned.data();
    mc.WidthInBytes = 256 * sizeof(float);
    mc.Height = 1;
    mc.Depth = 1;
    auto c = host_callable([p = Probe(tr)] {});
    NodeRecord* kernel = nullptr;
    edit(h, [&](Transaction& tx) {
      kernel = td::add_kernel(tx, h->root(), {}, fill_call(k.function(), buf.data(), 1.0f, 256),
                              Owners{k, buf, Probe(tr)}, "fill");
      td::add_host(tx, h->root(), {}, c.fn, c.data, Owners{std::move(c.owner), Probe(tr)});
      td::add_empty(tx, h->root(), {}, Owners{Probe(tr), Probe(tr), Probe(tr)});
      td::add_memset(tx, h->root(), {}, ms, ctx.get(), Owners{buf, Probe(tr)});
      td::add_memcpy(tx, h->root(), {}, mc, ctx.get(), Owners{std::move(pinned), Probe(tr)});
      NodeRecord* rec = td::add_event(tx, h->root(), {}, ev.get(), true, Owners{ev, Probe(tr)});
      NodeRecord* deps[] = {rec};
      td::add_event(tx, h->root(), deps, ev.get(), false, Owners{std::move(ev), Probe(tr)});
      td::embed(tx, h->root(), {}, *source, Owners{Probe(tr)}, nullptr);
    });
    // Superseded versions, released at commit (the graph was never launched).
    for (float v : {2.0f, 3.0f})
      edit(h, [&](Transaction& tx) {
        td::update_kernel(tx, kernel, fill_call(k.function(), buf.data(), v, 256),
                          fill_call(k.function(), buf.data(), v - 1.0f, 256), Owners{k, buf, Probe(tr)},
                          "fill");
      });
  }  // the user's handles (kernel, buffers, event, source graph) are gone
  // Only the two superseded versions are gone; the source's node lives on in the embedded copy.
  CHECK(tr->wait_destroyed(2));
  const int made = tr->made();
  CHECK(made == 14);
  CHECK(tr->destroyed_after_settle(2));
  h.reset();
  CHECK(tr->wait_destroyed(made));
  CHECK(tr->destroyed_after_settle(made));
  CHECK(tr->none_twice());
  CHECK(tr->outside_drain() == 0);
  if (sim) {
    CHECK(wait_until([&] {
      tether::sim::Stats s = tether::sim::stats();
      return s.device_allocations == before.device_allocations &&
             s.host_allocations == before.host_allocations && s.events == before.events &&
             s.modules == before.modules && s.graphs == before.graphs;
    }));
  }
}

// ------------------------------------------------------------------------------ B

TEST_CASE_FIXTURE(
    AttachEnv,
    "B1: a clone keeps every owner alive after the source graph and all user handles are gone, and "
    "the clone instantiates and runs") {
  auto tr = tracker();
  auto calls = std::make_shared<std::atomic<int>>(0);
  tether::SharedBuffer<float> out = ctx.alloc<float>(256).share();
  zero(out);
  auto h = graph();
  add_counting_host(h, tr, calls);
  {
    FillKernel k = load_fill();
    tether::DeviceBuffer<float> scratch = ctx.alloc<float>(256);
    float* s = scratch.data();
    edit(h, [&](Transaction& tx) {
      td::add_kernel(tx, h->root(), {}, fill_call(k.function(), s, 4.0f, 256),
                     Owners{std::move(scratch), k, Probe(tr)}, "fill scratch");
      td::add_kernel(tx, h->root(), {}, fill_call(k.function(), out.data(), 6.0f, 256),
                     Owners{out, Probe(tr)}, "fill out");
    });
  }
  auto clone = td::clone_hierarchy(*h, nullptr);
  h.reset();
  CHECK(tr->destroyed_after_settle(0));
  CHECK(clone->root().node_count == 3);
  {
    Exec e(t, clone->root().graph);
    clone.reset();  // the executable is now the only consumer
    e.run(stream);
    e.run(stream);
  }
  CHECK(calls->load() == 2);
  CHECK(all_equal(read(out), 6.0f));
  CHECK(tr->wait_destroyed(3));
  CHECK(tr->none_twice());
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "B2: removing a node from the source does not affect an existing executable, which runs the old "
    "version until it goes") {
  auto tr = tracker();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto h = graph();
  NodeRecord* r = add_counting_host(h, tr, calls);
  Exec e(t, h->root().graph);
  edit(h, [&](Transaction& tx) { tx.remove(r); });
  CHECK(h->root().node_count == 0);
  CHECK(driver_nodes(h->root().graph) == 0);
  CHECK(tr->destroyed_after_settle(0));
  e.run(stream);
  CHECK(calls->load() == 1);
  {
    Exec fresh(t, h->root().graph);  // a new instantiation no longer has it
    fresh.run(stream);
  }
  CHECK(calls->load() == 1);
  CHECK(tr->destroyed_after_settle(0));
  e.reset();
  CHECK(tr->wait_destroyed(1));
  h.reset();
  CHECK(tr->destroyed_after_settle(1));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "B3: removing a node from the source does not affect an existing clone, which keeps and runs "
    "the old version") {
  auto tr = tracker();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto h = graph();
  NodeRecord* r = add_counting_host(h, tr, calls);
  std::unordered_map<const NodeRecord*, NodeRecord*> map;
  auto clone = td::clone_hierarchy(*h, &map);
  REQUIRE(map.count(r) == 1);
  CHECK(map.at(r)->current == r->current);  // the same version, each graph with its own reference
  edit(h, [&](Transaction& tx) { tx.remove(r); });
  CHECK(tr->destroyed_after_settle(0));
  CHECK(clone->root().node_count == 1);
  {
    Exec e(t, clone->root().graph);
    e.run(stream);
  }
  CHECK(calls->load() == 1);
  CHECK(tr->destroyed_after_settle(0));
  clone.reset();
  CHECK(tr->wait_destroyed(1));
  h.reset();
  CHECK(tr->destroyed_after_settle(1));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "B4: two executables of one graph each retain the owners, released only after the last one is "
    "destroyed") {
  auto tr = tracker();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto h = graph();
  add_counting_host(h, tr, calls);
  Exec e1(t, h->root().graph);
  Exec e2(t, h->root().graph);
  h.reset();
  e1.run(stream);
  CHECK(tr->destroyed_after_settle(0));
  SUBCASE("the first destroyed first") {
    e1.reset();
    CHECK(tr->destroyed_after_settle(0));
    e2.run(stream);
    e2.reset();
  }
  SUBCASE("the second destroyed first") {
    e2.reset();
    CHECK(tr->destroyed_after_settle(0));
    e1.run(stream);
    e1.reset();
  }
  CHECK(tr->wait_destroyed(1));
  CHECK(calls->load() == 2);
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "B5: updating a node's parameters in the source changes only future instantiations, the old "
    "executable still runs the old version") {
  auto tr_old = tracker();
  auto tr_new = tracker();
  auto old_calls = std::make_shared<std::atomic<int>>(0);
  auto new_calls = std::make_shared<std::atomic<int>>(0);
  tether::SharedBuffer<float> out = ctx.alloc<float>(128).share();
  FillKernel k = load_fill();
  auto h = graph();
  NodeRecord* host = add_counting_host(h, tr_old, old_calls);
  NodeRecord* kern = edit(h, [&](Transaction& tx) {
    return td::add_kernel(tx, h->root(), {}, fill_call(k.function(), out.data(), 1.0f, 128),
                          Owners{k, Probe(tr_old)}, "fill");
  });
  Exec e_old(t, h->root().graph);
  {
    auto c = host_callable(Count{new_calls, Probe(tr_new)});
    edit(h, [&](Transaction& tx) {
      td::update_host(tx, host, c.fn, c.data, Owners{std::move(c.owner)});
      td::update_kernel(tx, kern, fill_call(k.function(), out.data(), 2.0f, 128),
                        fill_call(k.function(), out.data(), 1.0f, 128), Owners{k, Probe(tr_new)}, "fill");
    });
  }
  CHECK(tr_old->destroyed_after_settle(0));  // the old executable still holds them
  e_old.run(stream);
  CHECK(old_calls->load() == 1);
  CHECK(new_calls->load() == 0);
  CHECK(all_equal(read(out), 1.0f));
  Exec e_new(t, h->root().graph);
  e_new.run(stream);
  CHECK(old_calls->load() == 1);
  CHECK(new_calls->load() == 1);
  CHECK(all_equal(read(out), 2.0f));
  e_old.run(stream);
  CHECK(all_equal(read(out), 1.0f));
  e_old.reset();
  CHECK(tr_old->wait_destroyed(2));
  CHECK(tr_new->destroyed_after_settle(0));
  h.reset();
  e_new.run(stream);
  CHECK(new_calls->load() == 2);
  e_new.reset();
  CHECK(tr_new->wait_destroyed(2));
  CHECK(tr_old->none_twice());
  CHECK(tr_new->none_twice());
}

}  // namespace
