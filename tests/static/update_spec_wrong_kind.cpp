// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
// An update takes a spec of the node's own kind.
#include "common.hpp"
void check(Edit& e, Node<HostNode> n, SharedBuffer<float> s) { e.update(n, tether::memset(s, 0.0f)); }
