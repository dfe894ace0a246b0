// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include <cstdio>
#include <string>

import tether;

int main() {
  try {
    tether::Runtime rt = tether::Runtime::open();
    std::printf("consumer: %s\n", rt.describe().c_str());
  } catch (const tether::DriverUnavailable& e) {
    std::printf("consumer: no driver (%s)\n", std::string(tether::to_string(e.reason())).c_str());
  }
  return 0;
}
