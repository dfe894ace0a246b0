// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The attachment core (src/attach) as the transaction engine uses it: invariants 1-4 (immutable
// versions, non-owning metadata, publish before release, fallible work before the driver
// mutation), 9 (user-object destructors only enqueue), 11-14 (the executable accumulator) and the
// deferred-cleanup scenarios H1-H3. Runs on the driver TETHER_DRIVER selects; fault injection, call
// counts and violations are simulator-only and guarded by `sim`.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/owner_probe.hpp"

extern char** environ;

namespace {

using namespace tether_test;
using tether::Owners;
namespace td = tether::detail;

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// ------------------------------------------------------------------------------ invariant 1

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 1: a published attachment is never modified: an update publishes a new attachment "
    "and the old one keeps its owners for the executable that uses it") {
  auto tr = tracker();
  std::atomic<int> ran1{0}, ran2{0}, ran3{0};
  auto h = graph();
  auto c1 = host_callable([&ran1, p = Probe(tr)] { ran1.fetch_add(1); });
  NodeRecord* r = edit(h, [&](Transaction& tx) {
    return td::add_host(tx, h->root(), {}, c1.fn, c1.data, Owners{std::move(c1.owner), Probe(tr)});
  });
  NodeAttachment* a1 = r->current;
  REQUIRE(a1 != nullptr);
  const CUuserObject uo1 = a1->user_object();
  CHECK(a1->owner_count() == 2);

  Exec e1(t, h->root().graph);  // holds version 1

  auto c2 = host_callable([&ran2] { ran2.fetch_add(1); });
  edit(h, [&](Transaction& tx) {
    td::update_host(tx, r, c2.fn, c2.data, Owners{std::move(c2.owner), Probe(tr), Probe(tr)});
  });
  NodeAttachment* a2 = r->current;
  REQUIRE(a2 != nullptr);
  CHECK(a2 != a1);
  CHECK(a2->owner_count() == 3);
  // Version 1 is released by the graph but kept by e1: untouched, owners alive.
  CHECK(tr->destroyed_after_settle(0));
  CHECK(a1->owner_count() == 2);
  CHECK(a1->user_object() == uo1);

  if (sim) {
    // A refused update builds (and drops) a third attachment; the published one stays as it was.
    tether::sim::fail_call("cuGraphNodeSetParams", 1);
    auto c3 = host_callable([&ran3] { ran3.fetch_add(1); });
    CHECK_THROWS_AS(edit(h,
                         [&](Transaction& tx) {
                           td::update_host(tx, r, c3.fn, c3.data, Owners{std::move(c3.owner), Probe(tr)});
                         }),
                    tether::DriverError);
    CHECK(r->current == a2);
    CHECK(a2->owner_count() == 3);
    CHECK(tr->wait_destroyed(1));  // only the refused version's probe
    CHECK(tr->destroyed_after_settle(1));
  }
  const int refused = sim ? 1 : 0;

  e1.run(stream);
  CHECK(ran1.load() == 1);
  CHECK(ran2.load() == 0);
  Exec e2(t, h->root().graph);
  e2.run(stream);
  CHECK(ran1.load() == 1);
  CHECK(ran2.load() == 1);
  CHECK(ran3.load() == 0);

  e1.reset();  // the last consumer of version 1
  CHECK(tr->wait_destroyed(refused + 2));
  CHECK(tr->destroyed_after_settle(refused + 2));
  CHECK(r->current == a2);
  e2.reset();
  h.reset();
  CHECK(tr->wait_destroyed(refused + 4));
  CHECK(tr->destroyed_after_settle(refused + 4));
  CHECK(tr->none_twice());
}

// ------------------------------------------------------------------------------ invariant 2

