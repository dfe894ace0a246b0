// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// The number of arguments must match the kernel's parameter list.
#include "common.hpp"
void check(Edit& e, SharedBuffer<float> x) { e.launch(kernel(), Grid{1}, Block{1}, x, 1.0f); }
