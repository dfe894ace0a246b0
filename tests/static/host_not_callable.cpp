// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A host node takes a callable with no arguments.
#include "common.hpp"
void check(Edit& e) { e.host(42); }