TEST_CASE_FIXTURE(AttachEnv,
                  "invariant 2: only user-object references own attachments, metadata never owns") {
  // Metadata is plain data: destroying it can release nothing.
  static_assert(std::is_same_v<decltype(NodeRecord::current), NodeAttachment*>);
  static_assert(std::is_trivially_destructible_v<NodeRecord>);
  static_assert(std::is_trivially_destructible_v<Box>);

  SUBCASE("an executable keeps an attachment after every piece of metadata describing it is gone") {
    auto tr = tracker();
    auto h = graph();
    edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{Probe(tr)}); });
    Exec e(t, h->root().graph);
    h.reset();  // the hierarchy, its boxes and records are destroyed
    CHECK(tr->destroyed_after_settle(0));
    e.run(stream);
    e.reset();
    CHECK(tr->wait_destroyed(1));
  }

  SUBCASE(
      "releasing the graph's reference destroys the attachment although the metadata still points at it") {
    auto tr = tracker();
    auto h = graph();
    NodeRecord* r =
        edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{Probe(tr)}); });
    NodeAttachment* a = r->current;
    REQUIRE(a != nullptr);
    // Bypass tether: drop the one reference the graph holds.
    REQUIRE(raw<Entry::cuGraphReleaseUserObject>(t, h->root().graph, a->user_object(), 1u) == CUDA_SUCCESS);
    CHECK(tr->wait_destroyed(1));
    CHECK(r->current == a);  // the record did not keep it alive
    CHECK(r->alive);
    // Destroying the graph releases nothing more (no over-release on the simulator).
    h.reset();
    CHECK(tr->destroyed_after_settle(1));
  }
}

// ------------------------------------------------------------------------------ invariant 3

namespace inv3 {
std::atomic<NodeAttachment*> watch{nullptr};
std::atomic<NodeRecord*> record{nullptr};
std::atomic<NodeAttachment*> seen_current{nullptr};
std::atomic<bool> seen_alive{true};
std::atomic<std::uint32_t> seen_generation{0};
std::atomic<bool> seen_inside_call{false};
std::atomic<int> hits{0};
std::atomic<std::thread::id> seen_thread{};

void hook(NodeAttachment* a) {
  if (a != watch.load()) return;
  NodeRecord* r = record.load();
  seen_current.store(r->current);
  seen_alive.store(r->alive);
  seen_generation.store(r->generation.load());
  seen_inside_call.store(t_in_driver_call > 0);
  seen_thread.store(std::this_thread::get_id());
  hits.fetch_add(1);
}

bool wait_hits(int n) {
  return wait_until([n] { return hits.load() >= n; });
}
}  // namespace inv3

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 3: metadata is updated before the reference it describes is released (update and "
    "removal)") {
  DestroyHook hook(&inv3::hook);
  inv3::hits.store(0);
  auto tr = tracker();
  auto h = graph(&watched_table());
  FillKernel k = load_fill();
  tether::SharedBuffer<float> buf = ctx.alloc<float>(64).share();

  NodeRecord* r = edit(h, [&](Transaction& tx) {
    return td::add_kernel(tx, h->root(), {}, fill_call(k.function(), buf.data(), 1.0f, 64),
                          Owners{k, buf, Probe(tr)}, "fill");
  });
  NodeAttachment* a1 = r->current;
  REQUIRE(a1 != nullptr);
  inv3::record.store(r);
  inv3::watch.store(a1);

  // Update: the superseded version's destructor runs synchronously inside the release (never
  // launched graph); by then the record already describes the new version.
  NodeAttachment* a2 = nullptr;
  edit(h, [&](Transaction& tx) {
    td::update_kernel(tx, r, fill_call(k.function(), buf.data(), 2.0f, 64),
                      fill_call(k.function(), buf.data(), 1.0f, 64), Owners{k, buf, Probe(tr)}, "fill");
  });
  a2 = r->current;
  REQUIRE(inv3::wait_hits(1));
  CHECK(a2 != a1);
  CHECK(inv3::seen_current.load() == a2);
  CHECK(inv3::seen_alive.load());
  if (sim) {
    CHECK(inv3::seen_inside_call.load());  // it ran inside the driver call, on this thread
    CHECK(inv3::seen_thread.load() == main_tid);
  }
  CHECK(tr->wait_destroyed(1));

  // Removal: by the time the last version is released, the record is retired (handles invalid).
  const NodeRef before = ref_of(h, r);
  inv3::watch.store(a2);
  edit(h, [&](Transaction& tx) { tx.remove(r); });
  REQUIRE(inv3::wait_hits(2));
  CHECK_FALSE(inv3::seen_alive.load());
  CHECK(inv3::seen_current.load() == nullptr);
  CHECK(inv3::seen_generation.load() != before.generation);
  CHECK_FALSE(before.valid());
  CHECK(tr->wait_destroyed(2));
  inv3::watch.store(nullptr);
  h.reset();
}

