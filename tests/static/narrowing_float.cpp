// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A double passed to a float parameter would narrow (write 2.0f).
#include "common.hpp"
void check(GraphExec& x, const Node<KernelNode<float*, float, int>>& n, SharedBuffer<float> b) {
  x.update(n, Grid{1}, Block{1}, b, 2.0, 1);
}
