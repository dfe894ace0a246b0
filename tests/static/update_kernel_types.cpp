// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A kernel node's update is checked against the kernel's parameter list like launch.
#include "common.hpp"
void check(Edit& e, Node<KernelNode<float*, float, int>> n, float* raw) { e.update(n, Grid{1}, Block{1}, raw, 1.0f, 1); }