TEST_CASE_FIXTURE(AttachEnv,
                  "invariant 3: an update to a version without owners still releases the previous version at "
                  "commit") {
  auto tr = tracker();
  auto h = graph();
  std::atomic<int> ran{0};
  auto c1 = host_callable([&ran, p = Probe(tr)] { ran.fetch_add(1); });
  NodeRecord* r = edit(h, [&](Transaction& tx) {
    return td::add_host(tx, h->root(), {}, c1.fn, c1.data, Owners{std::move(c1.owner)});
  });
  // The new version needs nothing kept alive (a plain function).
  edit(h, [&](Transaction& tx) { td::update_host(tx, r, &host_nothing, nullptr, Owners{}); });
  CHECK(r->current == nullptr);
  CHECK(tr->wait_destroyed(1));  // released at commit, not only when the graph dies
  for (const std::string& rep : take_reports()) FAIL_CHECK("error report: " << rep);
  h.reset();
}

// ------------------------------------------------------------------------------ invariant 4

// One node kind of the raw insertion path, for the fault-injection sweep.
struct KindCase {
  const char* name;
  const char* add_entry;  // the entry point that adds the node (the driver mutation)
  std::function<NodeRecord*(Transaction&, Owners&&)> add;
};

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 4: all fallible setup happens before the driver mutation, a failed prepare adds no "
    "node and leaks nothing, for every node kind") {
  if (!sim) {
    MESSAGE("fault injection needs the simulator");
    return;
  }
  auto h = graph();
  FillKernel k = load_fill();
  tether::SharedBuffer<float> dev = ctx.alloc<float>(256).share();
  tether::PinnedBuffer<float> pinned = ctx.alloc_pinned<float>(256);
  tether::Event ev = ctx.make_event();
  auto source = graph();
  edit(source, [&](Transaction& tx) { return td::add_empty(tx, source->root(), {}, Owners{}); });

  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = dev.address();
  ms.elementSize = 4;
  ms.width = 256;
  ms.height = 1;
  ms.value = 0;
  CUDA_MEMCPY3D mc{};
  mc.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  mc.srcDevice = dev.address();
  mc.dstMemoryType = CU_MEMORYTYPE_HOST;
  mc.dstHost = pinned.data();
  mc.WidthInBytes = 256 * sizeof(float);
  mc.Height = 1;
  mc.Depth = 1;
  const CUcontext c = ctx.get();

  std::vector<KindCase> kinds = {
      {"kernel", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) {
         return td::add_kernel(tx, h->root(), {}, fill_call(k.function(), dev.data(), 1.0f, 256),
                               std::move(o), "fill");
       }},
      {"empty", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) { return td::add_empty(tx, h->root(), {}, std::move(o)); }},
      {"host", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) {
         return td::add_host(tx, h->root(), {}, &host_nothing, nullptr, std::move(o));
       }},
      {"memset", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) { return td::add_memset(tx, h->root(), {}, ms, c, std::move(o)); }},
      {"memcpy", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) { return td::add_memcpy(tx, h->root(), {}, mc, c, std::move(o)); }},
      {"event record", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) {
         return td::add_event(tx, h->root(), {}, ev.get(), true, std::move(o));
       }},
      {"event wait", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) {
         return td::add_event(tx, h->root(), {}, ev.get(), false, std::move(o));
       }},
      {"child graph", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) {
         return td::embed(tx, h->root(), {}, *source, std::move(o), nullptr);
       }},
      {"conditional", "cuGraphAddNode",
       [&](Transaction& tx, Owners&& o) {
         CUgraphConditionalHandle ch = td::make_conditional_handle(tx, h->root(), c, 1, true);
         return td::add_conditional(tx, h->root(), {}, ch, CU_GRAPH_COND_TYPE_IF, 1, c, std::move(o),
                                    nullptr);
       }},
  };

  const std::size_t boxes = h->boxes.size();
  for (const KindCase& kc : kinds) {
    for (const char* fault : {"cuUserObjectCreate", "cuGraphRetainUserObject"}) {
      CAPTURE(kc.name);
      CAPTURE(fault);
      auto tr = tracker();
      const std::uint64_t live0 = NodeAttachment::live();
      const std::uint64_t adds0 = tether::sim::call_count(kc.add_entry);
      tether::sim::fail_call(fault, 1);
      {
        Transaction tx(h);
        std::string entry;
        try {
          kc.add(tx, Owners{Probe(tr), Probe(tr)});
        } catch (const tether::DriverError& e) {
          entry = std::string(e.entry_point());
        }
        CHECK(entry == fault);
        tx.commit();
      }
      CHECK(tether::sim::call_count(kc.add_entry) == adds0);  // the mutation was never attempted
      CHECK(tr->wait_destroyed(2));
      CHECK(tr->destroyed_after_settle(2));  // each owner exactly once
      CHECK(tr->none_twice());
      CHECK(tr->outside_drain() == 0);  // on the reclaimer, even without a user object
      CHECK(wait_attachments(live0, acc_before));
      CHECK(h->root().node_count == 0);
      CHECK(driver_nodes(h->root().graph) == 0);
      CHECK(h->boxes.size() == boxes);
    }
    // The driver mutation itself refused: the staged reference is rolled back, the owners die once.
    CAPTURE(kc.name);
    auto tr = tracker();
    const std::uint64_t live0 = NodeAttachment::live();
    tether::sim::fail_call(kc.add_entry, 1);
    {
      Transaction tx(h);
      CHECK_THROWS_AS(kc.add(tx, Owners{Probe(tr)}), tether::DriverError);
      tx.commit();
    }
    CHECK(tr->wait_destroyed(1));
    CHECK(tr->destroyed_after_settle(1));
    CHECK(tr->outside_drain() == 0);
    CHECK(wait_attachments(live0, acc_before));
    CHECK(h->root().node_count == 0);
  }
  CHECK(tether::detail::Registry::instance().size() == registry_before + 2);
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 4: a failed prepare of an update never calls the driver's set-params and leaves the "
    "current version in place") {
  if (!sim) {
    MESSAGE("fault injection needs the simulator");
    return;
  }
  auto tr = tracker();
  auto h = graph();
  FillKernel k = load_fill();
  tether::SharedBuffer<float> buf = ctx.alloc<float>(64).share();
  NodeRecord* r = edit(h, [&](Transaction& tx) {
    return td::add_kernel(tx, h->root(), {}, fill_call(k.function(), buf.data(), 1.0f, 64), Owners{Probe(tr)},
                          "fill");
  });
  NodeAttachment* a1 = r->current;
  for (const char* fault : {"cuUserObjectCreate", "cuGraphRetainUserObject"}) {
    CAPTURE(fault);
    const int dead = tr->destroyed();
    const std::uint64_t sets0 = tether::sim::call_count("cuGraphNodeSetParams");
    tether::sim::fail_call(fault, 1);
    CHECK_THROWS_AS(edit(h,
                         [&](Transaction& tx) {
                           td::update_kernel(tx, r, fill_call(k.function(), buf.data(), 2.0f, 64),
                                             fill_call(k.function(), buf.data(), 1.0f, 64), Owners{Probe(tr)},
                                             "fill");
                         }),
                    tether::DriverError);
    CHECK(tether::sim::call_count("cuGraphNodeSetParams") == sets0);
    CHECK(tr->wait_destroyed(dead + 1));  // the new version's owner, once
    CHECK(r->current == a1);
    CHECK(tr->destroyed_after_settle(dead + 1));  // the current version's owner is alive
  }
  h.reset();
  CHECK(tr->wait_destroyed(3));
  CHECK(tr->none_twice());
}

