// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include <doctest/doctest.h>

#include <string>
#include <system_error>
#include <vector>

#include "tether.hpp"

using tether::DriverError;
using tether::Errc;

TEST_CASE("a DriverError names the entry point, the CUDA_ERROR name, the code and the context") {
  DriverError e("cuGraphAddKernelNode", 1, "invalid argument", "adding kernel node 'scale' to graph 0x10");
  CHECK(std::string(e.what()) ==
        "cuGraphAddKernelNode failed with CUDA_ERROR_INVALID_VALUE (1: invalid argument) while adding kernel "
        "node 'scale' to graph 0x10");
  CHECK(e.entry_point() == "cuGraphAddKernelNode");
  CHECK(e.result() == 1);
  CHECK(e.result_name() == "CUDA_ERROR_INVALID_VALUE");
  CHECK(e.description() == "invalid argument");
  CHECK(e.context() == "adding kernel node 'scale' to graph 0x10");
}

TEST_CASE("a DriverError without the driver's description uses the headers' one") {
  DriverError e("cuMemAlloc", 2, "", "");
  CHECK(e.description() == tether::result_description(2));
  CHECK(std::string(e.what()).find("CUDA_ERROR_OUT_OF_MEMORY (2: ") != std::string::npos);
  CHECK(std::string(e.what()).find(" while ") == std::string::npos);
}

TEST_CASE("DriverError codes compare equal to Errc values and to codes in the cuda category") {
  DriverError e("cuGraphClone", 801, "", "cloning");
  CHECK(e.code() == Errc::not_supported);
  CHECK(e.code() != Errc::invalid_value);
  CHECK(e.code() == std::error_code(801, tether::driver_category()));
  CHECK(e.code().category() == tether::driver_category());
  CHECK(std::string(e.code().category().name()) == "cuda");
  CHECK(e.code().message().rfind("CUDA_ERROR_NOT_SUPPORTED: ", 0) == 0);
  std::error_code from_enum = Errc::stub_library;
  CHECK(from_enum.value() == 34);
}

TEST_CASE("a DriverError is a std::system_error and can be caught as one") {
  try {
    throw DriverError("cuInit", 100, "", "initialising");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == 100);
  }
}

TEST_CASE("result names cover every code of the headers and unknown codes get a numeric name") {
  CHECK(tether::result_name(0) == "CUDA_SUCCESS");
  CHECK(tether::result_name(34) == "CUDA_ERROR_STUB_LIBRARY");
  CHECK(tether::result_name(800) == "CUDA_ERROR_NOT_PERMITTED");
  CHECK(tether::result_name(999) == "CUDA_ERROR_UNKNOWN");
  CHECK(tether::result_name(123456) == "CUDA_ERROR_123456");
  CHECK(tether::result_description(123456).empty());
  CHECK(tether::driver_category().message(123456).find("unknown") != std::string::npos);
}

TEST_CASE("fmt formats DriverError, UsageError and Errc") {
  DriverError e("cuGraphLaunch", 400, "invalid resource handle", "launching");
  CHECK(fmt::format("{}", e) == e.what());
  tether::UsageError u("node was removed");
  CHECK(fmt::format("[{}]", u) == "[node was removed]");
  CHECK(fmt::format("{}", Errc::invalid_handle) == "CUDA_ERROR_INVALID_HANDLE");
}

namespace {
std::vector<std::string> g_reports;
void capture_hook(const tether::ErrorReport& r) noexcept {
  try {
    g_reports.push_back(std::string(r.where) + "|" + std::string(r.what));
  } catch (...) {
  }
}
}  // namespace

TEST_CASE("the error hook receives reports and can be replaced and restored") {
  g_reports.clear();
  tether::ErrorHook old = tether::set_error_hook(&capture_hook);
  tether::report_error("destroying a stream", "boom");
  try {
    throw DriverError("cuStreamDestroy", 1, "", "");
  } catch (...) {
    tether::report_current_exception("destroying a stream");
  }
  tether::report_current_exception("outside a handler");
  bool restored_ours = tether::set_error_hook(old) == &capture_hook;
  CHECK(restored_ours);
  REQUIRE(g_reports.size() == 3);
  CHECK(g_reports[0] == "destroying a stream|boom");
  CHECK(g_reports[1].rfind("destroying a stream|cuStreamDestroy failed with CUDA_ERROR_INVALID_VALUE", 0) == 0);
  CHECK(g_reports[2] == "outside a handler|(no exception was being handled)");
  tether::report_error("after restore", "goes to the default hook (stderr)");
  CHECK(g_reports.size() == 3);
}

TEST_CASE("setting a null error hook restores the default hook") {
  tether::ErrorHook old = tether::set_error_hook(&capture_hook);
  tether::set_error_hook(nullptr);
  tether::ErrorHook def = tether::set_error_hook(old);
  bool is_default = def != nullptr && def != &capture_hook;
  CHECK(is_default);
}

TEST_CASE("Unavailable reasons have names and DriverUnavailable keeps its reason") {
  CHECK(tether::to_string(tether::Unavailable::stub_library) == "stub_library");
  CHECK(tether::to_string(tether::Unavailable::too_old) == "too_old");
  tether::DriverUnavailable e(tether::Unavailable::no_device, "no device");
  CHECK(e.reason() == tether::Unavailable::no_device);
  CHECK(std::string(e.what()) == "no device");
  CHECK(tether::driver_version_string(13000) == "13.0");
  CHECK(tether::driver_version_string(12030) == "12.3");
}
