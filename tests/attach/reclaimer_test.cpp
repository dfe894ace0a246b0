// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The reclaimer executor (src/attach/reclaimer.hpp): the one verdict over thread roles and acts,
// its refusals, jobs deferred from every role, the kinds of job, FIFO order, and the blocking-
// release rule (frees and unloads wait for an idle host). Runs on the driver TETHER_DRIVER selects;
// counts of live driver objects are simulator-only and guarded by `sim`.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/owner_probe.hpp"

namespace {

using namespace tether_test;
using tether::Owners;
namespace td = tether::detail;
using td::Act;
using td::ThreadRole;
using td::Verdict;

const char* role_name(ThreadRole r) {
  switch (r) {
    case ThreadRole::application: return "application";
    case ThreadRole::host_callback: return "host_callback";
    case ThreadRole::user_object_destructor: return "user_object_destructor";
    case ThreadRole::draining: return "draining";
    case ThreadRole::reclaimer: return "reclaimer";
  }
  return "?";
}

// What `f` returns on a fresh thread in role `r` (a fresh thread: no role is left behind here).
template <class F>
auto in_role(ThreadRole r, F f) {
  std::optional<decltype(f())> out;
  std::thread([&] {
    std::optional<td::ThreadRoleScope> scope;
    if (r != ThreadRole::application) scope.emplace(r);
    out = f();
  }).join();
  return *out;
}

// Records its destruction order into a shared log.
struct Ordered {
  std::shared_ptr<std::vector<int>> log;
  std::shared_ptr<std::mutex> mu;
  int id;
  Ordered(std::shared_ptr<std::vector<int>> l, std::shared_ptr<std::mutex> m, int i)
      : log(std::move(l)), mu(std::move(m)), id(i) {}
  Ordered(Ordered&& o) noexcept : log(std::move(o.log)), mu(std::move(o.mu)), id(o.id) {}
  ~Ordered() {
    if (!log) return;
    std::lock_guard lock(*mu);
    log->push_back(id);
  }
};

// An owner whose destruction (on the reclaimer) defers another bundle: a job deferred by a job.
struct DefersOnDestroy {
  std::unique_ptr<Owners> inner;
  explicit DefersOnDestroy(std::unique_ptr<Owners> o) : inner(std::move(o)) {}
  DefersOnDestroy(DefersOnDestroy&&) noexcept = default;
  ~DefersOnDestroy() {
    if (inner) td::defer(std::move(*inner));
  }
};

// Bounded poll until `pred` holds.
template <class P>
bool poll(P pred) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace

TEST_SUITE_BEGIN("reclaimer");

TEST_CASE("verdict answers every act in every thread role as the release rule and the call checks require") {
  // One row per role: call, wait_for_reclaimer, release, release_reclaimer_only, release_blocking
  // (a deleter's first attempt), then the same three releases as a job being run.
  struct Row {
    ThreadRole role;
    Verdict call, wait, release, reclaimer_only, blocking, job_release, job_reclaimer_only, job_blocking;
  };
  const Row rows[] = {
      {ThreadRole::application, Verdict::go, Verdict::go, Verdict::go, Verdict::defer, Verdict::defer, Verdict::go,
       Verdict::hand_over, Verdict::hand_over},
      {ThreadRole::host_callback, Verdict::refuse_in_callback, Verdict::refuse_in_callback, Verdict::defer,
       Verdict::defer, Verdict::defer, Verdict::go, Verdict::hand_over, Verdict::hand_over},
      {ThreadRole::user_object_destructor, Verdict::refuse_in_callback, Verdict::refuse_in_callback, Verdict::defer,
       Verdict::defer, Verdict::defer, Verdict::go, Verdict::hand_over, Verdict::hand_over},
      {ThreadRole::draining, Verdict::go, Verdict::go, Verdict::go, Verdict::defer, Verdict::defer, Verdict::go,
       Verdict::hand_over, Verdict::hand_over},
      {ThreadRole::reclaimer, Verdict::go, Verdict::refuse_on_reclaimer, Verdict::go, Verdict::go, Verdict::defer,
       Verdict::go, Verdict::go, Verdict::go_when_host_idle},
  };
  for (const Row& row : rows) {
    CAPTURE(role_name(row.role));
    std::vector<Verdict> got = in_role(row.role, [] {
      return std::vector<Verdict>{td::verdict(Act::call),
                                  td::verdict(Act::wait_for_reclaimer),
                                  td::verdict(Act::release),
                                  td::verdict(Act::release_reclaimer_only),
                                  td::verdict(Act::release_blocking),
                                  td::verdict(Act::release, true),
                                  td::verdict(Act::release_reclaimer_only, true),
                                  td::verdict(Act::release_blocking, true)};
    });
    const std::vector<Verdict> want{row.call,        row.wait,           row.release,
                                    row.reclaimer_only, row.blocking,   row.job_release,
                                    row.job_reclaimer_only, row.job_blocking};
    for (std::size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(static_cast<int>(got[i]) == static_cast<int>(want[i]));
    }
  }
}

TEST_CASE("a role scope sets the role for its extent, nests, and restores the previous role") {
  std::thread([] {
    CHECK(td::thread_role() == ThreadRole::application);
    {
      td::ThreadRoleScope outer(ThreadRole::draining);
      CHECK(td::draining_here());
      {
        td::ThreadRoleScope inner(ThreadRole::user_object_destructor);
        CHECK(td::thread_role() == ThreadRole::user_object_destructor);
        CHECK(td::cuda_forbidden_here());
        CHECK_FALSE(td::draining_here());
      }
      CHECK(td::thread_role() == ThreadRole::draining);
      CHECK_FALSE(td::cuda_forbidden_here());
    }
    CHECK(td::thread_role() == ThreadRole::application);
  }).join();
}

TEST_CASE("a host_callback role counts as a running tether callable until its scope ends") {
  std::atomic<bool> entered{false}, leave{false};
  CHECK(td::host_idle());
  std::thread t([&] {
    td::ThreadRoleScope role(ThreadRole::host_callback);
    entered = true;
    while (!leave) std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  while (!entered) std::this_thread::sleep_for(std::chrono::microseconds(100));
  CHECK_FALSE(td::host_idle());
  leave = true;
  t.join();
  CHECK(td::host_idle());
}

TEST_CASE("each refusing verdict throws a UsageError that names the call and says why and what to do") {
  struct Case {
    Verdict v;
    const char* says;
  };
  const Case cases[] = {
      {Verdict::refuse_in_callback, "Stream::query cannot be called inside a host callback"},
      {Verdict::refuse_in_forked_child, "Stream::query cannot be called in a child process made by fork()"},
      {Verdict::refuse_on_reclaimer, "Stream::query cannot be called on tether's reclaimer"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.says);
    try {
      td::refuse(c.v, "Stream::query");
      FAIL("refuse returned");
    } catch (const tether::UsageError& e) {
      const std::string m = e.what();
      CHECK(m.find(c.says) == 0);
      // Each message goes on to say what to do instead.
      CHECK((m.find("another thread") != std::string::npos || m.find("posix_spawn") != std::string::npos ||
             m.find("wait for itself") != std::string::npos));
    }
  }
}

TEST_CASE("the public waits refuse where the verdict refuses: inside a host callback and on the reclaimer") {
  for (ThreadRole r : {ThreadRole::host_callback, ThreadRole::user_object_destructor, ThreadRole::reclaimer}) {
    CAPTURE(role_name(r));
    const std::string m = in_role(r, []() -> std::string {
      try {
        (void)tether::wait_reclaimed(std::chrono::milliseconds(1));
      } catch (const tether::UsageError& e) {
        return e.what();
      }
      return "no error";
    });
    CHECK(m.find("tether::wait_reclaimed cannot be called") == 0);
    CHECK(m.find(r == ThreadRole::reclaimer ? "on tether's reclaimer" : "inside a host callback") !=
          std::string::npos);
  }
  // And tether::reclaim() does nothing where CUDA calls are refused.
  CHECK(in_role(ThreadRole::host_callback, [] { return tether::reclaim(); }) == 0);
}

TEST_CASE_FIXTURE(AttachEnv, "a bundle deferred from each thread role is destroyed once, on a draining thread") {
  // application thread, an ordinary thread, inside a host callback on the driver's thread, inside
  // a user-object destructor, and on the reclaimer itself (an owner's destructor deferring more).
  const char* roles[] = {"application thread", "another thread", "host callback", "user-object destructor",
                         "reclaimer"};
  for (const char* role : roles) {
    CAPTURE(role);
    auto tr = tracker();
    const std::string r = role;
    if (r == "application thread") {
      td::defer(Owners{Probe(tr)});
    } else if (r == "another thread") {
      std::thread([&] { td::defer(Owners{Probe(tr)}); }).join();
    } else if (r == "host callback") {
      tether::Stream s = ctx.make_stream();
      Owners bundle{Probe(tr)};
      std::atomic<int> seen{-1};
      s.host([&bundle, &seen] {
        seen = static_cast<int>(td::thread_role());
        td::defer(std::move(bundle));
      });
      s.synchronize();
      CHECK(seen.load() == static_cast<int>(ThreadRole::host_callback));
    } else if (r == "user-object destructor") {
      static Owners* pending = nullptr;
      static std::atomic<int> seen{-1};
      Owners bundle{Probe(tr)};
      pending = &bundle;
      seen = -1;
      {
        DestroyHook hook(+[](NodeAttachment*) {
          if (!pending) return;
          seen = static_cast<int>(td::thread_role());
          td::ThreadRoleScope role(ThreadRole::user_object_destructor);  // what tether's code in one runs under
          td::defer(std::move(*std::exchange(pending, nullptr)));
        });
        NodeAttachment* a = NodeAttachment::create(t, Owners{0});
        REQUIRE(raw<Entry::cuUserObjectRelease>(t, a->user_object(), 1u) == CUDA_SUCCESS);
        CHECK(poll([&] { return pending == nullptr; }));
      }
      CHECK(seen.load() != -1);
    } else {
      td::defer(Owners{DefersOnDestroy(std::make_unique<Owners>(Probe(tr)))});
    }
    CHECK(tr->wait_destroyed(1));
    CHECK(tr->destroyed_after_settle(1));
    CHECK(tr->none_twice());
    CHECK(tr->outside_drain() == 0);
  }
}

TEST_CASE_FIXTURE(AttachEnv, "jobs deferred from one thread run in the order they were deferred") {
  auto log = std::make_shared<std::vector<int>>();
  auto mu = std::make_shared<std::mutex>();
  constexpr int n = 200;
  for (int i = 0; i < n; ++i) td::defer(Owners{Ordered(log, mu, i)});
  REQUIRE(tether::wait_reclaimed(std::chrono::milliseconds(wait_ms)));
  std::lock_guard lock(*mu);
  REQUIRE(log->size() == n);
  for (int i = 0; i < n; ++i) CHECK((*log)[static_cast<std::size_t>(i)] == i);
}

TEST_CASE_FIXTURE(AttachEnv, "every kind of job goes through the one queue and runs once") {
  // One way into each kind of job; what it released is checked on the simulator's counts.
  struct Kind {
    const char* name;
    std::function<void(AttachEnv&)> make;
    std::function<bool(const tether::sim::Stats&, const tether::sim::Stats&)> released;  // (before, after)
  };
  const Kind kinds[] = {
      {"owners (an unused bundle)", [](AttachEnv&) { td::defer(Owners{1, 2.0}); }, nullptr},
      {"release (an event dropped inside a host callback)",
       [](AttachEnv& env) {
         std::optional<tether::Event> e = env.ctx.make_event();
         td::ThreadRoleScope role(ThreadRole::host_callback);
         e.reset();
       },
       [](const auto& b, const auto& a) { return a.events == b.events; }},
      {"release (a module unloaded: a blocking release, from the application thread)",
       [](AttachEnv& env) { (void)env.load_fill(); },
       [](const auto& b, const auto& a) { return a.modules == b.modules; }},
      {"destroy_graph (a graph dropped inside a host callback)",
       [](AttachEnv& env) {
         auto h = env.graph();
         td::ThreadRoleScope role(ThreadRole::host_callback);
         h.reset();
       },
       [](const auto& b, const auto& a) { return a.graphs == b.graphs; }},
      {"destroy_stream (a stream with owners dropped inside a host callback)",
       [](AttachEnv& env) {
         tether::Stream s = env.ctx.make_stream();
         s.host([] {});
         td::ThreadRoleScope role(ThreadRole::host_callback);
         s = tether::Stream();
       },
       [](const auto& b, const auto& a) { return a.streams == b.streams; }},
      {"destroy_exec, retire and accumulator (an executable launched, then dropped)",
       [](AttachEnv& env) {
         tether::Graph g{env.ctx};
         g.edit([&](tether::Edit& e) { e.host([] {}); });
         tether::GraphExec x = g.instantiate();
         tether::Stream s = env.ctx.make_stream();
         x.launch(s);
         s.synchronize();
       },
       [](const auto& b, const auto& a) { return a.execs == b.execs && a.graphs == b.graphs; }},
  };
  for (const Kind& k : kinds) {
    CAPTURE(k.name);
    tether::sim::Stats before{};
    if (sim) before = tether::sim::stats();
    const std::uint64_t pushed = td::Reclaimer::instance().pushed();
    k.make(*this);
    CHECK(tether::wait_released(ctx, std::chrono::milliseconds(wait_ms)));
    CHECK(td::Reclaimer::instance().pushed() > pushed);
    if (sim && k.released) CHECK(k.released(before, tether::sim::stats()));
  }
}

TEST_CASE_FIXTURE(AttachEnv,
                  "a blocking release waits while tether host work is queued or a tether callable runs, then goes") {
  // The two ways the host is busy: work queued (a launch with host nodes, a stream host function)
  // and a tether host callable running.
  for (const char* busy : {"host work queued", "host callable running"}) {
    CAPTURE(busy);
    std::atomic<bool> entered{false}, leave{false};
    std::thread callable;
    const bool queued = std::string(busy) == "host work queued";
    if (queued) {
      td::begin_host_work();
    } else {
      callable = std::thread([&] {
        td::ThreadRoleScope role(ThreadRole::host_callback);
        entered = true;
        while (!leave) std::this_thread::sleep_for(std::chrono::microseconds(100));
      });
      while (!entered) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    CHECK_FALSE(td::host_idle());
    std::size_t hosts = sim ? tether::sim::stats().host_allocations : 0;
    {
      tether::PinnedBuffer<float> p = ctx.alloc_pinned<float>(64);
      if (sim) CHECK(tether::sim::stats().host_allocations == hosts + 1);
    }  // cuMemFreeHost: deferred, and held until the host is idle
    CHECK_FALSE(tether::wait_reclaimed(std::chrono::milliseconds(settle_ms)));
    // An application thread draining hands it over instead of making it.
    (void)tether::reclaim();
    CHECK_FALSE(tether::wait_reclaimed(std::chrono::milliseconds(settle_ms)));
    if (sim) CHECK(tether::sim::stats().host_allocations == hosts + 1);
    CHECK_FALSE(td::reclaimer_in_blocking_release());
    if (queued) {
      td::end_host_work();
    } else {
      leave = true;
      callable.join();
    }
    CHECK(td::host_idle());
    CHECK(tether::wait_reclaimed(std::chrono::milliseconds(wait_ms)));
    if (sim) CHECK(tether::sim::stats().host_allocations == hosts);
  }
}

TEST_SUITE_END();
