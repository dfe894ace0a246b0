// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A buffer of another element type does not bind to a float* parameter.
#include "common.hpp"
void check(Edit& e, SharedBuffer<int> x) { e.launch(kernel(), Grid{1}, Block{1}, x, 1.0f, 1); }
