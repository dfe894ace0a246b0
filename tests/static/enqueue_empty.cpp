// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// Stream work has no empty operation.
#include "common.hpp"
void check(const Stream& s) { tether::enqueue(s, tether::empty()); }
