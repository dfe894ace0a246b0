// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// A std::size_t passed to an int parameter would narrow, in an update too.
#include "common.hpp"
void check(Edit& e, const Node<KernelNode<float*, float, int>>& n, SharedBuffer<float> x, std::size_t count) {
  e.update(n, Launch{Grid{1}, Block{1}}, x, 1.0f, count);
}
