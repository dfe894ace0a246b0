// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Header mode: this translation unit includes tether.hpp and never imports the module, as a .cu
// file compiled by nvcc would.
#include <doctest/doctest.h>

#include "tether.hpp"

// Header mode must not see the module's `export`: TETHER_EXPORT expands to nothing here.
#define TETHER_TEST_STR2(x) #x
#define TETHER_TEST_STR(x) TETHER_TEST_STR2(x)
static_assert(sizeof(TETHER_TEST_STR(TETHER_EXPORT)) == 1, "header mode must not see the module's export macro");

TEST_CASE("header mode exposes the same API without importing the module") {
  tether::DriverError e("cuGraphLaunch", 400, "", "");
  CHECK(e.code() == tether::Errc::invalid_handle);
  CHECK(tether::detail::entry_count > 100);
  CHECK(tether::detail::minimum_driver_version == 12030);
}
