// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// tether::MemPool and Stream::alloc_buffer (docs/memory.md), through the public API. The tests run
// on the driver TETHER_DRIVER selects; checks that need the simulator's call counts, statistics or
// fault injection are guarded by `simulated`, and the tests made only of such checks say
// "simulator only" in their names.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/messages.hpp"
#include "tether.hpp"

using namespace tether;
using namespace tether_test;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

struct Call {
  const char* name;
  std::function<void()> fn;
};

// Every MemPool member that needs a pool, called on `p`.
std::vector<Call> pool_calls(const MemPool& p, const Stream& s) {
  return {
      {"MemPool::context", [&] { (void)p.context(); }},
      {"MemPool::release_threshold", [&] { (void)p.release_threshold(); }},
      {"MemPool::set_release_threshold", [&] { p.set_release_threshold(kMiB); }},
      {"MemPool::trim_to", [&] { p.trim_to(0); }},
      {"MemPool::used_bytes", [&] { (void)p.used_bytes(); }},
      {"MemPool::used_peak", [&] { (void)p.used_peak(); }},
      {"MemPool::reserved_bytes", [&] { (void)p.reserved_bytes(); }},
      {"MemPool::reserved_peak", [&] { (void)p.reserved_peak(); }},
      {"MemPool::reset_peaks", [&] { p.reset_peaks(); }},
      {"Stream::alloc_buffer", [&] { (void)s.alloc_buffer<float>(4, p); }},
  };
}

}  // namespace

TEST_SUITE_BEGIN("memory pools");

TEST_CASE_FIXTURE(DslFixture, "every MemPool member refuses a default-constructed, moved-from or reset pool with a "
                              "UsageError naming the call and the empty pool") {
  MemPool made = MemPool::create(ctx);
  MemPool moved_to = std::move(made);
  MemPool reset = MemPool::create(ctx);
  reset.reset();
  const MemPool empty;
  struct State {
    const char* name;
    const MemPool& pool;
  };
  for (State st : {State{"default-constructed", empty}, State{"moved from", made}, State{"reset", reset}}) {
    CAPTURE(st.name);
    CHECK_FALSE(st.pool);
    CHECK(st.pool.get() == nullptr);
    CHECK_FALSE(st.pool.is_device_default());
    CHECK(st.pool == empty);
    CHECK_FALSE(st.pool == moved_to);
    for (const Call& c : pool_calls(st.pool, stream)) {
      CAPTURE(c.name);
      std::string m = message_of(c.fn);
      CHECK(contains(m, c.name));
      CHECK(contains(m, "MemPool is moved from or empty"));
    }
  }
  CHECK(moved_to);
  CHECK(moved_to.get() != nullptr);
}

TEST_CASE_FIXTURE(DslFixture, "Stream::alloc_buffer refuses an empty stream, 0 elements and an overflowing count "
                              "with a UsageError that names the call and what is wrong") {
  Stream empty;
  MemPool pool = MemPool::create(ctx);
  std::string m = message_of([&] { (void)empty.alloc_buffer<float>(4); });
  CHECK(contains(m, "Stream::alloc_buffer"));
  CHECK(contains(m, "Stream is moved from or empty"));
  CHECK(contains(message_of([&] { (void)empty.alloc_buffer<float>(4, pool); }), "Stream is moved from or empty"));
  for (bool with_pool : {false, true}) {
    CAPTURE(with_pool);
    auto alloc = [&](std::size_t n) {
      return with_pool ? stream.alloc_buffer<float>(n, pool) : stream.alloc_buffer<float>(n);
    };
    m = message_of([&] { (void)alloc(0); });
    CHECK(contains(m, "Stream::alloc_buffer: allocating 0 elements of float"));
    CHECK(contains(m, "cannot be empty"));
    m = message_of([&] { (void)alloc(std::numeric_limits<std::size_t>::max() / 2); });
    CHECK(contains(m, "Stream::alloc_buffer"));
    CHECK(contains(m, "overflows"));
  }
}

