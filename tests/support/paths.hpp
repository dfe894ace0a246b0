// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Paths of test helper libraries, found next to the test executable so that a build folder
// carried to another machine (the GPU machine) still finds them.
#pragma once

#include <unistd.h>

#include <string>

namespace tether_test {

inline std::string beside_executable(const char* file) {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string exe = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string(".");
  return exe.substr(0, exe.rfind('/') + 1) + file;
}

inline const std::string& fake_cuda_path() {
  static const std::string p = beside_executable("libfake_cuda.so");
  return p;
}
inline const std::string& not_cuda_path() {
  static const std::string p = beside_executable("libnot_cuda.so");
  return p;
}

}  // namespace tether_test
