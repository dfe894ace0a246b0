// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The reports tether's error hook delivers, collected for a test to read (the failure sweeps, the
// NCCL tests).
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tether.hpp"

namespace tether_test {

/// The process's collected reports, "where: what" each. `collect` is an ErrorHook.
struct ReportLog {
  static void collect(const tether::ErrorReport& r) noexcept {
    try {
      std::lock_guard lock(mu());
      lines().push_back(std::string(r.where) + ": " + std::string(r.what));
    } catch (...) {
    }
  }
  /// The reports collected since the last take, which are forgotten.
  static std::vector<std::string> take() {
    std::lock_guard lock(mu());
    return std::exchange(lines(), {});
  }
  /// The reports collected so far, a line each.
  static std::string all() {
    std::lock_guard lock(mu());
    std::string s;
    for (const auto& l : lines()) s += l + "\n";
    return s;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> l;
    return l;
  }
};

/// Collects the error hook's reports into ReportLog for its lifetime (forgetting older ones), and
/// puts the previous hook back.
class HookLog {
 public:
  HookLog() : previous_(tether::set_error_hook(&ReportLog::collect)) { (void)ReportLog::take(); }
  ~HookLog() { tether::set_error_hook(previous_); }
  HookLog(const HookLog&) = delete;
  HookLog& operator=(const HookLog&) = delete;
  static std::string all() { return ReportLog::all(); }

 private:
  tether::ErrorHook previous_;
};

}  // namespace tether_test
