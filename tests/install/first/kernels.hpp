// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What kernels.cu gives the rest of the first program (docs/first-program.md).
#pragma once

#include <tether/tether.hpp>

// saxpy(a, x, y, n): y[i] += a * x[i], as a typed kernel of `ctx`.
tether::Kernel<float, const float*, float*, int> saxpy_kernel(const tether::Context& ctx);

// Registers the simulator's twin of every kernel of kernels.cu.
void register_twins();
