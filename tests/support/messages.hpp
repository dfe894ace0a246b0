// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What the tests check about errors: the message a call throws, and whether it says something.
#pragma once

#include <exception>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

namespace tether_test {

/// The what() of the exception `f` throws, or "no exception".
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

/// Whether `s` contains `part`.
inline bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

/// Whether `f` throws an `E` whose what() contains `part`; prints what it threw instead when not.
template <class E, class F>
bool throws_with(F&& f, std::string_view part) {
  try {
    f();
  } catch (const E& e) {
    if (contains(e.what(), part)) return true;
    std::fprintf(stderr, "threw \"%s\", expected it to contain \"%.*s\"\n", e.what(), static_cast<int>(part.size()),
                 part.data());
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "threw another exception type: \"%s\"\n", e.what());
    return false;
  }
  std::fprintf(stderr, "threw nothing, expected \"%.*s\"\n", static_cast<int>(part.size()), part.data());
  return false;
}

}  // namespace tether_test
