// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The NCCL facts tether relies on (docs/design/driver-facts.md, "NCCL"), with raw NCCL calls
// through the table of the runtime TETHER_DRIVER selects: real NCCL on a GPU machine, the
// simulator's twin in CI. One rank, so that they run on one GPU.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "nccl/library.hpp"
#include "nccl/nccl_support.hpp"

using namespace tether;
using namespace tether_test;
using namespace std::chrono_literals;
namespace abi = tether::detail::nccl_abi;

namespace {

struct Raw {
  NcclFixture f;
  Context ctx = f.rt.context(0);
  const DriverApi& api = f.rt.driver();
  const detail::NcclTable& nccl = detail::nccl_table(f.rt);
  ::ncclComm* comm = nullptr;
  Stream s = ctx.make_stream();

  Raw() {
    ctx.make_current();
    abi::UniqueId id{};
    REQUIRE(nccl.ncclGetUniqueId(&id) == abi::Result::success);
    REQUIRE(nccl.ncclCommInitRank(&comm, 1, id, 0) == abi::Result::success);
    ctx.make_current();
  }
  ~Raw() {
    if (comm) CHECK(nccl.ncclCommDestroy(comm) == abi::Result::success);
    ctx.make_current();
  }
  static void* ptr(const SharedBuffer<float>& b) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(b.address())); }
  // The types of a graph's nodes in creation order, and how many dependencies each has.
  std::vector<std::pair<CUgraphNodeType, std::size_t>> shape(CUgraph g) const {
    std::size_t n = 0;
    REQUIRE(api.cuGraphGetNodes(g, nullptr, &n) == CUDA_SUCCESS);
    std::vector<CUgraphNode> nodes(n);
    REQUIRE(api.cuGraphGetNodes(g, nodes.data(), &n) == CUDA_SUCCESS);
    std::vector<std::pair<CUgraphNodeType, std::size_t>> out;
    for (CUgraphNode x : nodes) {
      CUgraphNodeType t{};
      REQUIRE(api.cuGraphNodeGetType(x, &t) == CUDA_SUCCESS);
      std::size_t deps = 0;
      REQUIRE(api.cuGraphNodeGetDependencies(x, nullptr, nullptr, &deps) == CUDA_SUCCESS);
      out.emplace_back(t, deps);
    }
    return out;
  }
  // Captures `fn`'s raw NCCL calls on s (RELAXED) into a new graph.
  template <class F>
  CUgraph capture(F&& fn) {
    REQUIRE(api.cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    fn();
    CUgraph g = nullptr;
    REQUIRE(api.cuStreamEndCapture(s.get(), &g) == CUDA_SUCCESS);
    ctx.make_current();
    return g;
  }
  void self_exchange(const SharedBuffer<float>& x, const SharedBuffer<float>& y) {
    REQUIRE(nccl.ncclGroupStart() == abi::Result::success);
    REQUIRE(nccl.ncclSend(ptr(x), x.size(), abi::DataType::float32, 0, comm, s.get()) == abi::Result::success);
    REQUIRE(nccl.ncclRecv(ptr(y), y.size(), abi::DataType::float32, 0, comm, s.get()) == abi::Result::success);
    REQUIRE(nccl.ncclGroupEnd() == abi::Result::success);
  }
};

}  // namespace

TEST_SUITE_BEGIN("nccl facts");

TEST_CASE("N1: a captured send and receive of one rank is an external event wait, a kernel and an event record, "
          "the wait with no dependencies of its own") {
  Raw r;
  SharedBuffer<float> x = filled<float>(r.ctx, 64, [](std::size_t) { return 1; });
  SharedBuffer<float> y = filled<float>(r.ctx, 64, [](std::size_t) { return 0; });
  CUgraph g = r.capture([&] { r.self_exchange(x, y); });
  auto shape = r.shape(g);
  REQUIRE(shape.size() == 3);
  CHECK(shape[0] == std::pair{CU_GRAPH_NODE_TYPE_WAIT_EVENT, std::size_t{0}});
  CHECK(shape[1] == std::pair{CU_GRAPH_NODE_TYPE_KERNEL, std::size_t{1}});
  CHECK(shape[2] == std::pair{CU_GRAPH_NODE_TYPE_EVENT_RECORD, std::size_t{1}});
  CHECK(r.api.cuGraphDestroy(g) == CUDA_SUCCESS);
}

