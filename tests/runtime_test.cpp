// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver selection (ARCHITECTURE.md §7). Each case runs in a fresh child process.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "support/child.hpp"
#include "support/paths.hpp"
#include "tether.hpp"

using tether_test::run_in_child;

namespace {

// Opens the runtime in a child with the given environment; returns "kind|describe" or "error:<reason>|<what>".
tether_test::ChildResult open_with(const char* driver, const char* library, const char* fake_mode = "ok") {
  return run_in_child([=] {
    if (driver) ::setenv("TETHER_DRIVER", driver, 1); else ::unsetenv("TETHER_DRIVER");
    if (library) ::setenv("TETHER_CUDA_LIBRARY", library, 1); else ::unsetenv("TETHER_CUDA_LIBRARY");
    ::setenv("FAKE_CUDA_MODE", fake_mode, 1);
    try {
      tether::Runtime rt = tether::Runtime::open();
      tether::Runtime again = tether::Runtime::open();
      return std::string(tether::to_string(rt.kind())) + "|" + rt.describe() + (rt == again ? "|same" : "|different");
    } catch (const tether::DriverUnavailable& e) {
      return "error:" + std::string(tether::to_string(e.reason())) + "|" + e.what();
    }
  });
}

bool contains(const std::string& hay, std::string_view needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("TETHER_DRIVER with an unknown value is rejected naming the value") {
  auto r = open_with("gpu", nullptr);
  CHECK(r.output.rfind("error:bad_selection|", 0) == 0);
  CHECK(contains(r.output, "'gpu'"));
}

TEST_CASE("TETHER_DRIVER=cuda opens the real driver and reuses it") {
  auto r = open_with("cuda", tether_test::fake_cuda_path().c_str());
  CHECK(r.output == fmt::format("cuda|cuda driver 13.0 from {}, 1 device|same", tether_test::fake_cuda_path().c_str()));
  CHECK(r.err.empty());
}

TEST_CASE("TETHER_DRIVER=cuda without a usable driver fails with the loader's reason") {
  auto r = open_with("cuda", "/nonexistent/libcuda.so.1");
  CHECK(r.output.rfind("error:missing_library|", 0) == 0);
  auto s = open_with("cuda", tether_test::fake_cuda_path().c_str(), "stub");
  CHECK(s.output.rfind("error:stub_library|", 0) == 0);
}

TEST_CASE("an unset TETHER_DRIVER picks the real driver when it is usable, silently") {
  auto r = open_with(nullptr, tether_test::fake_cuda_path().c_str());
  CHECK(r.output.rfind("cuda|", 0) == 0);
  CHECK(r.err.empty());
}

TEST_CASE("TETHER_DRIVER=sim opens the simulated driver without announcing it") {
  auto r = open_with("sim", nullptr);
  CHECK(r.output == "simulated|simulated driver 13.0 from tether simulator, 1 device|same");
  CHECK(r.err.empty());
}

TEST_CASE("an unset TETHER_DRIVER falls back to the simulator once, announcing why on stderr") {
  auto r = open_with(nullptr, "/nonexistent/libcuda.so.1");
  CHECK(r.output.rfind("simulated|", 0) == 0);
  CHECK(contains(r.err, "using the simulated CUDA driver"));
  CHECK(contains(r.err, "/nonexistent/libcuda.so.1"));
  // Two opens in the child above, one announcement.
  CHECK(r.err.find("using the simulated") == r.err.rfind("using the simulated"));
}

TEST_CASE("TETHER_SIM_DEVICES sets the number of simulated devices") {
  auto r = run_in_child([] {
    ::setenv("TETHER_SIM_DEVICES", "3", 1);
    return std::to_string(tether::Runtime::simulated().device_count());
  });
  CHECK(r.output == "3");
}
