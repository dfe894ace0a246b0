// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// Memory allocation nodes cannot be added to a conditional body.
#include "common.hpp"
void check(BodyEdit& e) { e.alloc<float>(4); }
