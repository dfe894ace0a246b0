// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The simulator's own test API (src/sim/sim.hpp): fault injection, call counts, kernel twins,
// the use-after-free detector, live-object statistics and quiesce. These have no real-driver
// counterpart, so each test returns early on the real driver.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

// Kernels that exist only for these tests (the PTX bodies do nothing: only twins run them).
// "orphan" never gets a twin.
constexpr const char* sim_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry touch(.param .u64 touch_p0)
{
  ret;
}

.visible .entry fill(.param .u64 fill_p0, .param .f32 fill_p1, .param .u32 fill_p2)
{
  ret;
}

.visible .entry orphan(.param .u64 orphan_p0)
{
  ret;
}
)PTX";

std::atomic<int> g_touch_runs{0};

struct FillSeen {
  std::atomic<int> runs{0};
  std::array<unsigned, 3> grid{};
  std::array<unsigned, 3> block{};
  float value = 0;
  unsigned n = 0;
};
FillSeen g_fill;

void register_sim_twins() {
  using tether::sim::LaunchInfo;
  tether::sim::register_kernel<float*>("touch", [](const LaunchInfo&, float*) { g_touch_runs.fetch_add(1); });
  tether::sim::register_kernel<float*, float, unsigned>(
      "fill", [](const LaunchInfo& info, float* p, float v, unsigned n) {
        g_fill.grid = info.grid;
        g_fill.block = info.block;
        g_fill.value = v;
        g_fill.n = n;
        for (unsigned i = 0; i < n; ++i) p[i] = v + static_cast<float>(i);
        g_fill.runs.fetch_add(1);
      });
  tether::sim::unregister_kernel("orphan");
}

CUmodule load_sim_module() {
  register_sim_twins();
  CUmodule m = nullptr;
  REQUIRE(raw<Entry::cuModuleLoadData>(table(), &m, static_cast<const void*>(sim_ptx)) == CUDA_SUCCESS);
  return m;
}

bool skip_on_real_driver() {
  if (on_simulator()) return false;
  MESSAGE("skipped on the real driver: this tests the simulator's own API");
  return true;
}

}  // namespace

TEST_SUITE_BEGIN("simulator only");

