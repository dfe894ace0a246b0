// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The real-driver loader against fake driver libraries (tests/support/fake_cuda.cpp), the CUDA
// toolkit's link stub, and a library that is not a driver: every error path gives its own reason.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/paths.hpp"
#include "tether.hpp"

using tether::DriverUnavailable;
using tether::Unavailable;
using namespace tether::detail;

namespace {

struct FakeMode {
  explicit FakeMode(const char* m) { ::setenv("FAKE_CUDA_MODE", m, 1); }
  ~FakeMode() { ::unsetenv("FAKE_CUDA_MODE"); }
};

// Loads `path` and returns the DriverUnavailable it must throw.
DriverUnavailable load_failure(const char* path) {
  try {
    (void)load_cuda_driver(path);
  } catch (const DriverUnavailable& e) {
    return e;
  }
  FAIL("load_cuda_driver succeeded but was expected to fail");
  return DriverUnavailable(Unavailable::missing_library, "unreachable");
}

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

}  // namespace

TEST_CASE("a missing driver library is reported as missing_library with the loader's reason") {
  DriverUnavailable e = load_failure("/nonexistent/libcuda.so.1");
  CHECK(e.reason() == Unavailable::missing_library);
  CHECK(contains(e.what(), "/nonexistent/libcuda.so.1"));
  CHECK(contains(e.what(), "TETHER_DRIVER=sim"));
}

TEST_CASE("a library without cuGetProcAddress is reported as missing_entry") {
  DriverUnavailable e = load_failure(tether_test::not_cuda_path().c_str());
  CHECK(e.reason() == Unavailable::missing_entry);
  CHECK(contains(e.what(), "cuGetProcAddress_v2"));
}

TEST_CASE("the toolkit's stub driver is reported as stub_library") {
  FakeMode m("stub");
  DriverUnavailable e = load_failure(tether_test::fake_cuda_path().c_str());
  CHECK(e.reason() == Unavailable::stub_library);
  CHECK(contains(e.what(), "CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("the real CUDA toolkit stub library, where installed, is reported as stub_library") {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) {
    MESSAGE("no CUDA toolkit stub at ", stub, "; the fake stub case above covers the path");
    return;
  }
  DriverUnavailable e = load_failure(stub);
  CHECK(e.reason() == Unavailable::stub_library);
}

TEST_CASE("cuInit reporting no device is reported as no_device") {
  FakeMode m("no_device");
  DriverUnavailable e = load_failure(tether_test::fake_cuda_path().c_str());
  CHECK(e.reason() == Unavailable::no_device);
  CHECK(contains(e.what(), "CUDA_ERROR_NO_DEVICE"));
}

TEST_CASE("a driver that initialises but counts zero devices is reported as no_device") {
  FakeMode m("zero_devices");
  DriverUnavailable e = load_failure(tether_test::fake_cuda_path().c_str());
  CHECK(e.reason() == Unavailable::no_device);
}

TEST_CASE("any other cuInit failure is reported as init_failed with the result's name") {
  FakeMode m("init_error");
  DriverUnavailable e = load_failure(tether_test::fake_cuda_path().c_str());
  CHECK(e.reason() == Unavailable::init_failed);
  CHECK(contains(e.what(), "CUDA_ERROR_OPERATING_SYSTEM"));
}

TEST_CASE("a driver older than tether's minimum is reported as too_old with both versions") {
  FakeMode m("old");
  DriverUnavailable e = load_failure(tether_test::fake_cuda_path().c_str());
  CHECK(e.reason() == Unavailable::too_old);
  CHECK(contains(e.what(), "11.8"));
  CHECK(contains(e.what(), "12.3"));
}

TEST_CASE("a driver that cannot resolve a required entry point is reported as missing_entry") {
  FakeMode m("no_graphs");
  DriverUnavailable e = load_failure(tether_test::fake_cuda_path().c_str());
  CHECK(e.reason() == Unavailable::missing_entry);
  CHECK(contains(e.what(), "cuGraphCreate"));
}

TEST_CASE("a working driver fills every entry of the table") {
  FakeMode m("ok");
  std::unique_ptr<DriverTable> t = load_cuda_driver(tether_test::fake_cuda_path().c_str());
  CHECK(t->kind == tether::DriverKind::cuda);
  CHECK(t->version == 13000);
  CHECK(t->device_count == 1);
  for (std::size_t i = 0; i < entry_count; ++i) {
    CAPTURE(entry_names[i]);
    CHECK(t->fn[i] != nullptr);
    CHECK(t->state[i] == EntryState::resolved);
  }
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuGraphCreate>(*t, &g, 0u) == CUDA_SUCCESS);
  CHECK(g != nullptr);
}

