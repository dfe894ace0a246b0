// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The random source of the model checkers (tests/reliability/model.hpp, tests/nccl/nccl_model_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tether_test {

/// splitmix64: small, fast, and the same on every platform (unlike std distributions), so that a
/// seed names one sequence everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (n > 0).
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  /// True with probability p.
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }

 private:
  std::uint64_t s_;
};

}  // namespace tether_test
