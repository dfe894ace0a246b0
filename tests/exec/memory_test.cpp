// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Memory accounting (docs/serving.md, "Memory accounting"): what a node version, a graph and an
// executable keep — a generated family over every owning argument kind × boundary sizes, shared
// allocations counted once, executable versions across per-node updates, sets and reclamation —
// the graph memory pool through cuDeviceGetGraphMemAttribute, the process-wide report, and the
// executable cache's default cost.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/dsl_fixture.hpp"

using namespace tether;
using namespace tether_test;

namespace {

// How a node owns its buffer.
enum class Owning { shared, moved_device, param_buffer, keeping, memcpy_pinned };
constexpr Owning kOwnings[] = {Owning::shared, Owning::moved_device, Owning::param_buffer, Owning::keeping,
                               Owning::memcpy_pinned};
const char* name_of(Owning o) {
  switch (o) {
    case Owning::shared: return "a SharedBuffer argument";
    case Owning::moved_device: return "a DeviceBuffer moved in";
    case Owning::param_buffer: return "a Param<SharedBuffer> argument";
    case Owning::keeping: return "a buffer in keeping(Owners{...})";
    case Owning::memcpy_pinned: return "a memcpy from a SharedPinnedBuffer";
  }
  return "?";
}

}  // namespace

TEST_SUITE_BEGIN("memory accounting");

TEST_CASE_FIXTURE(DslFixture, "inspect and owned_memory count what each node version keeps, for every owning "
                              "argument kind and size, each allocation once per graph") {
  for (Owning how : kOwnings)
    for (std::size_t n : {std::size_t{1}, std::size_t{255}, std::size_t{4096}, std::size_t{1} << 20}) {
      const std::string what = name_of(how);
      CAPTURE(what);
      CAPTURE(n);
      const std::size_t bytes = n * sizeof(float);
      const bool pinned = how == Owning::memcpy_pinned;
      SharedBuffer<float> shared = ctx.alloc<float>(n).share();
      SharedPinnedBuffer<float> host = ctx.alloc_pinned<float>(n).share();
      Param<SharedBuffer<float>> param(shared, "p");
      Graph g{ctx};
      g.edit([&](Edit& e) {
        for (int copy = 0; copy < 2; ++copy) {  // two nodes keep the same allocation
          switch (how) {
            case Owning::shared: e.launch(k.fill, Grid{1}, Block{1}, shared, 1.0f, 1); break;
            case Owning::moved_device:
              if (copy == 0)
                e.launch(k.fill, Grid{1}, Block{1}, ctx.alloc<float>(n), 1.0f, 1);
              else
                e.launch(k.fill, Grid{1}, Block{1}, ctx.alloc<float>(n), 1.0f, 1);  // a second allocation
              break;
            case Owning::param_buffer: e.launch(k.fill, Grid{1}, Block{1}, param, 1.0f, 1); break;
            case Owning::keeping: e.after().keeping(Owners{shared}).empty(); break;
            case Owning::memcpy_pinned: e.memcpy(unowned(shared), host); break;
          }
        }
      });
      const Inspection in = inspect(g);
      REQUIRE(in.graphs[0].nodes.size() == 2);
      for (const NodeInfo& node : in.graphs[0].nodes) {
        CHECK(node.memory.device_bytes == (pinned ? 0 : bytes));
        CHECK(node.memory.pinned_bytes == (pinned ? bytes : 0));
        CHECK(node.memory.allocations == 1);
      }
      const std::size_t distinct = how == Owning::moved_device ? 2 : 1;
      CHECK(in.memory.allocations == distinct);
      CHECK(in.memory.device_bytes == (pinned ? 0 : distinct * bytes));
      CHECK(in.memory.pinned_bytes == (pinned ? bytes : 0));
      const OwnedMemory m = owned_memory(g);
      CHECK(m.device_bytes == in.memory.device_bytes);
      CHECK(m.pinned_bytes == in.memory.pinned_bytes);
      CHECK(m.allocations == in.memory.allocations);
      GraphExec exec = g.instantiate();
      const OwnedMemory x = owned_memory(exec);
      CHECK(x.device_bytes == m.device_bytes);
      CHECK(x.pinned_bytes == m.pinned_bytes);
      CHECK(inspect(exec).memory.allocations == distinct);
    }
}