// ------------------------------------------------------------------------------ invariant 9

namespace inv9 {
std::atomic<int> runs{0};
std::atomic<int> inside_call{0};
std::array<std::atomic<std::thread::id>, 256> threads{};

void hook(NodeAttachment*) {
  int i = runs.fetch_add(1);
  if (i < static_cast<int>(threads.size()))
    threads[static_cast<std::size_t>(i)].store(std::this_thread::get_id());
  if (t_in_driver_call > 0) inside_call.fetch_add(1);
}

std::vector<std::thread::id> hook_threads() {
  std::vector<std::thread::id> v;
  int n = std::min(runs.load(), static_cast<int>(threads.size()));
  for (int i = 0; i < n; ++i) v.push_back(threads[static_cast<std::size_t>(i)].load());
  return v;
}
}  // namespace inv9

TEST_CASE_FIXTURE(AttachEnv,
                  "invariant 9: user-object destructors only enqueue, owners die on the reclaimer or in "
                  "tether::reclaim(), never inside the driver call") {
  inv9::runs.store(0);
  inv9::inside_call.store(0);
  DestroyHook hook(&inv9::hook);
  auto tr = tracker();
  const DriverTable& wt = watched_table();
  auto h = graph(&wt);
  for (int i = 0; i < 4; ++i)
    edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{Probe(tr), Probe(tr)}); });

  bool launched = false;
  SUBCASE("a never-launched graph is destroyed: the destructors run inside cuGraphDestroy") {
    h.reset();
  }
  SUBCASE("a launched executable is destroyed: the destructors run on a driver thread") {
    launched = true;
    Exec e(wt, h->root().graph);
    h.reset();
    e.run(stream);
    e.reset();
  }
  SUBCASE("tether::reclaim() drains on the calling thread") {
    h.reset();
    tether::reclaim();  // may find the queue already drained by the reclaimer: either is fine
  }
  CHECK(tr->wait_destroyed(8));
  CHECK(inv9::runs.load() == 4);
  CHECK(tr->outside_drain() == 0);
  CHECK(tr->inside_driver_call() == 0);
  CHECK(tr->none_twice());
  // No owner died on a thread that ran a destructor, unless that thread was draining (the test's
  // own thread inside tether::reclaim(): draining and not in a driver call, checked above).
  for (std::thread::id dead_on : tr->threads())
    for (std::thread::id dtor_on : inv9::hook_threads())
      if (dead_on == dtor_on) CHECK(dead_on == main_tid);
  if (sim) {
    if (launched)
      for (std::thread::id dtor_on : inv9::hook_threads()) CHECK(dtor_on != main_tid);
    else
      CHECK(inv9::inside_call.load() == 4);  // the situation the rule is for did happen
  }
}

