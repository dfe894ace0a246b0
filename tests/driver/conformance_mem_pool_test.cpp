// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, memory pools and stream-ordered allocation, as the CUDA documentation
// describes them (not probed on the H200 yet): the facts tether::MemPool and Stream::alloc_buffer
// rely on (docs/memory.md). cuMemAllocAsync / cuMemAllocFromPoolAsync memory is usable by work
// queued after the allocation on its stream; cuMemFreeAsync on another stream ordered after it by
// an event is a valid free; the default pool's handle is stable; pool attributes round-trip; used
// memory follows the allocations and their executed frees; cuMemPoolTrimTo gives back what the
// release threshold kept; maxSize bounds a pool; a captured cuMemAllocFromPoolAsync becomes a
// MEM_ALLOC node on the pool's device. The last test is the simulator's use-after-free detector
// for pool memory (simulator only, by its name).
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;
using tether::sim::ViolationKind;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

CUmemoryPool make_pool(std::size_t max_size = 0) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = driver().device;
  props.maxSize = max_size;
  CUmemoryPool p = nullptr;
  REQUIRE(raw<Entry::cuMemPoolCreate>(table(), &p, static_cast<const CUmemPoolProps*>(&props)) == CUDA_SUCCESS);
  return p;
}

cuuint64_t attr(CUmemoryPool p, CUmemPool_attribute a) {
  cuuint64_t v = 0;
  CHECK(raw<Entry::cuMemPoolGetAttribute>(table(), p, a, static_cast<void*>(&v)) == CUDA_SUCCESS);
  return v;
}

