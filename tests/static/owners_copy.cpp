// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// An owner bundle is move-only.
#include "common.hpp"
void check(const Owners& o) { Owners copy = o; (void)copy; }
