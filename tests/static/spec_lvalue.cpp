// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A spec makes one node version: giving an lvalue spec to a consumer does not compile.
#include "common.hpp"
void check(Edit& e, SharedBuffer<float> s) {
  auto spec = tether::memset(s, 0.0f);
  e.add(spec);
}
