// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// update only takes the parameters of the node's own kind.
#include "common.hpp"
void check(Edit& e, Node<MemsetNode> n, Event ev) { e.update(n, ev); }
