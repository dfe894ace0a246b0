// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What the benchmark programs share: the no-op kernel they launch, a clock, fatal checks of raw
// driver calls, a raw user-object destructor that counts, and a bounded wait for releases.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "tether.hpp"

namespace bench {

using Clock = std::chrono::steady_clock;

inline constexpr const char* kPtx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry noop(.param .u64 noop_p0)
{
  ret;
}
)";

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

[[noreturn]] inline void die(const char* what, CUresult r) {
  std::fprintf(stderr, "FATAL %s -> %s\n", what, std::string(tether::result_name(r)).c_str());
  std::exit(2);
}

inline std::atomic<long> g_raw_destroyed{0};
inline void raw_dtor(void*) { g_raw_destroyed.fetch_add(1, std::memory_order_relaxed); }

/// Polls `done` for up to 60 s (releases are asynchronous), warning if it never holds.
inline void wait_for(const std::function<bool()>& done) {
  auto end = Clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (Clock::now() > end) {
      std::fprintf(stderr, "WARN: waited 60 s for releases\n");
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
}

}  // namespace bench

#define REQ(call)                                  \
  do {                                             \
    CUresult r_ = (call);                          \
    if (r_ != CUDA_SUCCESS) bench::die(#call, r_); \
  } while (0)