TEST_CASE("a failing call through the table throws DriverError with the driver's own description") {
  FakeMode m("ok");
  std::unique_ptr<DriverTable> t = load_cuda_driver(tether_test::fake_cuda_path().c_str());
  CUgraph g = nullptr;
  try {
    call<Entry::cuGraphCreate>(*t, "creating a graph", &g, 7u);
    FAIL("expected a DriverError");
  } catch (const tether::DriverError& e) {
    CHECK(e.entry_point() == "cuGraphCreate");
    CHECK(e.code() == tether::Errc::invalid_value);
    CHECK(e.description() == "fake driver: invalid argument");
    CHECK(std::string(e.what()) ==
          "cuGraphCreate failed with CUDA_ERROR_INVALID_VALUE (1: fake driver: invalid argument) while creating a graph");
  }
}

TEST_CASE("an entry point newer than the driver is stubbed and calling it names the versions") {
  FakeMode m("v12_3");
  std::unique_ptr<DriverTable> t = load_cuda_driver(tether_test::fake_cuda_path().c_str());
  CHECK(t->state[index(Entry::cuEventElapsedTime)] == EntryState::too_old);
  CHECK(t->state[index(Entry::cuGraphAddNode)] == EntryState::resolved);
  float ms = 0;
  CHECK(raw<Entry::cuEventElapsedTime>(*t, &ms, CUevent{}, CUevent{}) == CUDA_ERROR_NOT_SUPPORTED);
  try {
    call<Entry::cuEventElapsedTime>(*t, "timing", &ms, CUevent{}, CUevent{});
    FAIL("expected DriverUnavailable");
  } catch (const DriverUnavailable& e) {
    CHECK(e.reason() == Unavailable::too_old);
    CHECK(std::string(e.what()) ==
          fmt::format("cuEventElapsedTime needs a CUDA 12.8 driver; this driver is 12.3 ({}) while timing",
                      tether_test::fake_cuda_path().c_str()));
  }
}

TEST_CASE("the lazy context of a call is only built when the call fails") {
  FakeMode m("ok");
  std::unique_ptr<DriverTable> t = load_cuda_driver(tether_test::fake_cuda_path().c_str());
  int built = 0;
  CUgraph g = nullptr;
  call<Entry::cuGraphCreate>(*t, [&] { ++built; return std::string("creating"); }, &g, 0u);
  CHECK(built == 0);
  CHECK_THROWS_AS(call<Entry::cuGraphCreate>(*t, [&] { ++built; return std::string("creating"); }, &g, 1u),
                  tether::DriverError);
  CHECK(built == 1);
}

TEST_CASE("entries are found by their unversioned driver names") {
  CHECK(find_entry("cuMemAlloc") == Entry::cuMemAlloc);
  CHECK(find_entry("cuGraphAddKernelNode") == Entry::cuGraphAddKernelNode);
  CHECK_FALSE(find_entry("cuNotAnEntry").has_value());
  CHECK(entry_name(Entry::cuMemAlloc) == "cuMemAlloc");
  CHECK(entry_versions[index(Entry::cuMemAlloc)] == 3020);
}
