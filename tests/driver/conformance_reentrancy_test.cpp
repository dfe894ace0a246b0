// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 9a-9j: driver calls made from inside user-object destructors
// (synchronous and deferred) and graph host-node callbacks. The real driver answers most with
// CUDA_ERROR_NOT_PERMITTED; the simulator additionally records each such call as a violation
// (call_in_destructor / call_in_callback), which these tests expect and clear.
#include <doctest/doctest.h>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;
using tether::sim::ViolationKind;

namespace {

// After a call from a destructor or callback: the context and stream still work.
void check_still_usable(CUfunction noop, CUstream stream) {
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  CUgraphExec e = nullptr;
  CHECK(raw<Entry::cuGraphInstantiateWithFlags>(table(), &e, g, 0ull) == CUDA_SUCCESS);
  if (e != nullptr) {
    CHECK(raw<Entry::cuGraphLaunch>(table(), e, stream) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuStreamSynchronize>(table(), stream) == CUDA_SUCCESS);
    destroy_exec(e);
  }
  destroy_graph(g);
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(
    DriverFixture,
    "9a 9a2 9b 9b2 9c 9c2: inside a synchronous user-object destructor cuCtxGetCurrent and cuMemFree "
    "return CUDA_ERROR_NOT_PERMITTED, cuStreamQuery returns CUDA_SUCCESS, and the context stays "
    "usable") {
  struct Case {
    const char* name;
    InsideCall call;
    CUresult expected;
  };
  const Case cases[] = {
      {"9a cuCtxGetCurrent", InsideCall::ctx_get_current, CUDA_ERROR_NOT_PERMITTED},
      {"9b cuMemFree", InsideCall::mem_free, CUDA_ERROR_NOT_PERMITTED},
      {"9c cuStreamQuery", InsideCall::stream_query, CUDA_SUCCESS},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Obj o;
    o.call = c.call;
    if (c.call == InsideCall::mem_free)
      REQUIRE(raw<Entry::cuMemAlloc>(t, &o.dptr, std::size_t{1} << 20) == CUDA_SUCCESS);
    CUuserObject u = make_uo(o, 1);
    {
      tether::sim::ExpectViolations expected;  // the destructor's call (call_in_destructor)
      CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
      REQUIRE(wait_count(o));  // the destructor returned: nothing hung
    }
    CHECK(o.api_done.load());
    CHECK(o.result() == c.expected);
    CHECK(o.tid.load() == main_tid);
    expect_violations(ViolationKind::call_in_destructor);
    if (o.dptr != 0) CHECK(raw<Entry::cuMemFree>(t, o.dptr) == CUDA_SUCCESS);  // the refused free did nothing
    check_still_usable(noop, stream);                                          // 9a2 9b2 9c2
  }
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "9d 9d2 9e 9e2 9f 9f2: inside a graph host-node callback cuCtxGetCurrent, cuMemFree and cuMemAlloc "
    "return CUDA_ERROR_NOT_PERMITTED, the stream completes, and the exec launches again") {
  struct Case {
    const char* name;
    InsideCall call;
  };
  const Case cases[] = {
      {"9d cuCtxGetCurrent", InsideCall::ctx_get_current},
      {"9e cuMemFree", InsideCall::mem_free},
      {"9f cuMemAlloc", InsideCall::mem_alloc},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    HostRec h;
    h.call = c.call;
    if (c.call == InsideCall::mem_free)
      REQUIRE(raw<Entry::cuMemAlloc>(t, &h.dptr, std::size_t{1} << 20) == CUDA_SUCCESS);
    CUgraph g = new_graph();
    add_host(g, h);
    CUgraphExec e = instantiate(g);
    {
      tether::sim::ExpectViolations expected;  // the callback's call (call_in_callback)
      launch(e);
      CHECK(wait_stream_idle() == CUDA_SUCCESS);
    }
    CHECK(h.calls.load() == 1);
    CHECK(h.result() == CUDA_ERROR_NOT_PERMITTED);
    CHECK(h.tid.load() != main_tid);
    expect_violations(ViolationKind::call_in_callback);
    // 9d2 9e2 9f2: launch again (the callback makes its call again)
    {
      tether::sim::ExpectViolations expected;  // the callback's call again
      CHECK(raw<Entry::cuGraphLaunch>(t, e, stream) == CUDA_SUCCESS);
      CHECK(raw<Entry::cuStreamSynchronize>(t, stream) == CUDA_SUCCESS);
    }
    CHECK(h.calls.load() == 2);
    expect_violations(ViolationKind::call_in_callback);
    destroy_exec(e);
    destroy_graph(g);
    if (h.dptr != 0) CHECK(raw<Entry::cuMemFree>(t, h.dptr) == CUDA_SUCCESS);
  }
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "9g 9g2: cuUserObjectRelease of another object inside a synchronous destructor succeeds and runs "
    "the other destructor nested, on the same thread") {
  Obj o;
  Obj b;
  o.call = InsideCall::release_other;
  o.other = make_uo(b, 1);
  CUuserObject u = make_uo(o, 1);
  {
    tether::sim::ExpectViolations expected;  // the destructor's call (call_in_destructor)
    CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
    REQUIRE(wait_count(o));
  }
  CHECK(o.result() == CUDA_SUCCESS);
  CHECK(o.tid.load() == main_tid);
  CHECK(wait_count(b, 1, 1000));
  CHECK(b.tid.load() == o.tid.load());
  CHECK(b.t_end.load() <= o.t_end.load());  // nested: finished inside o's destructor
  expect_violations(ViolationKind::call_in_destructor);
  sync();  // 9g2
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "9h 9h2 9i 9i2 9j 9j2: inside a deferred destructor on a driver thread cuCtxGetCurrent and "
    "cuMemFree return CUDA_ERROR_NOT_PERMITTED, cuUserObjectRelease of another object succeeds and runs "
    "its destructor nested on that thread, and the stream stays usable") {
  struct Case {
    const char* name;
    InsideCall call;
    CUresult expected;
  };
  const Case cases[] = {
      {"9h cuCtxGetCurrent", InsideCall::ctx_get_current, CUDA_ERROR_NOT_PERMITTED},
      {"9i cuMemFree", InsideCall::mem_free, CUDA_ERROR_NOT_PERMITTED},
      {"9j cuUserObjectRelease(other)", InsideCall::release_other, CUDA_SUCCESS},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Obj o;
    Obj b;
    o.call = c.call;
    if (c.call == InsideCall::mem_free)
      REQUIRE(raw<Entry::cuMemAlloc>(t, &o.dptr, std::size_t{1} << 20) == CUDA_SUCCESS);
    if (c.call == InsideCall::release_other) o.other = make_uo(b, 1);
    // The last reference is dropped by cuGraphExecDestroy while a 50 ms launch is pending.
    CUgraph g = new_graph();
    add_kernel(g, spin, 50 * ms_ns);
    attach(g, o);
    CUgraphExec e = instantiate(g);
    destroy_graph(g);
    {
      tether::sim::ExpectViolations expected;  // the deferred destructor's call (call_in_destructor)
      launch(e);
      destroy_exec(e);
      REQUIRE(wait_count(o, 1, wait_ms));
    }
    CHECK(o.api_done.load());
    CHECK(o.result() == c.expected);
    CHECK(o.tid.load() != main_tid);
    if (c.call == InsideCall::release_other) {
      CHECK(wait_count(b, 1, 1000));
      CHECK(b.tid.load() == o.tid.load());
    }
    CHECK(raw<Entry::cuStreamSynchronize>(t, stream) == CUDA_SUCCESS);  // 9h2 9i2 9j2
    expect_violations(ViolationKind::call_in_destructor);
    if (o.dptr != 0) CHECK(raw<Entry::cuMemFree>(t, o.dptr) == CUDA_SUCCESS);
  }
  finish();
}

TEST_SUITE_END();
