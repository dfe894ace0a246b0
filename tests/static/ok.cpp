// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// Positive control: correct uses compile.
#include "common.hpp"
void check(Edit& e, GraphExec& x, SharedBuffer<float> s, DeviceBuffer<float> d, float* raw, short small) {
  e.launch(kernel(), Grid{1}, Block{1}, s, 1.0f, 1);
  e.launch(kernel(), Grid{1}, Block{1}, std::move(d), 1.0f, 1);
  auto n = e.launch(kernel(), Launch{Grid{1}, Block{1}}.shared_memory(64 << 10).priority(1), unowned(raw), 1.0f, 1);
  e.update(n, Grid{1}, Block{1}, s, 2.0f, small);  // short -> int widens
  e.update(n, tether::kernel(kernel(), Launch{Grid{2}, Block{32}}, s, 2.0f, 2).keeping(Owners{s}));
  e.add(tether::memset(s, 0.0f).keeping(Owners{s}));
  e.after(n).add(tether::host([] {}));
  x.update(n, Launch{Grid{1}, Block{1}}.shared_memory(1024), s, 3.0f, 3);
  x.update(n, tether::kernel(kernel(), Grid{1}, Block{1}, s, 3.0f, 3).keeping(Owners{s}));
  e.memset(s, 1.0f);
  e.host([] {});
}
