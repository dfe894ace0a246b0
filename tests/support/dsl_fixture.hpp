// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Fixture of the DSL tests: the runtime, device 0's context, the test kernels, a stream, owners
// that witness their destruction, and a raw "instantiate, launch, synchronize" (the executable
// wrapper is a later layer).
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/kernels.hpp"
#include "tether.hpp"

namespace tether_test {

using namespace std::chrono_literals;

/// Counts destructions of the Witness owners made from it, and where they happened.
struct WitnessLog {
  std::atomic<int> destroyed{0};
  std::atomic<int> outside_reclaimer{0};  // destroyed where owners must not die (not while draining)
};

/// A move-only owner that records its destruction.
class Witness {
 public:
  explicit Witness(std::shared_ptr<WitnessLog> log) : log_(std::move(log)) {}
  Witness(Witness&& o) noexcept : log_(std::move(o.log_)) {}
  Witness& operator=(Witness&&) = delete;
  ~Witness() {
    if (!log_) return;
    log_->destroyed.fetch_add(1);
    if (!tether::detail::draining_here()) log_->outside_reclaimer.fetch_add(1);
  }

 private:
  std::shared_ptr<WitnessLog> log_;
};

/// Polls `pred` until it holds or `timeout` passes (release is asynchronous).
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(200us);
  }
  return true;
}

struct DslFixture {
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  TestKernels k = test_kernels(ctx);
  tether::Stream stream = ctx.make_stream();
  bool simulated = rt.kind() == tether::DriverKind::simulated;

  DslFixture() {
    ctx.make_current();
    // Let releases from earlier tests finish, so that counts taken in this test are its own.
    if (simulated) tether::sim::quiesce();
    tether::wait_reclaimed(5s);
  }
  ~DslFixture() {
    stream.synchronize();
    if (simulated) {
      auto v = tether::sim::violations();
      CHECK_MESSAGE(v.empty(), "simulator violations: " << (v.empty() ? "" : v.front().detail));
      tether::sim::clear_violations();
      tether::sim::clear_faults();
    }
  }

  const tether::detail::DriverTable& table() const { return tether::detail::table_of(rt); }

  /// Instantiates `g`, launches it `times` times on the fixture's stream, synchronizes, destroys the exec.
  void run(const tether::Graph& g, int times = 1) {
    CUgraphExec e = nullptr;
    tether::detail::call<tether::detail::Entry::cuGraphInstantiateWithFlags>(table(), "instantiating", &e, g.get(),
                                                                            0ull);
    for (int i = 0; i < times; ++i)
      tether::detail::call<tether::detail::Entry::cuGraphLaunch>(table(), "launching", e, stream.get());
    stream.synchronize();
    tether::detail::call<tether::detail::Entry::cuGraphExecDestroy>(table(), "destroying", e);
  }
  CUgraphExec instantiate(const tether::Graph& g) {
    CUgraphExec e = nullptr;
    tether::detail::call<tether::detail::Entry::cuGraphInstantiateWithFlags>(table(), "instantiating", &e, g.get(),
                                                                            0ull);
    return e;
  }
  void launch(CUgraphExec e) {
    tether::detail::call<tether::detail::Entry::cuGraphLaunch>(table(), "launching", e, stream.get());
    stream.synchronize();
  }
  void destroy(CUgraphExec e) {
    tether::detail::call<tether::detail::Entry::cuGraphExecDestroy>(table(), "destroying", e);
  }

  std::vector<float> read(const tether::SharedBuffer<float>& b) const {
    std::vector<float> h(b.size());
    b.copy_to(h);
    return h;
  }
  tether::SharedBuffer<float> buffer(std::size_t n, float value) {
    tether::SharedBuffer<float> b = ctx.alloc<float>(n).share();
    std::vector<float> h(n, value);
    b.copy_from(h);
    return b;
  }
};

}  // namespace tether_test
