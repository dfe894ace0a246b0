// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What the tests check about errors: the message a call throws, and whether it says something.
#pragma once

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

}  // namespace tether_test
