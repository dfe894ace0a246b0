// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
import tether;
// The module-only test, part 2: `import tether;` first, then the textual includes an importer's own
// code needs, in the order docs/modules.md recommends. It covers what part 1
// (module_only_test.cpp, which includes nothing) cannot: the {fmt} formatters (calling fmt::format
// needs <fmt/format.h>), std::hash of node handles and views in unordered containers, comparing
// an error with an Errc (<system_error>), the reclaimer's waits (<chrono>), and an owner type with
// a `tether_owner_label` of its own (<string>). It also provides part 1's kernel image.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "support/paths.hpp"

namespace tether_module_only {
tether::Image test_kernels() { return tether::Image::from_file(tether_test::beside_executable("kernels.fatbin")); }
}  // namespace tether_module_only
