// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Loading NCCL at run time: the errors for a missing library, a library that is not NCCL, one too
// old and one missing an entry point (tests/nccl/fake_nccl.cpp), and the real libnccl.so.2 where
// the machine has one.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "nccl/library.hpp"
#include "support/paths.hpp"
#include "tether.hpp"

using namespace tether;

namespace {

nccl::Unavailable failure(std::initializer_list<const char*> paths) {
  try {
    detail::load_nccl(paths);
  } catch (const nccl::Unavailable& e) {
    return e;
  }
  FAIL("the library loaded");
  return nccl::Unavailable(Unavailable::missing_library, "");
}

}  // namespace

TEST_CASE("loading NCCL where there is none names every path tried and what to do") {
  nccl::Unavailable e = failure({"/nonexistent/libnccl.so.2", "libnccl-not-here.so.9"});
  CHECK(e.reason() == Unavailable::missing_library);
  const std::string m = e.what();
  CHECK(m.starts_with("cannot load NCCL: tried /nonexistent/libnccl.so.2 ("));
  CHECK(m.find(", libnccl-not-here.so.9 (") != std::string::npos);
  CHECK(m.find("point TETHER_NCCL_LIBRARY at libnccl.so.2, or use the simulator's NCCL with TETHER_DRIVER=sim") !=
        std::string::npos);
}

TEST_CASE("a library that is not NCCL, one too old, and one missing an entry point are refused, each saying so") {
  const std::string not_nccl = tether_test::beside_executable("../libnot_cuda.so");
  nccl::Unavailable e = failure({not_nccl.c_str()});
  CHECK(e.reason() == Unavailable::missing_entry);
  CHECK(std::string(e.what()) == not_nccl + " does not export ncclGetVersion: it is not an NCCL library");

  const std::string fake = tether_test::beside_executable("libfake_nccl.so");
  ::setenv("FAKE_NCCL_VERSION", "21000", 1);
  e = failure({fake.c_str()});
  CHECK(e.reason() == Unavailable::too_old);
  CHECK(std::string(e.what()) == "NCCL 2.10.0 in " + fake + " is older than tether needs (2.14.0)");
  ::setenv("FAKE_NCCL_VERSION", "22809", 1);
  e = failure({fake.c_str()});
  CHECK(e.reason() == Unavailable::missing_entry);
  CHECK(std::string(e.what()) == fake + " (NCCL 2.28.9) does not export ncclGetUniqueId");
  ::unsetenv("FAKE_NCCL_VERSION");
}

TEST_CASE("the machine's real NCCL, where it has one, loads with every entry point tether uses") {
  std::unique_ptr<detail::NcclTable> t;
  try {
    t = detail::load_nccl({"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2"});
  } catch (const nccl::Unavailable& e) {
    MESSAGE("skipped: no NCCL on this machine (" << e.what() << ")");
    return;
  }
  CHECK(t->version >= 21400);
  CHECK_FALSE(t->simulated);
  for (std::size_t i = 0; i < detail::nccl_entry_count; ++i)
    if (detail::nccl_entry_since[i] <= t->version) CHECK_MESSAGE(t->provided[i], detail::nccl_entry_names[i]);
  // ncclGetUniqueId needs no GPU (it opens NCCL's bootstrap listener).
  detail::nccl_abi::UniqueId id{};
  CHECK(t->ncclGetUniqueId(&id) == detail::nccl_abi::Result::success);
  CHECK(std::string(t->ncclGetErrorString(detail::nccl_abi::Result::invalid_usage)) ==
        "invalid usage (run with NCCL_DEBUG=WARN for details)");
}