TEST_CASE_FIXTURE(DslFixture, "an executable's memory follows its per-node updates and parameter sets until the "
                              "superseded versions are reclaimed") {
  SharedBuffer<float> a = buffer(256, 0.0f);
  Param<SharedBuffer<float>> p(a, "p");
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.fill, Grid{1}, Block{4}, p, 1.0f, 4); });
  GraphExec exec = g.instantiate();
  CHECK(owned_memory(exec).device_bytes == 1024);
  exec.launch(stream);
  exec.set(p, buffer(512, 0.0f));  // a new version, beside the instantiated one (CUDA keeps that)
  CHECK(owned_memory(exec).device_bytes == 1024 + 2048);
  exec.launch(stream);  // uses the set's version, so the update below must keep it until it is done
  exec.update(n, Grid{1}, Block{4}, buffer(1024, 0.0f), 2.0f, 4);
  const OwnedMemory three = owned_memory(exec);
  CHECK(three.device_bytes == 1024 + 2048 + 4096);
  CHECK(three.allocations == 3);
  const Inspection in = inspect(exec);
  CHECK(in.memory.device_bytes == three.device_bytes);
  std::size_t per_version = 0;
  for (const ExecVersion& v : in.versions) per_version += v.memory.device_bytes;
  CHECK(per_version == three.device_bytes);
  stream.synchronize();
  exec.reclaim(stream);
  stream.synchronize();
  // The version the executable was instantiated from stays (CUDA keeps it), the set's goes.
  CHECK(eventually([&] { return owned_memory(exec).device_bytes == 1024 + 4096; }));
  CHECK_THROWS_WITH_AS(owned_memory(GraphExec{}), doctest::Contains("tether::owned_memory"), UsageError);
  CHECK_THROWS_WITH_AS(owned_memory(Graph{}), doctest::Contains("tether::owned_memory"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "GM1: the graph memory pool associates memory with graphs in 32 MiB granules that "
                              "cover the largest allocation and stay after the free and the executable") {
  // Observed on the H200 (driver 580): a 4-byte graph allocation made 32 MiB used and reserved, a
  // 40 MiB one 64 MiB; neither the free node nor destroying the executable gave any back (the
  // driver keeps it until cuDeviceGraphMemTrim, which tether does not call).
  constexpr std::uint64_t granule = 32ull << 20;
  for (std::size_t n : {std::size_t{1}, std::size_t{1} << 20, std::size_t{10} << 20, std::size_t{1} << 20}) {
    CAPTURE(n);
    const GraphMemory before = graph_memory(ctx);
    Graph g{ctx};
    g.edit([&](Edit& e) {
      AllocResult<float> a = e.alloc<float>(n);
      Node<KernelNode<float*, float, int>> fill = e.after(a.node).launch(k.fill, Grid{1}, Block{1}, a.memory, 1.0f, 1);
      e.after(fill).free(a.memory);
    });
    {
      GraphExec exec = g.instantiate();
      exec.launch(stream);
      stream.synchronize();
      const GraphMemory after = graph_memory(ctx);
      CHECK(after.used >= n * sizeof(float));
      CHECK(after.used % granule == 0);
      CHECK(after.used >= before.used);  // never given back at the free
      CHECK(after.reserved == after.used);
      CHECK(after.used_high >= after.used);
      CHECK(after.reserved_high >= after.reserved);
      exec.launch(stream);  // the second launch reuses what the first associated
      stream.synchronize();
      CHECK(graph_memory(ctx).used == after.used);
    }
    wait_released(ctx);
    CHECK(graph_memory(ctx).used >= n * sizeof(float));  // nor when the executable goes
  }
}

TEST_CASE_FIXTURE(DslFixture, "the process-wide memory report counts tether's buffers, graphs, executables and "
                              "node versions as they come and go") {
  wait_reclaimed(5s);
  const MemoryReport before = memory_report(ctx);
  {
    SharedBuffer<float> x = ctx.alloc<float>(1000).share();
    PinnedBuffer<float> h = ctx.alloc_pinned<float>(10);
    Graph g{ctx};
    g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{4}, x, 1.0f, 4); });
    GraphExec exec = g.instantiate();
    const MemoryReport now = memory_report(ctx);
    CHECK(now.buffer_device_bytes == before.buffer_device_bytes + 4000);
    CHECK(now.buffer_pinned_bytes == before.buffer_pinned_bytes + 40);
    CHECK(now.graphs == before.graphs + 1);
    CHECK(now.executables == before.executables + 1);
    CHECK(now.node_versions == before.node_versions + 1);
    const std::string text = to_string(now);
    CHECK(text.find("node version") != std::string::npos);
    CHECK(text.find("graph memory pool") != std::string::npos);
    CHECK(fmt::format("{}", owned_memory(g)) == "3.9 KiB device in 1 allocation");
  }
  stream.synchronize();
  CHECK(eventually([&] {
    const MemoryReport r = memory_report(ctx);
    return r.buffer_device_bytes == before.buffer_device_bytes && r.buffer_pinned_bytes == before.buffer_pinned_bytes &&
           r.graphs == before.graphs && r.executables == before.executables && r.node_versions == before.node_versions;
  }));
  // A buffer handed back to the application is no longer tether's.
  DeviceBuffer<float> d = ctx.alloc<float>(8);
  CHECK(memory_report(ctx).buffer_device_bytes == before.buffer_device_bytes + 32);
  CUdeviceptr raw = d.release();
  CHECK(memory_report(ctx).buffer_device_bytes == before.buffer_device_bytes);
  DeviceBuffer<float> back = DeviceBuffer<float>::from_native_handle(ctx, raw, 8);
  CHECK(memory_report(ctx).buffer_device_bytes == before.buffer_device_bytes + 32);
}

TEST_CASE_FIXTURE(DslFixture, "an executable cache without a cost function budgets the device bytes each "
                              "executable keeps") {
  std::vector<SharedBuffer<float>> bufs;
  for (int i = 0; i < 4; ++i) bufs.push_back(buffer(256 * static_cast<std::size_t>(i + 1), 0.0f));
  ExecCache<int> cache(
      [&](int i) {
        Graph g{ctx};
        g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{4}, bufs[static_cast<std::size_t>(i)], 1.0f, 4); });
        return g.instantiate();
      },
      ExecCacheLimits{.max_count = 16, .max_bytes = 1024 * 5});
  cache.prewarm({0, 1});
  CHECK(cache.stats().bytes == 1024 + 2048);
  cache.get(2);  // 3072 more: 6144 > 5120, so key 0 (least recent) goes, then 5120 fits
  CHECK(cache.stats().bytes == 2048 + 3072);
  CHECK_FALSE(cache.contains(0));
  CHECK(cache.contains(1));
}

