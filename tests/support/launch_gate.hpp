// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A gate a host node waits on, holding its launch in flight until the test opens it, and the
// check that owners witnessed by a WitnessLog outlive that launch.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "support/dsl_fixture.hpp"

namespace tether_test {

struct LaunchGate {
  std::atomic<bool> open{false};
  std::atomic<int> waiting{0};
  void wait() {
    waiting.fetch_add(1);
    while (!open.load()) std::this_thread::sleep_for(100us);
  }
};

/// With the gated launch in flight and its executable already dropped: checks that the one owner
/// `log` witnesses stays alive, opens the gate, and checks that the owner then dies, on the reclaimer.
inline void check_owner_outlives_launch(LaunchGate& gate, const WitnessLog& log, const tether::Stream& stream) {
  std::this_thread::sleep_for(30ms);
  CHECK(log.destroyed.load() == 0);
  gate.open = true;
  stream.synchronize();
  CHECK(eventually([&] { return log.destroyed.load() == 1; }));
  CHECK(log.outside_reclaimer.load() == 0);
}

}  // namespace tether_test
