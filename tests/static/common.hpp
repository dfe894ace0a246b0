// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// Shared declarations of the compile-failure checks: nothing here is run.
#pragma once
#include "tether.hpp"
using namespace tether;
inline Kernel<float*, float, int>& kernel();
inline Context& context();
