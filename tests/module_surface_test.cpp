// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Imports the module and touches every export, so that a missing TETHER_EXPORT or an entity that
// does not survive the module boundary fails here. Textual includes come before the import.
#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>

import tether;

TEST_CASE("the module exports the error types, their category and their formatters") {
  tether::Errc e = tether::Errc::invalid_value;
  std::error_code c = e;  // is_error_code_enum + make_error_code through ADL
  CHECK(c.category() == tether::driver_category());
  CHECK(tether::make_error_code(tether::Errc::not_permitted).value() == 800);
  CHECK(tether::result_name(1) == "CUDA_ERROR_INVALID_VALUE");
  CHECK_FALSE(tether::result_description(1).empty());
  tether::DriverError d("cuGraphCreate", 1, "", "creating a graph");
  CHECK(d.code() == tether::Errc::invalid_value);
  CHECK(d.entry_point() == "cuGraphCreate");
  CHECK(d.result_name() == "CUDA_ERROR_INVALID_VALUE");
  CHECK(d.context() == "creating a graph");
  CHECK_FALSE(d.description().empty());
  CHECK(fmt::format("{}", d) == d.what());
  tether::UsageError u("misuse");
  CHECK(fmt::format("{}", u) == "misuse");
  CHECK(fmt::format("{}", tether::Errc::no_device) == "CUDA_ERROR_NO_DEVICE");
  static_assert(std::is_base_of_v<std::system_error, tether::DriverError>);
  static_assert(std::is_base_of_v<std::logic_error, tether::UsageError>);
}

namespace {
int g_hook_calls = 0;
void hook(const tether::ErrorReport& r) noexcept { g_hook_calls += r.where == "here" ? 1 : 0; }
}  // namespace

TEST_CASE("the module exports the error hook and the unavailability reasons") {
  tether::ErrorHook old = tether::set_error_hook(&hook);
  tether::report_error("here", "x");
  try {
    throw tether::UsageError("y");
  } catch (...) {
    tether::report_current_exception("here");
  }
  tether::set_error_hook(old);
  CHECK(g_hook_calls == 2);
  tether::DriverUnavailable du(tether::Unavailable::too_old, "old");
  CHECK(du.reason() == tether::Unavailable::too_old);
  CHECK(tether::to_string(tether::Unavailable::missing_library) == "missing_library");
}

TEST_CASE("the module exports the runtime and driver kinds") {
  CHECK(tether::to_string(tether::DriverKind::cuda) == "cuda");
  CHECK(tether::to_string(tether::DriverKind::simulated) == "simulated");
  CHECK(tether::driver_version_string(13000) == "13.0");
  try {
    tether::Runtime rt = tether::Runtime::open();
    CHECK(rt.device_count() >= 1);
    CHECK(rt.driver_version() >= 12030);
    CHECK_FALSE(rt.origin().empty());
    CHECK(rt.describe().find(std::string(tether::to_string(rt.kind()))) == 0);
    CHECK(rt == rt);
  } catch (const tether::DriverUnavailable& e) {
    MESSAGE("no driver here: ", e.what());
    CHECK(e.reason() != tether::Unavailable::bad_selection);
  }
  static_assert(std::is_same_v<decltype(&tether::Runtime::cuda), tether::Runtime (*)()>);
  static_assert(std::is_same_v<decltype(&tether::Runtime::simulated), tether::Runtime (*)()>);
}
