// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, ctx_block_probe (4f, 4m, C1, C2, 4b-4r, 4l, T) and block_probe "free": which
// driver calls block while a host callback (graph host node or cuLaunchHostFunc) runs, and the one
// callback thread that serves every host function of the process. Each case blocks a callback on
// a latch, probes calls from other threads with a bounded wait, then releases the latch.
#include <doctest/doctest.h>

#include "conformance_threads.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

constexpr BlockBy both[] = {BlockBy::host_node, BlockBy::launch_host_func};

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "4f C1 C2: while a host callback blocks, cuMemFree and cuStreamSynchronize of its stream do not "
                  "return, cuStreamQuery of the stream returns CUDA_ERROR_NOT_READY at once, and both return "
                  "CUDA_SUCCESS once the callback returns") {
  for (BlockBy by : both) {
    INFO(std::string(to_text(by)));
    CUdeviceptr d = 0;
    REQUIRE(raw<Entry::cuMemAlloc>(t, &d, std::size_t{1} << 20) == CUDA_SUCCESS);
    Blocker b(by);
    Call free_call(ctx, [&] { return raw<Entry::cuMemFree>(table(), d); });
    Call sync_call(ctx, [&] { return raw<Entry::cuStreamSynchronize>(table(), b.s); });
    CHECK_MESSAGE(!free_call.returned_within(probe_ms), "cuMemFree returned within 200 ms");
    CHECK_MESSAGE(!sync_call.returned_within(0), "cuStreamSynchronize returned within 200 ms");
    CHECK(raw<Entry::cuStreamQuery>(t, b.s) == CUDA_ERROR_NOT_READY);
    CHECK(b.latch.returned.load() == 0);
    b.release();
    REQUIRE(free_call.returned_within(wait_ms));
    CHECK(free_call.result() == CUDA_SUCCESS);
    REQUIRE(sync_call.returned_within(wait_ms));
    CHECK(sync_call.result() == CUDA_SUCCESS);
    CHECK(b.latch.returned.load() == 1);
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "4m: cuModuleLoadData does not return while a host callback blocks and loads the module once the "
                  "callback returns") {
  for (BlockBy by : both) {
    INFO(std::string(to_text(by)));
    CUmodule m = nullptr;
    Blocker b(by);
    Call load(ctx, [&] { return raw<Entry::cuModuleLoadData>(table(), &m, static_cast<const void*>(probe_ptx)); });
    CHECK_MESSAGE(!load.returned_within(probe_ms), "cuModuleLoadData returned within 200 ms");
    b.release();
    REQUIRE(load.returned_within(wait_ms));
    CHECK(load.result() == CUDA_SUCCESS);
    CUfunction f = nullptr;
    CHECK(raw<Entry::cuModuleGetFunction>(t, &f, m, "noop") == CUDA_SUCCESS);
    CHECK(raw<Entry::cuModuleUnload>(t, m) == CUDA_SUCCESS);
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "block_probe free: while a thread waits in cuMemFree for a blocked callback, cuMemAlloc and "
                  "cuStreamCreate on other threads do not return until that cuMemFree returns, context calls and "
                  "cuGraphExecHostNodeSetParams return at once, and everything succeeds once the callback returns") {
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(t, &d, std::size_t{1} << 20) == CUDA_SUCCESS);
  Blocker b(BlockBy::host_node);
  Call free_call(ctx, [&] { return raw<Entry::cuMemFree>(table(), d); });
  REQUIRE_MESSAGE(!free_call.returned_within(probe_ms), "cuMemFree returned within 200 ms");

  CUdeviceptr d2 = 0;
  Call alloc_call(ctx, [&] { return raw<Entry::cuMemAlloc>(table(), &d2, std::size_t{1} << 20); });
  CHECK_MESSAGE(!alloc_call.returned_within(probe_ms),
                "cuMemAlloc returned within 200 ms while another thread was blocked in cuMemFree");

  {
    Call c(ctx, [&] {
      CUcontext cur = nullptr;
      CUresult r = raw<Entry::cuCtxGetCurrent>(table(), &cur);
      if (r == CUDA_SUCCESS) r = raw<Entry::cuCtxPushCurrent>(table(), ctx);
      CUcontext popped = nullptr;
      if (r == CUDA_SUCCESS) r = raw<Entry::cuCtxPopCurrent>(table(), &popped);
      if (r == CUDA_SUCCESS) r = raw<Entry::cuCtxSetCurrent>(table(), ctx);
      return r;
    });
    CHECK_MESSAGE(c.returned_within(quick_ms), "context get/push/pop/set did not return within 200 ms");
    CHECK(c.result() == CUDA_SUCCESS);
  }
  {
    Call c(ctx, [&] {
      CUDA_HOST_NODE_PARAMS hp{};
      hp.fn = &latch_fn;
      hp.userData = &b.latch;
      return raw<Entry::cuGraphExecHostNodeSetParams>(table(), b.e, b.host, &hp);
    });
    CHECK_MESSAGE(c.returned_within(quick_ms), "cuGraphExecHostNodeSetParams did not return within 200 ms");
    CHECK(c.result() == CUDA_SUCCESS);
  }
  CUstream s2 = nullptr;
  Call create_call(ctx, [&] { return raw<Entry::cuStreamCreate>(table(), &s2, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)); });
  CHECK_MESSAGE(!create_call.returned_within(probe_ms),
                "cuStreamCreate returned within 200 ms while another thread was blocked in cuMemFree");

  b.release();
  REQUIRE(create_call.returned_within(wait_ms));
  CHECK(create_call.result() == CUDA_SUCCESS);
  REQUIRE(free_call.returned_within(wait_ms));
  CHECK(free_call.result() == CUDA_SUCCESS);
  REQUIRE(alloc_call.returned_within(wait_ms));
  CHECK(alloc_call.result() == CUDA_SUCCESS);
  if (d2 != 0) CHECK(raw<Entry::cuMemFree>(t, d2) == CUDA_SUCCESS);
  if (s2 != nullptr) CHECK(raw<Entry::cuStreamDestroy>(t, s2) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "4b-4e 4g-4k 4p-4r: while a host callback blocks, context calls, exec host/kernel/memset node "
                  "set-params and cuGraphExecUpdate of the running executable, cuMemAlloc, user object "
                  "create/release, cuGraphInstantiate, cuGraphExecDestroy of another exec, cuStreamCreate, event "
                  "record and a launch on another stream all return CUDA_SUCCESS at once") {
  CUdeviceptr buf = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(t, &buf, std::size_t{4096}) == CUDA_SUCCESS);
  // The running executable: host node (blocks) -> kernel -> memset.
  Latch latch;
  CUgraph g = new_graph();
  CUDA_HOST_NODE_PARAMS hp{};
  hp.fn = &latch_fn;
  hp.userData = &latch;
  CUgraphNode hn = nullptr, kn = nullptr, mn = nullptr;
  REQUIRE(raw<Entry::cuGraphAddHostNode>(t, &hn, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0}, &hp) ==
          CUDA_SUCCESS);
  kn = add_kernel(g, noop, 1, &hn, 1);
  CUDA_MEMSET_NODE_PARAMS mp{};
  mp.dst = buf;
  mp.value = 7;
  mp.elementSize = 4;
  mp.width = 64;
  mp.height = 1;
  REQUIRE(raw<Entry::cuGraphAddMemsetNode>(t, &mn, g, &kn, std::size_t{1}, &mp, ctx) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  // Another executable (launched and finished before) to destroy, and one graph to instantiate.
  CUgraph g2 = new_graph();
  add_kernel(g2, noop, 2);
  CUgraphExec e2 = instantiate(g2);
  launch(e2);
  sync();
  CUstream s2 = new_stream();
  CUevent ev = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS);

  CUstream bs = new_stream();
  launch_on(e, bs);
  REQUIRE(latch.wait_entered());

  struct Probe {
    const char* name;
    std::function<CUresult()> call;
  };
  CUdeviceptr fresh = 0;
  CUgraphExec e3 = nullptr;
  CUstream s3 = nullptr;
  static int uo_dtor_runs = 0;
  uo_dtor_runs = 0;
  const Probe probes[] = {
      {"cuCtxPushCurrent + cuCtxPopCurrent",
       [&] {
         CUresult r = raw<Entry::cuCtxPushCurrent>(table(), ctx);
         CUcontext p = nullptr;
         return r == CUDA_SUCCESS ? raw<Entry::cuCtxPopCurrent>(table(), &p) : r;
       }},
      {"cuCtxSetCurrent + cuCtxGetCurrent",
       [&] {
         CUresult r = raw<Entry::cuCtxSetCurrent>(table(), ctx);
         CUcontext c = nullptr;
         return r == CUDA_SUCCESS ? raw<Entry::cuCtxGetCurrent>(table(), &c) : r;
       }},
      {"cuGraphExecHostNodeSetParams (running exec)",
       [&] {
         CUDA_HOST_NODE_PARAMS p2{};
         p2.fn = &latch_fn;
         p2.userData = &latch;
         return raw<Entry::cuGraphExecHostNodeSetParams>(table(), e, hn, &p2);
       }},
      {"cuGraphExecKernelNodeSetParams (running exec)",
       [&] {
         std::uint64_t arg = 3;
         void* args[] = {&arg};
         CUDA_KERNEL_NODE_PARAMS kp = kernel_params(noop, args);
         return raw<Entry::cuGraphExecKernelNodeSetParams>(table(), e, kn, &kp);
       }},
      {"cuGraphExecMemsetNodeSetParams (running exec)",
       [&] {
         CUDA_MEMSET_NODE_PARAMS m2 = mp;
         m2.value = 9;
         return raw<Entry::cuGraphExecMemsetNodeSetParams>(table(), e, mn, &m2, ctx);
       }},
      {"cuGraphExecUpdate (running exec)",
       [&] {
         CUgraphExecUpdateResultInfo info{};
         return raw<Entry::cuGraphExecUpdate>(table(), e, g, &info);
       }},
      {"cuMemAlloc", [&] { return raw<Entry::cuMemAlloc>(table(), &fresh, std::size_t{1} << 20); }},
      {"cuUserObjectCreate + cuUserObjectRelease",
       [&] {
         CUuserObject u = nullptr;
         CUresult r = raw<Entry::cuUserObjectCreate>(table(), &u, nullptr, [](void*) { ++uo_dtor_runs; }, 1u,
                                                     static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
         return r == CUDA_SUCCESS ? raw<Entry::cuUserObjectRelease>(table(), u, 1u) : r;
       }},
      {"cuGraphInstantiate", [&] { return raw<Entry::cuGraphInstantiateWithFlags>(table(), &e3, g2, 0ull); }},
      {"cuGraphExecDestroy (another exec)", [&] { return raw<Entry::cuGraphExecDestroy>(table(), e2); }},
      {"cuStreamCreate",
       [&] { return raw<Entry::cuStreamCreate>(table(), &s3, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)); }},
      {"cuEventRecord (another stream)", [&] { return raw<Entry::cuEventRecord>(table(), ev, s2); }},
      {"cuLaunchKernel (another stream)",
       [&] {
         std::uint64_t arg = 0;
         void* args[] = {&arg};
         return raw<Entry::cuLaunchKernel>(table(), noop, 1u, 1u, 1u, 1u, 1u, 1u, 0u, s2, args,
                                           static_cast<void**>(nullptr));
       }},
  };
  for (const Probe& p : probes) {
    INFO(std::string(p.name));
    Call c(ctx, p.call);
    CHECK_MESSAGE(c.returned_within(quick_ms), p.name << " did not return within 200 ms");
    CHECK(c.result() == CUDA_SUCCESS);
  }
  CHECK(latch.returned.load() == 0);
  CHECK(uo_dtor_runs == 1);
  latch.release();
  sync_on(bs);
  sync_on(s2);
  CHECK(latch.returned.load() == 1);

  if (fresh != 0) CHECK(raw<Entry::cuMemFree>(t, fresh) == CUDA_SUCCESS);
  if (e3 != nullptr) destroy_exec(e3);
  if (s3 != nullptr) CHECK(raw<Entry::cuStreamDestroy>(t, s3) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuEventDestroy>(t, ev) == CUDA_SUCCESS);
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(g2);
  destroy_stream(bs);
  destroy_stream(s2);
  CHECK(raw<Entry::cuMemFree>(t, buf) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "4l T: one callback thread serves every host function: a cuLaunchHostFunc on another, idle stream "
                  "does not run while a callback blocks, runs once it returns, on the blocked callback's thread") {
  for (BlockBy by : both) {
    INFO(std::string(to_text(by)));
    Blocker b(by);
    CUstream s2 = new_stream();
    HostRec h;
    CHECK(raw<Entry::cuLaunchHostFunc>(t, s2, &host_record, static_cast<void*>(&h)) == CUDA_SUCCESS);
    sleep_ms(probe_ms);
    CHECK_MESSAGE(h.calls.load() == 0, "the host function on the idle stream ran while another callback blocked");
    b.release();
    sync_on(s2);
    CHECK(h.calls.load() == 1);
    CHECK(h.tid.load() == b.latch.tid.load());
    CHECK(h.tid.load() != main_tid);
    CHECK(raw<Entry::cuStreamDestroy>(t, s2) == CUDA_SUCCESS);
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "while a host callback blocks, cuMemFreeHost and cuModuleUnload do not return until it returns, "
                  "and cuMemAllocHost, cuEventDestroy and cuStreamDestroy of an idle stream return at once (H200, "
                  "2026-12-01)") {
  void* host = nullptr;
  REQUIRE(raw<Entry::cuMemAllocHost>(t, &host, std::size_t{65536}) == CUDA_SUCCESS);
  CUmodule m = nullptr;
  REQUIRE(raw<Entry::cuModuleLoadData>(t, &m, static_cast<const void*>(probe_ptx)) == CUDA_SUCCESS);
  CUevent ev = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev, 0u) == CUDA_SUCCESS);
  CUstream s2 = new_stream();
  void* host2 = nullptr;

  struct Probe {
    const char* name;
    std::function<CUresult()> call;
    bool returns;  // what the H200 did (driver 580, 2026-12-01); the simulator models the same
  };
  const Probe probes[] = {
      {"cuMemFreeHost", [&] { return raw<Entry::cuMemFreeHost>(table(), host); }, false},
      {"cuModuleUnload", [&] { return raw<Entry::cuModuleUnload>(table(), m); }, false},
      {"cuMemAllocHost", [&] { return raw<Entry::cuMemAllocHost>(table(), &host2, std::size_t{65536}); }, true},
      {"cuEventDestroy", [&] { return raw<Entry::cuEventDestroy>(table(), ev); }, true},
      {"cuStreamDestroy (idle stream)", [&] { return raw<Entry::cuStreamDestroy>(table(), s2); }, true},
  };
  for (const Probe& p : probes) {
    INFO(std::string(p.name));
    Blocker b(BlockBy::host_node);
    Call c(ctx, p.call);
    bool returned = c.returned_within(quick_ms);
    MESSAGE("observed: " << std::string(p.name) << std::string(returned ? " returned within 2 s" : " did not return within 2 s")
                         << " while a host callback blocked");
    CHECK(returned == p.returns);
    b.release();
    REQUIRE(c.returned_within(wait_ms));
    CHECK(c.result() == CUDA_SUCCESS);
  }
  if (host2 != nullptr) CHECK(raw<Entry::cuMemFreeHost>(t, host2) == CUDA_SUCCESS);
  finish();
}

TEST_SUITE_END();

TEST_CASE_FIXTURE(DriverFixture, "a destroyed stream's queued work still runs, and cuCtxSynchronize waits for it") {
  CUstream s = nullptr;
  REQUIRE(raw<Entry::cuStreamCreate>(t, &s, 1u) == CUDA_SUCCESS);
  static std::atomic<int> ran{0};
  ran = 0;
  auto slow = [](void*) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ran.fetch_add(1);
  };
  REQUIRE(raw<Entry::cuLaunchHostFunc>(t, s, +slow, nullptr) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamDestroy>(t, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuCtxSynchronize>(t) == CUDA_SUCCESS);
  CHECK(ran.load() == 1);
  finish();
}