TEST_CASE_FIXTURE(DslFixture, "the default pool is the same driver handle every time, marked as the default, and "
                              "dropping it never destroys it") {
  if (simulated) sim::reset_call_counts();
  {
    MemPool a = MemPool::device_default(ctx);
    MemPool b = MemPool::device_default(ctx);
    CHECK(a);
    CHECK(a.get() != nullptr);
    CHECK(a.get() == b.get());
    CHECK(a == b);
    CHECK(a.is_device_default());
    CHECK(a.context() == ctx);
    MemPool created = MemPool::create(ctx);
    CHECK_FALSE(created.is_device_default());
    CHECK_FALSE(created == a);
    CHECK(created.context() == ctx);
  }
  CHECK(tether::wait_released(ctx, 5s));
  if (simulated) CHECK(sim::call_count("cuMemPoolDestroy") == 1);  // the created one only
}

TEST_CASE_FIXTURE(DslFixture, "a pool's release threshold round-trips, starts at 0, and MemPoolOptions sets it at "
                              "creation") {
  MemPool p = MemPool::create(ctx);
  CHECK(p.release_threshold() == 0);
  for (std::uint64_t v : {kMiB, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max()}) {
    CAPTURE(v);
    p.set_release_threshold(v);
    CHECK(p.release_threshold() == v);
  }
  MemPool q = MemPool::create(ctx, MemPoolOptions{.max_bytes = 0, .release_threshold = 64 * kMiB});
  CHECK(q.release_threshold() == 64 * kMiB);
  MemPool d = MemPool::device_default(ctx);
  std::uint64_t before = d.release_threshold();
  d.set_release_threshold(before);
  CHECK(d.release_threshold() == before);
}

TEST_CASE_FIXTURE(DslFixture, "alloc_buffer memory, from the default pool and from a created pool, is usable by a "
                              "kernel and a copy queued after it on the same stream, down to one element") {
  MemPool pool = MemPool::create(ctx);
  for (std::size_t n : {std::size_t{1}, std::size_t{64}, std::size_t{100000}}) {
    for (bool with_pool : {false, true}) {
      CAPTURE(n);
      CAPTURE(with_pool);
      DeviceBuffer<float> b = with_pool ? stream.alloc_buffer<float>(n, pool) : stream.alloc_buffer<float>(n);
      CHECK(b.size() == n);
      CHECK(b.bytes() == n * sizeof(float));
      CHECK(b.context() == ctx);
      SharedBuffer<float> shared = std::move(b).share();
      SharedBuffer<float> out = buffer(n, 0.0f);
      const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
      stream.launch(k.fill, Grid{blocks}, Block{256}, shared, 2.5f, static_cast<int>(n));
      stream.memcpy(out, shared);
      stream.synchronize();
      CHECK(read(out) == std::vector<float>(n, 2.5f));
    }
  }
}