TEST_CASE("N2: a captured all-reduce of one rank is one copy out of place and nothing at all in place") {
  Raw r;
  SharedBuffer<float> x = filled<float>(r.ctx, 64, [](std::size_t) { return 1; });
  SharedBuffer<float> y = filled<float>(r.ctx, 64, [](std::size_t) { return 0; });
  CUgraph out = r.capture([&] {
    REQUIRE(r.nccl.ncclAllReduce(Raw::ptr(x), Raw::ptr(y), 64, abi::DataType::float32, abi::RedOp::sum, r.comm,
                                 r.s.get()) == abi::Result::success);
  });
  auto shape = r.shape(out);
  REQUIRE(shape.size() == 1);
  CHECK(shape[0].first == CU_GRAPH_NODE_TYPE_MEMCPY);
  CUgraph in = r.capture([&] {
    REQUIRE(r.nccl.ncclAllReduce(Raw::ptr(x), Raw::ptr(x), 64, abi::DataType::float32, abi::RedOp::sum, r.comm,
                                 r.s.get()) == abi::Result::success);
  });
  CHECK(r.shape(in).empty());
  CHECK(r.api.cuGraphDestroy(out) == CUDA_SUCCESS);
  CHECK(r.api.cuGraphDestroy(in) == CUDA_SUCCESS);
}

TEST_CASE("N3: ncclCommDestroy waits while a graph that captured a kernel of the communicator lives, and returns "
          "once the graph and its executable are destroyed") {
  Raw r;
  SharedBuffer<float> x = filled<float>(r.ctx, 64, [](std::size_t) { return 1; });
  SharedBuffer<float> y = filled<float>(r.ctx, 64, [](std::size_t) { return 0; });
  CUgraph g = r.capture([&] { r.self_exchange(x, y); });
  CUgraphExec e = nullptr;
  REQUIRE(r.api.cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
  REQUIRE(r.api.cuGraphLaunch(e, r.s.get()) == CUDA_SUCCESS);
  r.s.synchronize();
  std::atomic<bool> returned{false};
  abi::Result result = abi::Result::internal_error;
  ::ncclComm* comm = std::exchange(r.comm, nullptr);
  std::thread destroyer([&] {
    r.ctx.make_current();
    result = r.nccl.ncclCommDestroy(comm);
    returned = true;
  });
  std::this_thread::sleep_for(1s);
  CHECK_FALSE(returned.load());  // NCCL waits, without a timeout, for the graph's user object
  CHECK(r.api.cuGraphExecDestroy(e) == CUDA_SUCCESS);
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(returned.load());  // the graph still holds it
  CHECK(r.api.cuGraphDestroy(g) == CUDA_SUCCESS);
  destroyer.join();
  CHECK(returned.load());
  CHECK(result == abi::Result::success);
}

TEST_CASE("N4: ncclCommInitRank on a thread with no current context uses device 0 and leaves its primary context "
          "current; ncclGetUniqueId needs no context") {
  NcclFixture f;
  const detail::NcclTable& nccl = detail::nccl_table(f.rt);
  Context ctx = f.rt.context(0);
  const DriverApi& api = f.rt.driver();
  std::thread([&] {
    CUcontext before = reinterpret_cast<CUcontext>(1);
    REQUIRE(api.cuCtxGetCurrent(&before) == CUDA_SUCCESS);
    REQUIRE(before == nullptr);
    abi::UniqueId id{};
    REQUIRE(nccl.ncclGetUniqueId(&id) == abi::Result::success);
    CUcontext after_id = reinterpret_cast<CUcontext>(1);
    REQUIRE(api.cuCtxGetCurrent(&after_id) == CUDA_SUCCESS);
    CHECK(after_id == nullptr);
    ::ncclComm* comm = nullptr;
    REQUIRE(nccl.ncclCommInitRank(&comm, 1, id, 0) == abi::Result::success);
    CUcontext after = nullptr;
    REQUIRE(api.cuCtxGetCurrent(&after) == CUDA_SUCCESS);
    CHECK(after == ctx.get());  // NCCL's cudaSetDevice(0): tether puts the caller's back after every NCCL call
    int device = -1;
    CHECK(nccl.ncclCommCuDevice(comm, &device) == abi::Result::success);
    CHECK(device == 0);
    CHECK(nccl.ncclCommDestroy(comm) == abi::Result::success);
  }).join();
}

TEST_CASE("N5: tether puts back the caller's context after NCCL moved it, and a communicator's collectives then run "
          "with the caller's context current") {
  NcclFixture f;
  Context ctx = f.rt.context(0);
  const DriverApi& api = f.rt.driver();
  std::thread([&] {
    // No context current: tether makes the communicator's current and leaves it so (as
    // ScopedContext does), whatever NCCL did in between.
    nccl::Communicator c = nccl::Communicator::create(ctx, nccl::UniqueId::generate(f.rt), 1, 0);
    CUcontext now = nullptr;
    REQUIRE(api.cuCtxGetCurrent(&now) == CUDA_SUCCESS);
    CHECK(now == ctx.get());
  }).join();
}

TEST_SUITE_END();
