// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator only: the simulator's explanation of a failed call reaches DriverError::what(), even
// though making the message calls cuGetErrorString (a driver call) first.
#include <doctest/doctest.h>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "support/messages.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

constexpr const char* orphan_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry explain_orphan(.param .u64 explain_orphan_p0)
{
  ret;
}
)PTX";

// What DriverError::what() says when `f` throws one; "" (and a failed check) otherwise.
template <class F>
std::string what_of(F&& f) {
  try {
    f();
  } catch (const tether::DriverError& e) {
    return e.what();
  }
  FAIL_CHECK("no DriverError was thrown");
  return {};
}


}  // namespace

TEST_SUITE_BEGIN("simulator");

TEST_CASE_FIXTURE(DriverFixture,
                  "a DriverError of a kernel lookup without a twin carries the simulator's advice to register one") {
  if (!sim) return;
  CUmodule m = nullptr;
  REQUIRE(raw<Entry::cuModuleLoadData>(t, &m, static_cast<const void*>(orphan_ptx)) == CUDA_SUCCESS);
  CUfunction f = nullptr;
  std::string what = what_of([&] { call<Entry::cuModuleGetFunction>(t, "getting kernel explain_orphan", &f, m, "explain_orphan"); });
  CAPTURE(what);
  CHECK(contains(what, "cuModuleGetFunction"));
  CHECK(contains(what, "CUDA_ERROR_NOT_FOUND"));
  CHECK(contains(what, "while getting kernel explain_orphan"));
  CHECK(contains(what, "simulator: the simulator has no twin for kernel 'explain_orphan'; register one with "
                       "tether::sim::register_kernel<ParamTypes...>(\"explain_orphan\", body)"));
  CHECK(raw<Entry::cuModuleUnload>(t, m) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "a DriverError of a call failed by fail_call says which entry point the fault was injected into") {
  if (!sim) return;
  tether::sim::fail_call("cuGraphCreate", 1, tether::Errc::out_of_memory);
  CUgraph g = nullptr;
  std::string what = what_of([&] { call<Entry::cuGraphCreate>(t, "creating a graph", &g, 0u); });
  CAPTURE(what);
  CHECK(contains(what, "cuGraphCreate"));
  CHECK(contains(what, "CUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(contains(what, "simulator: fault injected by tether::sim::fail_call into cuGraphCreate"));
  CHECK(g == nullptr);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "a DriverError of the library's own API carries the simulator's explanation: Module::kernel of a "
                  "name without a twin says how to register one") {
  if (!sim) return;
  tether::Runtime rt = tether::Runtime::open();
  tether::Context c = rt.context(0);
  tether::Module m = c.load_module(tether::Image::from_ptx(orphan_ptx));
  std::string what = what_of([&] { (void)m.kernel<std::uint64_t>("explain_orphan"); });
  CAPTURE(what);
  CHECK(contains(what, "CUDA_ERROR_NOT_FOUND"));
  CHECK(contains(what, "register one with tether::sim::register_kernel"));
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "a capture invalidated by a synchronous free on another thread explains the capture-mode rule in "
                  "the DriverError") {
  if (!sim) return;
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(t, &d, std::size_t{4096}) == CUDA_SUCCESS);
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  std::string what;
  std::thread other([&] {
    REQUIRE(raw<Entry::cuCtxSetCurrent>(t, ctx) == CUDA_SUCCESS);
    what = what_of([&] { call<Entry::cuMemFree>(t, "freeing a buffer", d); });
  });
  other.join();
  CAPTURE(what);
  CHECK(contains(what, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"));
  CHECK(contains(what, "simulator: cuMemFree is not permitted while a stream captures in GLOBAL mode"));
  CHECK(contains(what, "cuThreadExchangeStreamCaptureMode(CU_STREAM_CAPTURE_MODE_RELAXED)"));
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(raw<Entry::cuMemFree>(t, d) == CUDA_SUCCESS);  // the refused free did nothing
  destroy_stream(s);
  finish();
}

TEST_SUITE_END();
