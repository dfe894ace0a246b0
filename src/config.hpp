// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// TETHER_EXPORT marks the public namespace blocks. modules/tether.cppm defines it as `export`
// before including the headers in the module purview; in header mode it expands to nothing.
#pragma once

#ifndef TETHER_EXPORT
#define TETHER_EXPORT
#endif
