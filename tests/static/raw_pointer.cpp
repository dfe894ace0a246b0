// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A raw pointer for a kernel pointer parameter does not compile: nothing would keep it alive.
#include "common.hpp"
void check(Edit& e, float* raw) { e.launch(kernel(), Grid{1}, Block{1}, raw, 1.0f, 1); }
