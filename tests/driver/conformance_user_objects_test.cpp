// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 1a-1i and 11x-11z2: user-object creation, reference counts, and when
// and where a destructor runs when the application drops the last reference.
#include <doctest/doctest.h>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {
constexpr unsigned no_sync = static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(
    DriverFixture,
    "1a: cuUserObjectCreate with one reference and NO_DESTRUCTOR_SYNC succeeds and does not run the "
    "destructor") {
  Obj o;
  CUuserObject u = nullptr;
  CUresult r = raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(&o), &obj_destroy, 1u, no_sync);
  CHECK(r == CUDA_SUCCESS);
  CHECK(still_alive(o));
  if (r == CUDA_SUCCESS) {
    CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
    CHECK(wait_count(o));
  }
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "1b 1c 1c2 11l3: cuUserObjectCreate with flags 0, refcount 0, a NULL destroy function or a NULL "
    "out pointer returns CUDA_ERROR_INVALID_VALUE and runs nothing") {
  {  // 1b
    Obj o;
    CUuserObject u = nullptr;
    CUresult r = raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(&o), &obj_destroy, 1u, 0u);
    CHECK(r == CUDA_ERROR_INVALID_VALUE);
    if (r == CUDA_SUCCESS) {
      raw<Entry::cuUserObjectRelease>(t, u, 1u);
      wait_count(o);
    }
  }
  {  // 1c
    Obj o;
    CUuserObject u = nullptr;
    CUresult r = raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(&o), &obj_destroy, 0u, no_sync);
    CHECK(r == CUDA_ERROR_INVALID_VALUE);
    CHECK(still_alive(o));  // the destructor did not run
  }
  {  // 1c2
    CUuserObject u = nullptr;
    CUresult r = raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(nullptr),
                                                static_cast<CUhostFn>(nullptr), 1u, no_sync);
    CHECK(r == CUDA_ERROR_INVALID_VALUE);
  }
  {  // 11l3
    Obj o;
    CUresult r = raw<Entry::cuUserObjectCreate>(t, static_cast<CUuserObject*>(nullptr),
                                                static_cast<void*>(&o), &obj_destroy, 1u, no_sync);
    CHECK(r == CUDA_ERROR_INVALID_VALUE);
    CHECK(still_alive(o));
  }
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "1d: with an initial refcount of 2 the first release keeps the object and the second runs the "
    "destructor once") {
  Obj o;
  CUuserObject u = make_uo(o, 2);
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "1e: cuUserObjectRetain(2) adds two references, release(2) keeps the object, release(1) runs the "
    "destructor once") {
  Obj o;
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuUserObjectRetain>(t, u, 2u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 2u) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "1f 1f2: cuUserObjectRelease dropping the last reference runs the destructor synchronously on the "
    "calling thread, before the call returns") {
  constexpr int trials = 20;
  int before_return = 0;
  int on_caller = 0;
  for (int i = 0; i < trials; ++i) {
    Obj o;
    CUuserObject u = make_uo(o, 1);
    const std::int64_t t0 = now_ns();
    CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
    const std::int64_t t1 = now_ns();
    if (o.count.load() == 1) ++before_return;
    REQUIRE(wait_count(o));  // no driver call while waiting
    if (o.tid.load() == main_tid) ++on_caller;
    CHECK(o.t_start.load() >= t0);
    CHECK(o.t_end.load() <= t1);
  }
  CHECK(before_return == trials);
  CHECK(on_caller == trials);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "1g 1g2: cuUserObjectRelease blocks for the whole duration of the destructor it runs, and two such "
    "releases run their destructors one after the other on the calling thread") {
  constexpr int dtor_ms = 50;
  Obj a;
  Obj b;
  a.sleep_ms = dtor_ms;
  b.sleep_ms = dtor_ms;
  CUuserObject ua = make_uo(a, 1);
  CUuserObject ub = make_uo(b, 1);
  const std::int64_t t0 = now_ns();
  CHECK(raw<Entry::cuUserObjectRelease>(t, ua, 1u) == CUDA_SUCCESS);
  const std::int64_t t1 = now_ns();
  CHECK(raw<Entry::cuUserObjectRelease>(t, ub, 1u) == CUDA_SUCCESS);
  const std::int64_t t2 = now_ns();
  REQUIRE(wait_count(a));
  REQUIRE(wait_count(b));
  CHECK(ms_between(t0, t1) >= dtor_ms - 5);
  CHECK(ms_between(t1, t2) >= dtor_ms - 5);
  const bool overlap = a.t_start.load() < b.t_end.load() && b.t_start.load() < a.t_end.load();
  CHECK_FALSE(overlap);
  CHECK(a.tid.load() == main_tid);
  CHECK(b.tid.load() == main_tid);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "1i: graph host-node callbacks run on a driver thread, not on the thread that runs synchronous "
    "user-object destructors") {
  HostRec h;
  CUgraph g = new_graph();
  add_host(g, h);
  CUgraphExec e = instantiate(g);
  launch(e);
  sync();
  CHECK(h.calls.load() == 1);
  Obj o;
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  REQUIRE(wait_count(o));
  CHECK(o.tid.load() == main_tid);
  CHECK(h.tid.load() != o.tid.load());
  CHECK(h.tid.load() != main_tid);
  destroy_exec(e);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "11x 11y 11z1 11z2: cuUserObjectRetain and cuUserObjectRelease with a count of 0 or a NULL "
                  "object return CUDA_ERROR_INVALID_VALUE and leave the object alive") {
  Obj o;
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuUserObjectRetain>(t, u, 0u) == CUDA_ERROR_INVALID_VALUE);   // 11x
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 0u) == CUDA_ERROR_INVALID_VALUE);  // 11y
  CHECK(raw<Entry::cuUserObjectRetain>(t, static_cast<CUuserObject>(nullptr), 1u) ==
        CUDA_ERROR_INVALID_VALUE);  // 11z1
  CHECK(raw<Entry::cuUserObjectRelease>(t, static_cast<CUuserObject>(nullptr), 1u) ==
        CUDA_ERROR_INVALID_VALUE);  // 11z2
  CHECK(still_alive(o));
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);  // still exactly one reference
  CHECK(ran_once(o));
  finish();
}

TEST_SUITE_END();
