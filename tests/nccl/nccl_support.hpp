// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Ranks as threads, one device each, for the NCCL tests: on the simulator with TETHER_SIM_DEVICES
// devices, on a GPU machine with its GPUs (a rank count above the device count is skipped with a
// message: the GPU runs list those as owed on a machine with more GPUs).
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/report_log.hpp"
#include "tether.hpp"

namespace tether_test {

struct NcclFixture {
  tether::Runtime rt = tether::Runtime::open();
  bool simulated = rt.kind() == tether::DriverKind::simulated;
  int devices = rt.device_count();

  NcclFixture() {
    if (simulated) tether::sim::quiesce();
    tether::wait_reclaimed(std::chrono::seconds(5));
    tether::nccl::wait_closed(std::chrono::seconds(30));
  }
  ~NcclFixture() {
    settle();
    if (simulated) {
      auto v = tether::sim::violations();
      CHECK_MESSAGE(v.empty(), "simulator violations: " << (v.empty() ? "" : v.front().detail));
      tether::sim::clear_violations();
      tether::sim::clear_faults();
    }
  }

  /// Everything dropped is released: owners (those the driver releases later too, on every
  /// device), then communicators destroyed by NCCL, and what they held.
  bool settle() const {
    bool ok = true;
    for (int d = 0; d < devices; ++d) ok &= tether::wait_released(rt.context(d), std::chrono::seconds(10));
    ok &= tether::nccl::wait_closed(std::chrono::seconds(30));
    ok &= tether::wait_reclaimed(std::chrono::seconds(10));
    return ok;
  }

  /// A one-rank world on device 0, made current: its context, communicator and a stream.
  struct OneRank {
    tether::Context ctx;
    tether::nccl::Communicator comm;
    tether::Stream stream;
  };
  OneRank one_rank() const {
    tether::Context ctx = rt.context(0);
    ctx.make_current();
    tether::nccl::Communicator comm =
        tether::nccl::Communicator::create(ctx, tether::nccl::UniqueId::generate(rt), 1, 0);
    tether::Stream stream = ctx.make_stream();
    return OneRank{std::move(ctx), std::move(comm), std::move(stream)};
  }

  /// Whether `n` ranks fit on this machine; says so when not.
  bool fits(int n) const {
    if (n <= devices) return true;
    MESSAGE("skipped: " << n << " ranks need " << n << " devices; this machine has " << devices
                        << " (owed on a machine with more GPUs)");
    return false;
  }

  /// Runs `fn(rank, ctx)` on `n` threads, rank r on device r, and rethrows the first exception.
  /// Ranks that are threads capture in CaptureMode::thread_local_: a GLOBAL capture on one rank
  /// would refuse another rank's allocations and instantiations (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED).
  template <class F>
  void on_ranks(int n, F&& fn) {
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        try {
          tether::Context ctx = rt.context(r);
          ctx.make_current();
          fn(r, ctx);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
};

template <class T>
std::vector<T> read_all(const tether::SharedBuffer<T>& b) {
  std::vector<T> h(b.size());
  b.copy_to(h);
  return h;
}

template <class T, class F>
tether::SharedBuffer<T> filled(const tether::Context& ctx, std::size_t n, F value_of) {
  tether::SharedBuffer<T> b = ctx.alloc<T>(n).share();
  std::vector<T> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<T>(value_of(i));
  b.copy_from(h);
  return b;
}


}  // namespace tether_test