CUresult set_attr(CUmemoryPool p, CUmemPool_attribute a, cuuint64_t v) {
  return raw<Entry::cuMemPoolSetAttribute>(table(), p, a, static_cast<void*>(&v));
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture, "pools: cuDeviceGetDefaultMemPool returns the same handle every time") {
  CUmemoryPool a = nullptr, b = nullptr;
  REQUIRE(raw<Entry::cuDeviceGetDefaultMemPool>(t, &a, drv.device) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuDeviceGetDefaultMemPool>(t, &b, drv.device) == CUDA_SUCCESS);
  CHECK(a != nullptr);
  CHECK(a == b);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "pools: memory from cuMemAllocAsync and from cuMemAllocFromPoolAsync is usable by a set and a copy "
                  "queued after the allocation on the same stream") {
  CUmemoryPool pool = make_pool();
  for (bool from_pool : {false, true}) {
    CAPTURE(from_pool);
    constexpr std::size_t n = 1024;
    CUdeviceptr d = 0;
    CUresult r = from_pool ? raw<Entry::cuMemAllocFromPoolAsync>(t, &d, n * 4, pool, stream)
                           : raw<Entry::cuMemAllocAsync>(t, &d, n * 4, stream);
    REQUIRE(r == CUDA_SUCCESS);
    CHECK(d != 0);
    std::vector<std::uint32_t> host(n, 0);
    CHECK(raw<Entry::cuMemsetD32Async>(t, d, 0xC0FFEEu, n, stream) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuMemcpyDtoHAsync>(t, static_cast<void*>(host.data()), d, n * 4, stream) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuMemFreeAsync>(t, d, stream) == CUDA_SUCCESS);
    sync();
    CHECK(host == std::vector<std::uint32_t>(n, 0xC0FFEEu));
  }
  CHECK(raw<Entry::cuMemPoolDestroy>(t, pool) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "pools: cuMemFreeAsync on another stream, ordered after the allocation and its use by an event, "
                  "frees the memory: the pool's used memory returns to 0 once that stream has run it") {
  CUmemoryPool pool = make_pool();
  CUstream other_stream = new_stream();
  CUevent ev = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev, unsigned{CU_EVENT_DISABLE_TIMING}) == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAllocFromPoolAsync>(t, &d, 4 * kMiB, pool, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemsetD8Async>(t, d, static_cast<unsigned char>(7), 4 * kMiB, stream) == CUDA_SUCCESS);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= 4 * kMiB);
  CHECK(raw<Entry::cuEventRecord>(t, ev, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamWaitEvent>(t, other_stream, ev, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemFreeAsync>(t, d, other_stream) == CUDA_SUCCESS);
  sync_on(other_stream);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= 4 * kMiB);
  CHECK(raw<Entry::cuEventDestroy>(t, ev) == CUDA_SUCCESS);
  destroy_stream(other_stream);
  CHECK(raw<Entry::cuMemPoolDestroy>(t, pool) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "pools: the release threshold round-trips through cuMemPoolSetAttribute and "
                                 "cuMemPoolGetAttribute, starting at 0") {
  CUmemoryPool pool = make_pool();
  CHECK(attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 0);
  for (cuuint64_t v : {cuuint64_t{1} << 20, cuuint64_t{0}, std::numeric_limits<cuuint64_t>::max()}) {
    CAPTURE(v);
    CHECK(set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, v) == CUDA_SUCCESS);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == v);
  }
  CHECK(raw<Entry::cuMemPoolDestroy>(t, pool) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "pools: with an unlimited release threshold a freed allocation stays reserved across a "
                  "synchronize, and cuMemPoolTrimTo(0) gives it back; the high watermarks reset to the current "
                  "values") {
  CUmemoryPool pool = make_pool();
  CHECK(set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, std::numeric_limits<cuuint64_t>::max()) == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAllocFromPoolAsync>(t, &d, 8 * kMiB, pool, stream) == CUDA_SUCCESS);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
  CHECK(raw<Entry::cuMemFreeAsync>(t, d, stream) == CUDA_SUCCESS);
  sync();
  CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= 8 * kMiB);
  CHECK(raw<Entry::cuMemPoolTrimTo>(t, pool, std::size_t{0}) == CUDA_SUCCESS);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) >= 8 * kMiB);
  CHECK(set_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0) == CUDA_SUCCESS);
  CHECK(set_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0) == CUDA_SUCCESS);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 0);
  CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 0);
  CHECK(raw<Entry::cuMemPoolDestroy>(t, pool) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "pools: an allocation beyond a pool's maxSize fails with CUDA_ERROR_OUT_OF_MEMORY "
                                 "and one within it succeeds") {
  CUmemoryPool pool = make_pool(32 * kMiB);
  CUdeviceptr d = 0;
  CHECK(raw<Entry::cuMemAllocFromPoolAsync>(t, &d, 64 * kMiB, pool, stream) == CUDA_ERROR_OUT_OF_MEMORY);
  REQUIRE(raw<Entry::cuMemAllocFromPoolAsync>(t, &d, 1 * kMiB, pool, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemFreeAsync>(t, d, stream) == CUDA_SUCCESS);
  sync();
  CHECK(raw<Entry::cuMemPoolDestroy>(t, pool) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "pools: a captured cuMemAllocFromPoolAsync becomes a MEM_ALLOC node of the requested size on the "
                  "pool's device, and the captured cuMemFreeAsync a MEM_FREE node of its address") {
  CUmemoryPool pool = make_pool();
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  CHECK(raw<Entry::cuMemAllocFromPoolAsync>(t, &d, 2 * kMiB, pool, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemFreeAsync>(t, d, s) == CUDA_SUCCESS);
  CUgraph g = nullptr;
  REQUIRE(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  std::vector<CUgraphNode> nodes = nodes_of(g);
  REQUIRE(nodes.size() == 2);
  int allocs = 0, frees = 0;
  for (CUgraphNode n : nodes) {
    CUgraphNodeType type{};
    REQUIRE(raw<Entry::cuGraphNodeGetType>(t, n, &type) == CUDA_SUCCESS);
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      ++allocs;
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      REQUIRE(raw<Entry::cuGraphMemAllocNodeGetParams>(t, n, &p) == CUDA_SUCCESS);
      CHECK(p.bytesize == 2 * kMiB);
      CHECK(p.dptr == d);
      CHECK(p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE);
      CHECK(p.poolProps.location.id == drv.device);
    } else if (type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      ++frees;
      CUdeviceptr fp = 0;
      REQUIRE(raw<Entry::cuGraphMemFreeNodeGetParams>(t, n, &fp) == CUDA_SUCCESS);
      CHECK(fp == d);
    }
  }
  CHECK(allocs == 1);
  CHECK(frees == 1);
  // The graph owns that allocation, not the pool.
  CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  destroy_graph(g);
  destroy_stream(s);
  CHECK(raw<Entry::cuMemPoolDestroy>(t, pool) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "simulator only: a set touching pool memory after its stream-ordered free executed is recorded "
                  "as a use after free") {
  if (!sim) return;
  CUstream s2 = new_stream();
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAllocAsync>(t, &d, 4096, stream) == CUDA_SUCCESS);
  // The free runs on `stream` at once; the set waits behind a 50 ms spin on s2, so at its
  // execution the memory is gone although it was live when the set was queued.
  std::uint64_t ns = 50 * ms_ns;
  void* args[] = {&ns};
  CHECK(raw<Entry::cuLaunchKernel>(t, spin, 1u, 1u, 1u, 1u, 1u, 1u, 0u, s2, args, static_cast<void**>(nullptr)) ==
        CUDA_SUCCESS);
  {
    tether::sim::ExpectViolations expected;  // use_after_free, found when the set runs
    CHECK(raw<Entry::cuMemsetD8Async>(t, d, static_cast<unsigned char>(1), std::size_t{4096}, s2) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuMemFreeAsync>(t, d, stream) == CUDA_SUCCESS);
    sync();
    sync_on(s2);
    CHECK(expected.absorbed() == 1);
  }
  expect_violations(ViolationKind::use_after_free);
  destroy_stream(s2);
  finish();
}

TEST_SUITE_END();