TEST_CASE_FIXTURE(
    DriverFixture,
    "fail_call on a named entry point fails exactly its nth call with the chosen result, then stops") {
  if (skip_on_real_driver()) return;
  const std::uint64_t injected_before = tether::sim::injected_faults();
  tether::sim::fail_call("cuGraphCreate", 2, tether::Errc::invalid_handle);
  CUgraph g1 = nullptr;
  CUgraph g2 = nullptr;
  CUgraph g3 = nullptr;
  CUgraph g4 = nullptr;
  CHECK(raw<Entry::cuGraphCreate>(t, &g1, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphCreate>(t, &g2, 0u) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(raw<Entry::cuGraphCreate>(t, &g3, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphCreate>(t, &g4, 0u) == CUDA_SUCCESS);
  CHECK(g2 == nullptr);  // the failed call did nothing
  CHECK(tether::sim::injected_faults() == injected_before + 1);
  for (CUgraph g : {g1, g3, g4})
    if (g != nullptr) destroy_graph(g);
  tether::sim::clear_faults();
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "fail_call with \"*\" fails the nth call of any entry point") {
  if (skip_on_real_driver()) return;
  tether::sim::fail_call("*", 1, tether::Errc::out_of_memory);
  CHECK(raw<Entry::cuStreamQuery>(t, stream) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(raw<Entry::cuStreamQuery>(t, stream) == CUDA_SUCCESS);
  tether::sim::fail_call("*", 2, tether::Errc::not_permitted);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamQuery>(t, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphCreate>(t, &g, 0u) == CUDA_ERROR_NOT_PERMITTED);
  CHECK(raw<Entry::cuGraphCreate>(t, &g, 0u) == CUDA_SUCCESS);
  if (g != nullptr) destroy_graph(g);
  tether::sim::clear_faults();
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "clear_faults drops pending faults") {
  if (skip_on_real_driver()) return;
  tether::sim::fail_call("cuGraphCreate", 1, tether::Errc::out_of_memory);
  tether::sim::clear_faults();
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuGraphCreate>(t, &g, 0u) == CUDA_SUCCESS);
  if (g != nullptr) destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "call_count counts the calls of one entry point and of all of them") {
  if (skip_on_real_driver()) return;
  tether::sim::reset_call_counts();
  CHECK(tether::sim::call_count("cuGraphCreate") == 0);
  std::vector<CUgraph> gs(3, nullptr);
  for (CUgraph& g : gs) CHECK(raw<Entry::cuGraphCreate>(t, &g, 0u) == CUDA_SUCCESS);
  for (CUgraph g : gs) CHECK(raw<Entry::cuGraphDestroy>(t, g) == CUDA_SUCCESS);
  CHECK(tether::sim::call_count("cuGraphCreate") == 3);
  CHECK(tether::sim::call_count("cuGraphDestroy") == 3);
  CHECK(tether::sim::call_count("cuGraphClone") == 0);
  CHECK(tether::sim::call_count("*") >= 6);
  tether::sim::reset_call_counts();
  CHECK(tether::sim::call_count("cuGraphCreate") == 0);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "a kernel launch whose pointer argument points into freed memory records use_after_free and does "
    "not run the twin") {
  if (skip_on_real_driver()) return;
  CUmodule m = load_sim_module();
  CUfunction touch = nullptr;
  REQUIRE(raw<Entry::cuModuleGetFunction>(t, &touch, m, "touch") == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(t, &d, std::size_t{1024}) == CUDA_SUCCESS);
  CUdeviceptr inside = d + 64;  // any address within the freed block
  CHECK(raw<Entry::cuMemFree>(t, d) == CUDA_SUCCESS);
  g_touch_runs.store(0);
  void* args[] = {&inside};
  {
    tether::sim::ExpectViolations expected;  // use_after_free, found by the stream's thread
    CHECK(raw<Entry::cuLaunchKernel>(t, touch, 1u, 1u, 1u, 1u, 1u, 1u, 0u, stream, args,
                                     static_cast<void**>(nullptr)) == CUDA_SUCCESS);
    (void)raw<Entry::cuStreamSynchronize>(t, stream);
    CHECK(expected.absorbed() == 1);
  }
  CHECK(g_touch_runs.load() == 0);
  expect_violations(tether::sim::ViolationKind::use_after_free);
  CHECK(raw<Entry::cuModuleUnload>(t, m) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "a twin receives the launch's real argument values and writes device memory that cuMemcpyDtoH "
    "reads back") {
  if (skip_on_real_driver()) return;
  CUmodule m = load_sim_module();
  CUfunction fill = nullptr;
  REQUIRE(raw<Entry::cuModuleGetFunction>(t, &fill, m, "fill") == CUDA_SUCCESS);
  constexpr unsigned n = 64;
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(t, &d, std::size_t{n} * sizeof(float)) == CUDA_SUCCESS);
  g_fill.runs.store(0);
  float value = 2.5f;
  unsigned count = n;
  void* args[] = {&d, &value, &count};
  CHECK(raw<Entry::cuLaunchKernel>(t, fill, 2u, 1u, 1u, 32u, 1u, 1u, 0u, stream, args,
                                   static_cast<void**>(nullptr)) == CUDA_SUCCESS);
  sync();
  CHECK(g_fill.runs.load() == 1);
  CHECK(g_fill.value == 2.5f);
  CHECK(g_fill.n == n);
  CHECK(g_fill.grid == std::array<unsigned, 3>{2, 1, 1});
  CHECK(g_fill.block == std::array<unsigned, 3>{32, 1, 1});
  std::vector<float> host(n, -1.0f);
  CHECK(raw<Entry::cuMemcpyDtoH>(t, static_cast<void*>(host.data()), d, std::size_t{n} * sizeof(float)) ==
        CUDA_SUCCESS);
  for (unsigned i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(host[i] == 2.5f + static_cast<float>(i));
  }
  CHECK(raw<Entry::cuMemFree>(t, d) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuModuleUnload>(t, m) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "cuModuleGetFunction of a kernel without a twin fails with CUDA_ERROR_NOT_FOUND") {
  if (skip_on_real_driver()) return;
  CUmodule m = load_sim_module();
  CUfunction f = nullptr;
  CHECK(raw<Entry::cuModuleGetFunction>(t, &f, m, "orphan") == CUDA_ERROR_NOT_FOUND);  // in the PTX, no twin
  CHECK(raw<Entry::cuModuleGetFunction>(t, &f, m, "no_such_kernel") == CUDA_ERROR_NOT_FOUND);
  CHECK(raw<Entry::cuModuleUnload>(t, m) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "stats counts live objects and returns to its starting values after cleanup") {
  if (skip_on_real_driver()) return;
  REQUIRE(tether::sim::quiesce(std::chrono::seconds(3)));
  const tether::sim::Stats before = tether::sim::stats();

  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(t, &d, std::size_t{256}) == CUDA_SUCCESS);
  void* hp = nullptr;
  REQUIRE(raw<Entry::cuMemAllocHost>(t, &hp, std::size_t{256}) == CUDA_SUCCESS);
  Obj o;
  CUuserObject u = make_uo(o, 1);
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  CUgraphExec e = instantiate(g);
  CUstream s = new_stream();
  CUevent ev = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev, 0u) == CUDA_SUCCESS);
  CUmodule m = load_sim_module();

  const tether::sim::Stats during = tether::sim::stats();
  CHECK(during.device_allocations == before.device_allocations + 1);
  CHECK(during.host_allocations == before.host_allocations + 1);
  CHECK(during.user_objects == before.user_objects + 1);
  CHECK(during.graphs == before.graphs + 1);
  CHECK(during.execs == before.execs + 1);
  CHECK(during.streams == before.streams + 1);
  CHECK(during.events == before.events + 1);
  CHECK(during.modules == before.modules + 1);

  CHECK(raw<Entry::cuModuleUnload>(t, m) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuEventDestroy>(t, ev) == CUDA_SUCCESS);
  destroy_stream(s);
  destroy_exec(e);
  destroy_graph(g);
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemFreeHost>(t, hp) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemFree>(t, d) == CUDA_SUCCESS);
  CHECK(tether::sim::quiesce(std::chrono::seconds(3)));

  const tether::sim::Stats after = tether::sim::stats();
  CHECK(after.device_allocations == before.device_allocations);
  CHECK(after.host_allocations == before.host_allocations);
  CHECK(after.user_objects == before.user_objects);
  CHECK(after.graphs == before.graphs);
  CHECK(after.execs == before.execs);
  CHECK(after.streams == before.streams);
  CHECK(after.events == before.events);
  CHECK(after.modules == before.modules);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "quiesce returns true once every stream is idle and every deferred destructor has run") {
  if (skip_on_real_driver()) return;
  Obj o;
  CUgraph g = new_graph();
  add_kernel(g, spin, 30 * ms_ns);
  attach(g, o);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  launch(e);
  destroy_exec(e);  // the destructor is deferred until the launch completes
  CHECK(tether::sim::quiesce(std::chrono::seconds(3)));
  CHECK(o.count.load() == 1);  // quiesce waited for it
  CHECK(raw<Entry::cuStreamQuery>(t, stream) == CUDA_SUCCESS);
  finish();
}

TEST_SUITE_END();