// ------------------------------------------------------------------------------ invariants 11-14

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 11: the accumulator is retained on the source before the propagating call, so the "
    "executable keeps it after the caller lets go") {
  auto tr = tracker();
  auto h = graph();
  edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{}); });
  td::ExecAccumulator* acc = td::ExecAccumulator::create(t);
  acc->owners() += Owners{Probe(tr)};
  const std::uint64_t retains0 = sim ? tether::sim::call_count("cuGraphRetainUserObject") : 0;
  bool retained_before = !sim;
  CUgraphExec exec = nullptr;
  td::with_accumulator_on(
      t, h->root().graph, acc,
      [&] {
        if (sim) retained_before = tether::sim::call_count("cuGraphRetainUserObject") == retains0 + 1;
        td::call<Entry::cuGraphInstantiateWithFlags>(t, "instantiating", &exec, h->root().graph, 0ull);
      },
      [] {});
  CHECK(retained_before);
  REQUIRE(exec != nullptr);
  // The caller's reference goes: the executable's copy keeps the accumulator.
  CHECK(raw<Entry::cuUserObjectRelease>(t, acc->user_object(), 1u) == CUDA_SUCCESS);
  CHECK(tr->destroyed_after_settle(0));
  CHECK(td::ExecAccumulator::live() == acc_before + 1);
  h.reset();  // not the source either
  CHECK(tr->destroyed_after_settle(0));
  CHECK(raw<Entry::cuGraphLaunch>(t, exec, stream) == CUDA_SUCCESS);
  sync();
  CHECK(raw<Entry::cuGraphExecDestroy>(t, exec) == CUDA_SUCCESS);
  CHECK(tr->wait_destroyed(1));
  CHECK(wait_attachments(live_before, acc_before));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 12: the accumulator's source reference is released on every path: after a successful "
    "propagation") {
  auto tr = tracker();
  auto h = graph();
  edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{}); });
  td::ExecAccumulator* acc = td::ExecAccumulator::create(t);
  acc->owners() += Owners{Probe(tr)};
  CUgraphExec exec = nullptr;
  td::with_accumulator_on(
      t, h->root().graph, acc,
      [&] { td::call<Entry::cuGraphInstantiateWithFlags>(t, "instantiating", &exec, h->root().graph, 0ull); },
      [] {});
  REQUIRE(exec != nullptr);
  CHECK(raw<Entry::cuGraphExecDestroy>(t, exec) == CUDA_SUCCESS);
  CHECK(tr->destroyed_after_settle(0));  // the caller's reference
  // The source graph is still alive: if it kept a reference, this release would not destroy it.
  CHECK(raw<Entry::cuUserObjectRelease>(t, acc->user_object(), 1u) == CUDA_SUCCESS);
  CHECK(tr->wait_destroyed(1));
  CHECK(wait_attachments(live_before, acc_before));
  h.reset();
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariants 12 and 13: when the propagating call fails, the source reference is released and the "
    "accumulator dies with the caller's reference; a failed retain leaves it with the caller") {
  auto tr = tracker();
  auto h = graph();
  td::ExecAccumulator* acc = td::ExecAccumulator::create(t);
  acc->owners() += Owners{Probe(tr)};
  bool published = false;
  CHECK_THROWS_AS(td::with_accumulator_on(
                      t, h->root().graph, acc, [] { throw std::runtime_error("instantiate refused"); },
                      [&] { published = true; }),
                  std::runtime_error);
  CHECK_FALSE(published);
  CHECK(tr->destroyed_after_settle(0));
  if (sim) {
    tether::sim::fail_call("cuGraphRetainUserObject", 1);
    bool propagated = false;
    CHECK_THROWS_AS(td::with_accumulator_on(
                        t, h->root().graph, acc, [&] { propagated = true; }, [&] { published = true; }),
                    tether::DriverError);
    CHECK_FALSE(propagated);
    CHECK_FALSE(published);
    CHECK(tr->destroyed_after_settle(0));
  }
  // The graph is alive and holds nothing: the caller's release is the last one.
  CHECK(raw<Entry::cuUserObjectRelease>(t, acc->user_object(), 1u) == CUDA_SUCCESS);
  CHECK(tr->wait_destroyed(1));
  CHECK(wait_attachments(live_before, acc_before));
  h.reset();
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 14: the executable's owners are published before the source reference is released") {
  using Release = Watched<Entry::cuGraphReleaseUserObject>;
  const DriverTable& wt = watched_table();
  auto tr = tracker();
  auto h = graph(&wt);
  edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{}); });
  td::ExecAccumulator* acc = td::ExecAccumulator::create(wt);
  acc->owners() += Owners{Probe(tr)};
  CUgraphExec exec = nullptr;
  std::uint64_t releases0 = 0, sim_releases0 = 0;
  std::optional<std::uint64_t> at_publish, sim_at_publish;
  td::with_accumulator_on(
      wt, h->root().graph, acc,
      [&] {
        releases0 = Release::calls.load();
        if (sim) sim_releases0 = tether::sim::call_count("cuGraphReleaseUserObject");
        td::call<Entry::cuGraphInstantiateWithFlags>(wt, "instantiating", &exec, h->root().graph, 0ull);
      },
      [&] {
        at_publish = Release::calls.load();
        if (sim) sim_at_publish = tether::sim::call_count("cuGraphReleaseUserObject");
      });
  REQUIRE(at_publish.has_value());
  CHECK(*at_publish == releases0);
  CHECK(Release::calls.load() == releases0 + 1);  // released right after
  if (sim) {
    REQUIRE(sim_at_publish.has_value());
    CHECK(*sim_at_publish == sim_releases0);
  }
  CHECK(raw<Entry::cuUserObjectRelease>(t, acc->user_object(), 1u) == CUDA_SUCCESS);
  CHECK(tr->destroyed_after_settle(0));
  CHECK(raw<Entry::cuGraphExecDestroy>(t, exec) == CUDA_SUCCESS);
  CHECK(tr->wait_destroyed(1));
  h.reset();
}

