// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 01 — quickstart: open the driver (the real one when a GPU is usable, otherwise the simulator)
// and say what was opened.
#include <cstdio>
#include <string>

import tether;

int main() try {
  tether::Runtime rt = tether::Runtime::open();
  std::printf("tether quickstart: %s\n", rt.describe().c_str());
  return 0;
} catch (const tether::DriverUnavailable& e) {
  std::fprintf(stderr, "tether quickstart: %s\n", e.what());
  return 1;
}
