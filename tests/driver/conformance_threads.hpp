// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Helpers of the conformance cases that block a host callback and make driver calls from other
// threads (conformance_callback_blocking_test.cpp, conformance_capture_modes_test.cpp):
// - Latch: a host function that blocks until released (or 10 s passed, so a failing case never
//   hangs the suite), recording its thread.
// - Blocker: a stream whose host callback blocks on a latch, made by a graph host node or by
//   cuLaunchHostFunc; released and cleaned up by its destructor.
// - Call: one driver call made on its own thread (context current), with bounded waits.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "support/driver_fixture.hpp"

namespace tether_test {

/// Probe bound of "returns at once" / "does not return": the ctx_block_probe used 3 s; 200 ms is
/// far above what a call that does not block takes, and far below a blocked callback's duration.
inline constexpr int probe_ms = 200;
// How long a call that "returns at once" may take on a loaded machine (a sanitizer build on two
// cores): a call that blocks until the callback is released cannot return within it either.
inline constexpr int quick_ms = 2000;

struct Latch {
  std::atomic<int> entered{0};
  std::atomic<bool> released{false};
  std::atomic<int> returned{0};
  std::atomic<std::thread::id> tid{};

  void release() { released.store(true); }
  /// Whether the callback entered within `ms`.
  bool wait_entered(int ms = wait_ms) const {
    const std::int64_t end = now_ns() + static_cast<std::int64_t>(ms) * 1000000;
    while (entered.load() == 0) {
      if (now_ns() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  }
};

inline void CUDA_CB latch_fn(void* p) {
  Latch* l = static_cast<Latch*>(p);
  l->tid.store(std::this_thread::get_id());
  l->entered.fetch_add(1);
  const std::int64_t end = now_ns() + 10'000'000'000;
  while (!l->released.load() && now_ns() < end) std::this_thread::sleep_for(std::chrono::microseconds(200));
  l->returned.fetch_add(1);
}

/// How the blocking callback is enqueued.
enum class BlockBy { host_node, launch_host_func };

inline const char* to_text(BlockBy b) {
  return b == BlockBy::host_node ? "graph host node" : "cuLaunchHostFunc";
}

/// A stream whose host callback blocks on `latch` from construction until release().
struct Blocker {
  Latch latch;
  CUstream s = nullptr;
  CUgraph g = nullptr;
  CUgraphExec e = nullptr;
  CUgraphNode host = nullptr;

  explicit Blocker(BlockBy by) {
    const tether::detail::DriverTable& t = table();
    REQUIRE(raw<Entry::cuStreamCreate>(t, &s, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS);
    if (by == BlockBy::host_node) {
      g = new_graph();
      CUDA_HOST_NODE_PARAMS hp{};
      hp.fn = &latch_fn;
      hp.userData = &latch;
      REQUIRE(raw<Entry::cuGraphAddHostNode>(t, &host, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0},
                                             &hp) == CUDA_SUCCESS);
      REQUIRE(raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, 0ull) == CUDA_SUCCESS);
      REQUIRE(raw<Entry::cuGraphLaunch>(t, e, s) == CUDA_SUCCESS);
    } else {
      REQUIRE(raw<Entry::cuLaunchHostFunc>(t, s, &latch_fn, static_cast<void*>(&latch)) == CUDA_SUCCESS);
    }
    REQUIRE(latch.wait_entered());
  }
  Blocker(const Blocker&) = delete;
  Blocker& operator=(const Blocker&) = delete;
  void release() { latch.release(); }
  ~Blocker() {
    latch.release();
    const tether::detail::DriverTable& t = table();
    CHECK(raw<Entry::cuStreamSynchronize>(t, s) == CUDA_SUCCESS);
    if (e) CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
    if (g) CHECK(raw<Entry::cuGraphDestroy>(t, g) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuStreamDestroy>(t, s) == CUDA_SUCCESS);
  }
};

/// A driver call made on a thread of its own, with `ctx` current there.
class Call {
 public:
  Call(CUcontext ctx, std::function<CUresult()> f) : st_(std::make_shared<State>()) {
    thread_ = std::thread([st = st_, ctx, f = std::move(f)] {
      CUresult set = raw<Entry::cuCtxSetCurrent>(table(), ctx);
      CUresult r = set == CUDA_SUCCESS ? f() : set;
      std::lock_guard lock(st->mu);
      st->result = r;
      st->done = true;
      st->cv.notify_all();
    });
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  ~Call() {
    // Why a detach is possible: a call that never returns must not hang the suite; the case has
    // failed already (returned_within) when it happens.
    if (returned_within(wait_ms))
      thread_.join();
    else
      thread_.detach();
  }
  /// Whether the call returned within `ms` milliseconds from now.
  bool returned_within(int ms) {
    std::unique_lock lock(st_->mu);
    return st_->cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return st_->done; });
  }
  /// What it returned (call after returned_within said it did).
  CUresult result() {
    std::lock_guard lock(st_->mu);
    return st_->result;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    CUresult result = CUDA_ERROR_UNKNOWN;
  };
  std::shared_ptr<State> st_;
  std::thread thread_;
};

}  // namespace tether_test