TEST_CASE_FIXTURE(DslFixture, "a pool counts a live buffer as used memory, and after the buffer is dropped its "
                              "stream-ordered free runs and the used memory returns to 0; the peaks reset") {
  MemPool pool = MemPool::create(ctx);
  {
    DeviceBuffer<float> b = stream.alloc_buffer<float>(kMiB, pool);  // 4 MiB
    CHECK(pool.used_bytes() >= 4 * kMiB);
    CHECK(pool.reserved_bytes() >= pool.used_bytes());
    CHECK(pool.used_peak() >= 4 * kMiB);
  }
  CHECK(tether::wait_reclaimed(5s));  // the free is queued by the reclaimer (RELAXED capture mode)
  ctx.synchronize();  // the free was queued on tether's free stream; this waits for it
  CHECK(pool.used_bytes() == 0);
  CHECK(pool.used_peak() >= 4 * kMiB);
  pool.reset_peaks();
  CHECK(pool.used_peak() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "with an unlimited release threshold a dropped buffer's memory stays reserved, and "
                              "trim_to(0) gives it back to the device") {
  MemPool pool = MemPool::create(ctx, MemPoolOptions{.release_threshold = std::numeric_limits<std::uint64_t>::max()});
  (void)stream.alloc_buffer<std::uint8_t>(8 * kMiB, pool);  // dropped at once: freed in stream order
  CHECK(tether::wait_reclaimed(5s));
  ctx.synchronize();
  CHECK(pool.used_bytes() == 0);
  CHECK(pool.reserved_bytes() >= 8 * kMiB);
  pool.trim_to(0);
  CHECK(pool.reserved_bytes() == 0);
  CHECK(pool.reserved_peak() >= 8 * kMiB);
}

TEST_CASE_FIXTURE(DslFixture, "an allocation beyond a pool's max_bytes, or larger than the device, fails with a "
                              "DriverError naming the entry point, CUDA_ERROR_OUT_OF_MEMORY and the size, and leaves "
                              "nothing allocated") {
  MemPool small = MemPool::create(ctx, MemPoolOptions{.max_bytes = 32 * kMiB});
  const sim::Stats before = simulated ? sim::stats() : sim::Stats{};
  std::string m = message_of([&] { (void)stream.alloc_buffer<float>(16 * kMiB, small); });  // 64 MiB
  INFO(m);
  CHECK(contains(m, "cuMemAllocFromPoolAsync"));
  CHECK(contains(m, "CUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(contains(m, "67108864 bytes"));
  CHECK(contains(m, "a memory pool"));
  const std::size_t huge = std::size_t{1} << 48;  // 1 PiB of floats: more than any device has
  m = message_of([&] { (void)stream.alloc_buffer<float>(huge); });
  INFO(m);
  CHECK(contains(m, "cuMemAllocAsync"));
  CHECK(contains(m, "CUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(contains(m, std::to_string(huge * sizeof(float)) + " bytes"));
  CHECK(contains(m, "the device's default pool"));
  bool threw_driver_error = false;
  try {
    (void)stream.alloc_buffer<float>(huge);
  } catch (const DriverError& e) {
    threw_driver_error = e.entry_point() == "cuMemAllocAsync" && e.result_name() == "CUDA_ERROR_OUT_OF_MEMORY";
  }
  CHECK(threw_driver_error);
  DeviceBuffer<float> fits = stream.alloc_buffer<float>(kMiB, small);  // within max_bytes
  CHECK(fits.size() == kMiB);
  fits.reset();
  CHECK(tether::wait_reclaimed(5s));  // the free is queued by the reclaimer
  ctx.synchronize();
  if (simulated) CHECK(sim::stats().device_allocations == before.device_allocations);
}

TEST_CASE_FIXTURE(DslFixture, "a buffer keeps its pool alive: the pool is destroyed only after the last buffer from "
                              "it is gone, and the buffer stays usable after the pool's last MemPool was dropped") {
  if (simulated) sim::reset_call_counts();
  const std::size_t pools_before = simulated ? sim::stats().mem_pools : 0;
  MemPool pool = MemPool::create(ctx);
  DeviceBuffer<float> b = stream.alloc_buffer<float>(256, pool);
  pool.reset();
  CHECK(tether::wait_released(ctx, 5s));
  if (simulated) {
    CHECK(sim::call_count("cuMemPoolDestroy") == 0);
    CHECK(sim::stats().mem_pools == pools_before + 1);
  }
  SharedBuffer<float> shared = std::move(b).share();
  SharedBuffer<float> out = buffer(256, 0.0f);
  stream.launch(k.fill, Grid{1}, Block{256}, shared, 4.0f, 256);
  stream.memcpy(out, shared);
  stream.synchronize();
  CHECK(read(out) == std::vector<float>(256, 4.0f));
  shared = {};
  ctx.synchronize();
  if (simulated) {
    CHECK(eventually([] { return sim::call_count("cuMemPoolDestroy") == 1; }));
    CHECK(sim::stats().mem_pools == pools_before);
  }
}

TEST_CASE_FIXTURE(DslFixture, "the free is stream-ordered after the last consumer: a buffer handed to queued "
                              "stream work and dropped at once is freed only after that work ran, with no use after "
                              "free") {
  MemPool pool = MemPool::create(ctx);
  SharedBuffer<float> out = buffer(1024, 0.0f);
  if (simulated) sim::reset_call_counts();
  {
    DeviceBuffer<float> b = stream.alloc_buffer<float>(1024, pool);
    stream.launch(k.spin, Grid{1}, Block{1}, 30'000'000ull);  // 30 ms before anything uses the buffer
    SharedBuffer<float> shared = std::move(b).share();
    stream.launch(k.fill, Grid{4}, Block{256}, shared, 6.0f, 1024);
    stream.memcpy(out, shared);
    // The last application owner goes here; the stream work still owns the buffer.
  }
  if (simulated) CHECK(sim::call_count("cuMemFreeAsync") == 0);
  stream.synchronize();
  CHECK(read(out) == std::vector<float>(1024, 6.0f));
  CHECK(tether::wait_released(ctx, 5s));
  ctx.synchronize();
  CHECK(pool.used_bytes() == 0);
  if (simulated) {
    CHECK(sim::call_count("cuMemFreeAsync") == 1);
    CHECK(sim::call_count("cuMemFree") == 0);
  }
  // The fixture's destructor checks that the simulator saw no use after free.
}

TEST_CASE_FIXTURE(DslFixture, "a pool buffer dropped inside a host callback, and one released by the reclaimer, "
                              "is freed with cuMemFreeAsync and never with cuMemFree") {
  MemPool pool = MemPool::create(ctx);
  auto held = std::make_shared<DeviceBuffer<float>>(stream.alloc_buffer<float>(512, pool));
  DeviceBuffer<float> handed = stream.alloc_buffer<float>(512);
  if (simulated) sim::reset_call_counts();
  std::atomic<bool> in_callback_empty{false};
  stream.host([held, &in_callback_empty] {
    held->reset();  // inside the callback: deferred to the reclaimer
    in_callback_empty = !*held;
  });
  stream.memset(std::move(handed), 0.0f);  // the stream work's owner is released on the reclaimer
  stream.synchronize();
  held.reset();
  CHECK(tether::wait_released(ctx, 5s));
  ctx.synchronize();
  CHECK(in_callback_empty.load());
  CHECK(pool.used_bytes() == 0);
  if (simulated) {
    CHECK(sim::call_count("cuMemFreeAsync") == 2);
    CHECK(sim::call_count("cuMemFree") == 0);
  }
}

TEST_CASE_FIXTURE(DslFixture, "dropping a pool buffer on an application thread hands its cuMemFreeAsync to the "
                              "reclaimer (whose RELAXED mode keeps other threads' captures intact), never cuMemFree") {
  if (!simulated) return;  // the call counts are the simulator's; the rest of the suite covers the GPU
  DeviceBuffer<float> b = stream.alloc_buffer<float>(256);
  stream.synchronize();
  sim::reset_call_counts();
  b.reset();
  CHECK(tether::wait_reclaimed(5s));
  CHECK(sim::call_count("cuMemFreeAsync") == 1);
  CHECK(sim::call_count("cuMemFree") == 0);
}

TEST_CASE_FIXTURE(DslFixture, "while a host callback waits for the application thread, that thread can drop pool "
                              "buffers and allocate new ones without waiting for the callback") {
  MemPool pool = MemPool::create(ctx);
  DeviceBuffer<float> old = stream.alloc_buffer<float>(256, pool);
  stream.synchronize();
  Stream waiting = ctx.make_stream();
  auto released = std::make_shared<std::atomic<bool>>(false);
  auto in_time = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<bool>>(false);
  waiting.host([released, in_time, started] {
    started->store(true);
    auto deadline = std::chrono::steady_clock::now() + 5s;  // the deadlock, bounded: the test fails instead
    while (!released->load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    in_time->store(released->load());
  });
  REQUIRE(eventually([&] { return started->load(); }));
  old.reset();                                                      // cuMemFreeAsync, not cuMemFree
  DeviceBuffer<float> fresh = stream.alloc_buffer<float>(256, pool);  // cuMemAllocFromPoolAsync
  DeviceBuffer<float> from_default = stream.alloc_buffer<float>(256);
  fresh.reset();
  from_default.reset();
  released->store(true);
  waiting.synchronize();
  CHECK(in_time->load());
}

TEST_CASE_FIXTURE(DslFixture, "alloc_buffer refuses a pool of another device's context with a UsageError naming "
                              "both devices (needs two devices: meson runs it on two simulated ones)") {
  if (rt.device_count() < 2) return;
  Context other = rt.context(1);
  MemPool theirs = MemPool::create(other);
  CHECK(theirs.context() == other);
  std::string m = message_of([&] { (void)stream.alloc_buffer<float>(16, theirs); });
  INFO(m);
  CHECK(contains(m, "Stream::alloc_buffer: the pool belongs to device 1's context, the stream to device 0's"));
  CHECK(contains(m, "allocate from a pool of the stream's context"));
  Stream theirs_stream = other.make_stream();
  DeviceBuffer<float> b = theirs_stream.alloc_buffer<float>(16, theirs);  // its own context: fine
  CHECK(b.context() == other);
}

TEST_CASE_FIXTURE(DslFixture, "alloc_buffer refuses a capturing stream with a UsageError that says why and what to "
                              "use instead, and the capture goes on") {
  MemPool pool = MemPool::create(ctx);
  SharedBuffer<float> x = buffer(64, 1.0f);
  std::string m1, m2;
  Graph g = capture(stream, [&] {
    m1 = message_of([&] { (void)stream.alloc_buffer<float>(64); });
    m2 = message_of([&] { (void)stream.alloc_buffer<float>(64, pool); });
    stream.launch(k.scale, Grid{1}, Block{64}, x, 3.0f, 64);
  });
  for (const std::string& m : {m1, m2}) {
    INFO(m);
    CHECK(contains(m, "Stream::alloc_buffer: the stream is capturing"));
    CHECK(contains(m, "graph allocation"));
    CHECK(contains(m, "alloc_async"));
  }
  CHECK(g.node_count() == 1);
  run(g);
  CHECK(read(x) == std::vector<float>(64, 3.0f));
}

TEST_CASE_FIXTURE(DslFixture, "a pool buffer owned by a graph node runs in every launch and is freed in stream order "
                              "once the graph is gone") {
  MemPool pool = MemPool::create(ctx);
  SharedBuffer<float> out = buffer(128, 0.0f);
  {
    SharedBuffer<float> b = stream.alloc_buffer<float>(128, pool).share();
    stream.synchronize();  // the graph runs on this stream too, but a graph is launched anywhere
    Graph g{ctx};
    g.edit([&](Edit& e) {
      auto f = e.launch(k.fill, Grid{1}, Block{128}, b, 9.0f, 128);
      e.after(f).memcpy(out, b);
    });
    b = {};
    run(g, 2);
    CHECK(read(out) == std::vector<float>(128, 9.0f));
    CHECK(pool.used_bytes() >= 128 * sizeof(float));
  }
  CHECK(tether::wait_released(ctx, 5s));
  ctx.synchronize();
  CHECK(pool.used_bytes() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "simulator only: when an allocation or its ordering fails, alloc_buffer throws a "
                              "DriverError naming the failed entry point and leaves no memory, stream or event "
                              "behind") {
  if (!simulated) return;
  for (const char* entry : {"cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cuEventRecord", "cuStreamWaitEvent"}) {
    CAPTURE(entry);
    tether::wait_reclaimed(5s);
    sim::quiesce();
    const sim::Stats before = sim::stats();
    {
      MemPool pool = MemPool::create(ctx);
      sim::fail_call(entry, 1, Errc::out_of_memory);
      const bool default_pool = std::string_view(entry) == "cuMemAllocAsync";
      std::string m = message_of([&] {
        (void)(default_pool ? stream.alloc_buffer<float>(64) : stream.alloc_buffer<float>(64, pool));
      });
      INFO(m);
      CHECK(contains(m, entry));
      CHECK(contains(m, "Stream::alloc_buffer"));
      sim::clear_faults();
    }
    stream.synchronize();
    tether::wait_reclaimed(5s);
    ctx.synchronize();
    sim::quiesce();
    const sim::Stats after = sim::stats();
    CHECK(after.device_allocations == before.device_allocations);
    CHECK(after.streams == before.streams);
    CHECK(after.events == before.events);
    CHECK(after.mem_pools == before.mem_pools);
  }
}

TEST_CASE_FIXTURE(DslFixture, "simulator only: when tether's free stream or its ordering event cannot be created, "
                              "MemPool::create throws a DriverError naming it and leaves nothing behind") {
  if (!simulated) return;
  for (const char* entry : {"cuMemPoolCreate", "cuStreamCreate", "cuEventCreate"}) {
    CAPTURE(entry);
    tether::wait_reclaimed(5s);
    sim::quiesce();
    const sim::Stats before = sim::stats();
    sim::fail_call(entry, 1, Errc::out_of_memory);
    std::string m = message_of([&] { (void)MemPool::create(ctx); });
    sim::clear_faults();
    INFO(m);
    CHECK(contains(m, entry));
    tether::wait_reclaimed(5s);
    sim::quiesce();
    const sim::Stats after = sim::stats();
    CHECK(after.streams == before.streams);
    CHECK(after.events == before.events);
    CHECK(after.mem_pools == before.mem_pools);
  }
}

TEST_SUITE_END();
