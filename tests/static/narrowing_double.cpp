// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A double passed to an int parameter would narrow: it must not compile silently.
#include "common.hpp"
void check(Edit& e, SharedBuffer<float> x) { e.launch(kernel(), Grid{1}, Block{1}, x, 1.0f, 2.5); }
