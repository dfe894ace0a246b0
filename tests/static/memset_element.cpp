// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// memset sets 8-, 16- or 32-bit values only.
#include "common.hpp"
void check(Edit& e, SharedBuffer<double> x) { e.memset(x, 1.0); }