// ------------------------------------------------------------------------------ H1

// Owns a raw device allocation and frees it itself, recording what cuMemFree returned.
struct FreeChecker {
  const DriverTable* t;
  CUcontext ctx;
  CUdeviceptr p;
  std::shared_ptr<std::atomic<int>> result;

  FreeChecker(const DriverTable& tt, CUcontext c, CUdeviceptr ptr, std::shared_ptr<std::atomic<int>> r)
      : t(&tt), ctx(c), p(ptr), result(std::move(r)) {}
  FreeChecker(FreeChecker&& o) noexcept
      : t(o.t), ctx(o.ctx), p(std::exchange(o.p, 0)), result(std::move(o.result)) {}
  FreeChecker& operator=(FreeChecker&&) = delete;
  ~FreeChecker() {
    if (!p) return;
    CUresult r = raw<Entry::cuCtxPushCurrent>(*t, ctx);
    if (r == CUDA_SUCCESS) {
      r = raw<Entry::cuMemFree>(*t, p);
      CUcontext popped = nullptr;
      raw<Entry::cuCtxPopCurrent>(*t, &popped);
    }
    result->store(static_cast<int>(r));
  }
};

TEST_CASE_FIXTURE(
    AttachEnv,
    "H1: no owner is destroyed on a driver thread or inside a driver call, and a buffer's cuMemFree "
    "succeeds there") {
  inv9::runs.store(0);
  inv9::inside_call.store(0);
  DestroyHook hook(&inv9::hook);
  const DriverTable& wt = watched_table();
  const std::size_t dev0 = sim ? tether::sim::stats().device_allocations : 0;
  auto tr = tracker();
  auto result = std::make_shared<std::atomic<int>>(-1);
  FillKernel k = load_fill();
  auto h = graph(&wt);
  {
    tether::DeviceBuffer<float> buf = ctx.alloc<float>(1024);
    CUdeviceptr rawp = 0;
    REQUIRE(raw<Entry::cuMemAlloc>(t, &rawp, std::size_t{4096}) == CUDA_SUCCESS);
    float* p = buf.data();
    edit(h, [&](Transaction& tx) {
      NodeRecord* a = td::add_kernel(tx, h->root(), {}, fill_call(k.function(), p, 3.0f, 1024),
                                     Owners{std::move(buf), k, Probe(tr)}, "fill");
      NodeRecord* deps[] = {a};
      td::add_kernel(
          tx, h->root(), deps,
          fill_call(k.function(), reinterpret_cast<float*>(static_cast<std::uintptr_t>(rawp)), 4.0f, 1024),
          Owners{FreeChecker(t, ctx.get(), rawp, result), Probe(tr)}, "fill");
    });
  }
  k = load_fill();  // drop the user's module reference to the first module
  Exec e(wt, h->root().graph);
  h.reset();
  e.run(stream);
  e.run(stream);
  e.reset();  // launched: the destructor runs later on a driver thread
  CHECK(tr->wait_destroyed(2));
  CHECK(wait_attachments(live_before, acc_before));
  // Its bundle-mate the probe may die first (tuple members die in an unspecified order).
  CHECK(wait_until([&] { return result->load() != -1; }));
  CHECK(result->load() == static_cast<int>(CUDA_SUCCESS));
  CHECK(tr->outside_drain() == 0);
  CHECK(tr->inside_driver_call() == 0);
  for (std::thread::id dead_on : tr->threads())
    for (std::thread::id dtor_on : inv9::hook_threads()) CHECK((dead_on != dtor_on || dead_on == main_tid));
  if (sim) {
    CHECK(tether::sim::stats().device_allocations == dev0);  // the DeviceBuffer's cuMemFree succeeded too
    CHECK(tether::sim::call_count("cuMemFree") > 0);
  }
}

