// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A DeviceBuffer is move-only: passing it by lvalue does not compile.
#include "common.hpp"
void check(Edit& e, DeviceBuffer<float>& d) { e.launch(kernel(), Grid{1}, Block{1}, d, 1.0f, 1); }
