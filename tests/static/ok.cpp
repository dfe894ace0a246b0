// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// Positive control: correct uses compile.
#include "common.hpp"
void check(Edit& e, SharedBuffer<float> x, DeviceBuffer<float> d, float* raw) {
  e.launch(kernel(), Grid{1}, Block{1}, x, 1.0f, 1);
  e.launch(kernel(), Grid{1}, Block{1}, std::move(d), 1.0f, 1);
  auto n = e.launch(kernel(), Grid{1}, Block{1}, unowned(raw), 1.0f, 1);
  e.update(n, Grid{1}, Block{1}, x, 2.0f, 2);
  e.memset(x, 1.0f);
  e.host([] {});
}