// ------------------------------------------------------------------------------ H2

TEST_CASE_FIXTURE(AttachEnv, "H2: thousands of attachments released at once are all reclaimed, none lost") {
  constexpr int n = 5000;
  auto tr = tracker();
  auto h = graph();
  {
    Transaction tx(h);
    for (int i = 0; i < n; ++i) td::add_empty(tx, h->root(), {}, Owners{Probe(tr)});
    tx.commit();
  }
  CHECK(NodeAttachment::live() == live_before + n);
  const std::uint64_t pushed0 = td::Reclaimer::instance().pushed();
  SUBCASE("by destroying a never-launched graph") {
    h.reset();
  }
  SUBCASE("by destroying the last executable after the graph") {
    Exec e(t, h->root().graph);
    h.reset();
    CHECK(tr->destroyed_after_settle(0));
    e.run(stream);
    e.reset();
  }
  CHECK(tr->wait_destroyed(n, 20'000));
  CHECK(tr->destroyed_after_settle(n));
  CHECK(tr->none_twice());
  CHECK(tr->outside_drain() == 0);
  CHECK(wait_attachments(live_before, acc_before, 20'000));
  CHECK(td::Reclaimer::instance().pushed() >= pushed0 + n);
  CHECK(tether::wait_reclaimed(std::chrono::milliseconds(wait_ms)));
  CHECK(td::Reclaimer::instance().released() >= pushed0 + n);
}

// ------------------------------------------------------------------------------ H3

constexpr const char* h3_env = "TETHER_ATTACH_EXIT_CHILD";

// The child's part: live graphs, a clone, executables and a launch still running, then exit(0)
// without any cleanup.
[[noreturn]] void exit_with_everything_alive() {
  AttachEnv* env = new AttachEnv();  // leaked on purpose, like everything below
  const DriverTable& t = env->t;
  auto tr = tracker();
  FillKernel k = env->load_fill();
  tether::SharedBuffer<float> buf = env->ctx.alloc<float>(1024).share();
  auto* h = new std::shared_ptr<Hierarchy>(env->graph());
  auto c = host_callable([p = Probe(tr), buf] {});
  edit(*h, [&](Transaction& tx) {
    NodeRecord* spin =
        td::add_kernel(tx, (*h)->root(), {}, u64_call(env->drv.spin, 300 * ms_ns), Owners{Probe(tr)}, "spin");
    NodeRecord* deps[] = {spin};
    NodeRecord* fill = td::add_kernel(tx, (*h)->root(), deps, fill_call(k.function(), buf.data(), 1.0f, 1024),
                                      Owners{k, buf, Probe(tr)}, "fill");
    NodeRecord* deps2[] = {fill};
    td::add_host(tx, (*h)->root(), deps2, c.fn, c.data, Owners{std::move(c.owner)});
  });
  auto* clone = new std::shared_ptr<Hierarchy>(td::clone_hierarchy(**h, nullptr));
  CUgraphExec e1 = nullptr, e2 = nullptr;
  td::call<Entry::cuGraphInstantiateWithFlags>(t, "instantiating", &e1, (*h)->root().graph, 0ull);
  td::call<Entry::cuGraphInstantiateWithFlags>(t, "instantiating", &e2, (*clone)->root().graph, 0ull);
  td::call<Entry::cuGraphLaunch>(t, "launching", e1, env->stream);
  td::call<Entry::cuGraphLaunch>(t, "launching", e2, env->stream);
  td::call<Entry::cuGraphLaunch>(t, "launching", e1, env->stream);
  // Some attachments are queued for release right now, too.
  auto* doomed = new std::shared_ptr<Hierarchy>(env->graph());
  for (int i = 0; i < 100; ++i)
    edit(*doomed,
         [&](Transaction& tx) { return td::add_empty(tx, (*doomed)->root(), {}, Owners{Probe(tr)}); });
  doomed->reset();
  std::printf("child: everything alive, exiting\n");
  std::fflush(stdout);
  std::exit(0);
}

TEST_CASE("H3: process exit with live graphs and executables and in-flight work neither crashes nor hangs") {
  if (std::getenv(h3_env)) exit_with_everything_alive();

  // Why fork and exec rather than fork alone: the driver (real or simulated) and the reclaimer
  // have threads, which a forked copy would not have; CUDA does not work in a forked child.
  char out_path[] = "/tmp/tether_h3_XXXXXX";
  int fd = ::mkstemp(out_path);
  REQUIRE(fd >= 0);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (s.rfind("ASAN_OPTIONS=", 0) == 0) continue;
    env_strings.push_back(s);
  }
  env_strings.push_back(std::string(h3_env) + "=1");
  // The child leaks on purpose: LeakSanitizer must not turn that into a failure.
  const char* asan = std::getenv("ASAN_OPTIONS");
  env_strings.push_back(std::string("ASAN_OPTIONS=") + (asan ? std::string(asan) + ":" : "") +
                        "detect_leaks=0");
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe", arg0 = "unit_tests", filter = "--test-case=H3: process exit*";
  char* argv[] = {arg0.data(), filter.data(), nullptr};

  std::fflush(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(self.c_str(), argv, envp.data());
    ::_exit(127);
  }
  ::close(fd);
  int status = 0;
  bool exited = false;
  const std::int64_t end = now_ns() + 60'000'000'000;  // generous: sanitizer builds are slow
  while (now_ns() < end) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
      break;
    }
    sleep_ms(10);
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  std::ifstream in(out_path);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(out_path);
  INFO("child output:\n" << output);
  CHECK_MESSAGE(exited, "the child hung at exit");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(contains(output, "child: everything alive, exiting"));
}

}  // namespace
