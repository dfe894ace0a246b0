// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Several devices in one Runtime (docs/multi-gpu.md): the peer-access entry points and
// Context::can_access_peer / enable_peer_access, peer access enabled on demand for kernels that keep
// another device's buffers, the simulator's peer_access violation, graphs and captures whose work
// runs on two devices with copies and events between them, and where each device's owners are
// released. On the driver TETHER_DRIVER selects; meson runs it on two simulated devices, once with
// every pair connected and once with devices 0 and 1 unable to reach each other's memory. A test
// that needs two devices says so (doctest MESSAGE) and returns where there is one: a GPU run lists
// it as owed on a two-GPU machine.
#include <doctest/doctest.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/launch_gate.hpp"
#include "support/messages.hpp"

using namespace tether;
using namespace tether_test;
using tether::detail::DriverTable;
using tether::detail::Entry;

namespace {

// ------------------------------------------------------------------------- release oracle
//
// Which context was current when each device allocation was freed (cuMemFreeAsync) and each module
// unloaded (cuModuleUnload). Why an interposed entry point and not a simulator rule: the real
// driver accepts these calls with another device's context current (unified addressing finds the
// allocation's device), so only the call itself can tell where tether made it. Works on both drivers.
struct ReleaseRecord {
  std::uintptr_t handle;
  CUcontext current;
};

struct ReleaseLog {
  std::mutex mu;
  std::vector<ReleaseRecord> frees;
  std::vector<ReleaseRecord> unloads;
};
ReleaseLog& release_log() {
  static ReleaseLog log;
  return log;
}

tether::detail::EntryTraits<Entry::cuCtxGetCurrent>::type g_get_current = nullptr;

CUcontext current_context() {
  CUcontext c = nullptr;
  if (g_get_current) g_get_current(&c);
  return c;
}

template <Entry E, class F = typename tether::detail::EntryTraits<E>::type>
struct Spied;
template <Entry E, class H, class... A>
struct Spied<E, CUresult (*)(H, A...)> {
  static inline CUresult (*original)(H, A...) = nullptr;
  static CUresult fn(H h, A... a) {
    std::uintptr_t key = 0;
    if constexpr (std::is_pointer_v<H>)
      key = reinterpret_cast<std::uintptr_t>(h);
    else
      key = static_cast<std::uintptr_t>(h);
    const ReleaseRecord r{key, current_context()};
    {
      ReleaseLog& log = release_log();
      std::lock_guard lock(log.mu);
      (E == Entry::cuModuleUnload ? log.unloads : log.frees).push_back(r);
    }
    return original(h, a...);
  }
};

/// Interposes the release oracle on `rt`'s table for its lifetime (the reclaimer calls through
/// the same table). Destroy it only once the releases it watches have run.
class ReleaseSpy {
 public:
  explicit ReleaseSpy(const Runtime& rt) : t_(const_cast<DriverTable&>(tether::detail::table_of(rt))) {
    {
      std::lock_guard lock(release_log().mu);
      release_log().frees.clear();
      release_log().unloads.clear();
    }
    g_get_current = t_.get<Entry::cuCtxGetCurrent>();
    Spied<Entry::cuMemFreeAsync>::original = t_.get<Entry::cuMemFreeAsync>();
    Spied<Entry::cuModuleUnload>::original = t_.get<Entry::cuModuleUnload>();
    t_.set<Entry::cuMemFreeAsync>(&Spied<Entry::cuMemFreeAsync>::fn);
    t_.set<Entry::cuModuleUnload>(&Spied<Entry::cuModuleUnload>::fn);
  }
  ~ReleaseSpy() {
    // The reclaimer reads these entries: it finishes what it was given before they are put back.
    tether::wait_reclaimed(std::chrono::seconds(10));
    t_.set<Entry::cuMemFreeAsync>(Spied<Entry::cuMemFreeAsync>::original);
    t_.set<Entry::cuModuleUnload>(Spied<Entry::cuModuleUnload>::original);
  }
  ReleaseSpy(const ReleaseSpy&) = delete;
  ReleaseSpy& operator=(const ReleaseSpy&) = delete;

  /// The contexts current at each free of the allocation at `address`.
  static std::vector<CUcontext> frees_of(CUdeviceptr address) { return of(release_log().frees, address); }
  /// The contexts current at each unload of module `m`.
  static std::vector<CUcontext> unloads_of(CUmodule m) {
    return of(release_log().unloads, reinterpret_cast<std::uintptr_t>(m));
  }

 private:
  static std::vector<CUcontext> of(const std::vector<ReleaseRecord>& list, std::uintptr_t key) {
    std::lock_guard lock(release_log().mu);
    std::vector<CUcontext> out;
    for (const ReleaseRecord& r : list)
      if (r.handle == key) out.push_back(r.current);
    return out;
  }
  DriverTable& t_;
};

// ------------------------------------------------------------------------------- the fixture

/// DslFixture (device 0: `ctx`, `k`, `stream`) plus, where the driver has a second device, its
/// context, the test kernels loaded there and a stream of it.
struct MultiFixture : DslFixture {
  bool two = rt.device_count() >= 2;
  std::optional<Context> ctx1;
  std::optional<TestKernels> k1;
  std::optional<Stream> s1;

  MultiFixture() {
    if (!two) return;
    ctx1.emplace(rt.context(1));
    k1.emplace(test_kernels(*ctx1));
    s1.emplace(ctx1->make_stream());
  }
  ~MultiFixture() {
    if (s1) s1->synchronize();
  }

  /// False, after saying so, where the driver has one device.
  bool has_two() const {
    if (two) return true;
    MESSAGE("needs two devices: owed on a two-GPU machine (meson runs it on two simulated devices)");
    return false;
  }
  /// Whether devices 0 and 1 can access each other's memory (the simulator's topology decides).
  bool connected() const { return ctx.can_access_peer(*ctx1) && ctx1->can_access_peer(ctx); }

  SharedBuffer<float> buffer_on(const Context& c, std::size_t n, float value) {
    SharedBuffer<float> b = c.alloc<float>(n).share();
    std::vector<float> h(n, value);
    b.copy_from(h);
    return b;
  }

  /// Turns peer access off between devices 0 and 1 with raw calls (earlier tests may have left it
  /// on; the tether objects of this test are new, so no cache of theirs knows of it).
  void disable_peer_access() {
    const DriverApi& d = rt.driver();
    ctx.make_current();
    (void)d.cuCtxDisablePeerAccess(ctx1->get());
    ctx1->make_current();
    (void)d.cuCtxDisablePeerAccess(ctx.get());
    ctx.make_current();
  }

  std::uint64_t calls(const char* entry) const { return simulated ? tether::sim::call_count(entry) : 0; }
};

std::vector<float> filled(std::size_t n, float v) { return std::vector<float>(n, v); }

}  // namespace

TEST_SUITE_BEGIN("multi");

// ------------------------------------------------------------------------ the entry points

TEST_CASE_FIXTURE(MultiFixture, "cuDeviceCanAccessPeer answers 0 for a device and itself, and the same device needs no "
                                "peer access: can_access_peer is true and enable_peer_access does nothing, without a "
                                "driver call") {
  int can = 7;
  CHECK(rt.driver().cuDeviceCanAccessPeer(&can, ctx.device(), ctx.device()) == CUDA_SUCCESS);
  CHECK(can == 0);
  const Context again = rt.context(0);
  const std::uint64_t asks = calls("cuDeviceCanAccessPeer"), enables = calls("cuCtxEnablePeerAccess");
  const std::uint64_t all = calls("*");
  CHECK(ctx.can_access_peer(ctx));
  CHECK(ctx.can_access_peer(again));
  ctx.enable_peer_access(ctx);
  ctx.enable_peer_access(again);
  CHECK(calls("cuDeviceCanAccessPeer") == asks);
  CHECK(calls("cuCtxEnablePeerAccess") == enables);
  CHECK(calls("*") == all);
}

TEST_CASE_FIXTURE(MultiFixture, "cuCtxEnablePeerAccess refuses the current context's own device and a thread without "
                                "a current context, as the real driver does") {
  const DriverApi& d = rt.driver();
  ctx.make_current();
  const CUresult own = d.cuCtxEnablePeerAccess(ctx.get(), 0);
  // cuda.h documents INVALID_CONTEXT; the H200 (driver 580) answered PEER_ACCESS_UNSUPPORTED.
  CHECK_MESSAGE(own == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "the driver answered " << result_name(own));
  CUresult without = CUDA_SUCCESS;
  std::thread([&] { without = d.cuCtxEnablePeerAccess(ctx.get(), 0); }).join();
  CHECK(without == CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE_FIXTURE(MultiFixture, "between two devices, cuCtxEnablePeerAccess needs flags 0, answers ALREADY_ENABLED the "
                                "second time or UNSUPPORTED where the pair cannot connect, and cuCtxDisablePeerAccess "
                                "answers NOT_ENABLED when there is nothing to disable") {
  if (!has_two()) return;
  disable_peer_access();
  const DriverApi& d = rt.driver();
  int can = 7;
  REQUIRE(d.cuDeviceCanAccessPeer(&can, ctx.device(), ctx1->device()) == CUDA_SUCCESS);
  ctx.make_current();
  CHECK(d.cuCtxEnablePeerAccess(ctx1->get(), 1) == CUDA_ERROR_INVALID_VALUE);
  if (can) {
    CHECK(d.cuCtxEnablePeerAccess(ctx1->get(), 0) == CUDA_SUCCESS);
    CHECK(d.cuCtxEnablePeerAccess(ctx1->get(), 0) == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CHECK(d.cuCtxDisablePeerAccess(ctx1->get()) == CUDA_SUCCESS);
  } else {
    CHECK(d.cuCtxEnablePeerAccess(ctx1->get(), 0) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  }
  CHECK(d.cuCtxDisablePeerAccess(ctx1->get()) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
}

// -------------------------------------------------------------------------- tether's API

TEST_CASE_FIXTURE(MultiFixture, "Context::enable_peer_access calls the driver once per pair and direction: a second "
                                "call costs no driver call, and can_access_peer then answers from the cache") {
  if (!has_two()) return;
  if (!connected()) {
    MESSAGE("needs two devices that can access each other's memory (the run without peer access checks the refusal)");
    return;
  }
  disable_peer_access();
  const std::uint64_t enables = calls("cuCtxEnablePeerAccess");
  ctx.enable_peer_access(*ctx1);
  CHECK(calls("cuCtxEnablePeerAccess") == enables + (simulated ? 1 : 0));
  const std::uint64_t all = calls("*");
  ctx.enable_peer_access(*ctx1);
  CHECK(ctx.can_access_peer(*ctx1));
  CHECK(calls("*") == all);  // one atomic load each
  ctx1->enable_peer_access(ctx);  // the other direction is a pair of its own
  CHECK(calls("cuCtxEnablePeerAccess") == enables + (simulated ? 2 : 0));
  // Enabled behind tether's back: another Context of the device calls once and takes
  // ALREADY_ENABLED as success.
  const Context again = rt.context(0);
  again.enable_peer_access(*ctx1);
  CHECK(calls("cuCtxEnablePeerAccess") == enables + (simulated ? 3 : 0));
  const DriverApi& d = rt.driver();
  ctx.make_current();
  CHECK(d.cuCtxEnablePeerAccess(ctx1->get(), 0) == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
}

TEST_CASE_FIXTURE(MultiFixture, "where two devices cannot connect, enable_peer_access throws a UsageError naming both "
                                "devices and the copy that needs no peer access, and asks the driver only once") {
  if (!has_two()) return;
  if (connected()) {
    MESSAGE("needs two devices that cannot access each other's memory (TETHER_SIM_NO_PEER=0-1: meson's second run)");
    return;
  }
  const Context fresh = rt.context(0);  // a Context whose cache knows nothing yet
  const std::uint64_t enables = calls("cuCtxEnablePeerAccess");
  std::string m = message_of([&] { fresh.enable_peer_access(*ctx1); });
  INFO(m);
  CHECK(contains(m, "Context::enable_peer_access: device 0 cannot access the memory of device 1 on this machine"));
  CHECK(contains(m, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"));
  CHECK(contains(m, "copying it there with a memcpy (Stream::memcpy, a memcpy node), which needs no peer access"));
  CHECK(calls("cuCtxEnablePeerAccess") == enables + (simulated ? 1 : 0));
  // Known now (and known to `ctx` from can_access_peer): no further driver call.
  const std::uint64_t all = calls("*");
  CHECK(throws_with<UsageError>([&] { fresh.enable_peer_access(*ctx1); }, "device 0 cannot access"));
  CHECK_FALSE(fresh.can_access_peer(*ctx1));
  CHECK_FALSE(ctx.can_access_peer(*ctx1));
  CHECK(throws_with<UsageError>([&] { ctx.enable_peer_access(*ctx1); }, "device 0 cannot access"));
  CHECK(calls("*") == all);
  std::string back = message_of([&] { ctx1->enable_peer_access(ctx); });
  CHECK(contains(back, "device 1 cannot access the memory of device 0"));
}

TEST_CASE_FIXTURE(MultiFixture, "tether::sim::configure refuses a topology pair that is not two different devices, and "
                                "a topology other than the one the open simulator has") {
  if (!simulated) {
    MESSAGE("the simulator's options");
    return;
  }
  // The simulator is open: configure refuses a malformed pair first, then any options but its own.
  CHECK(throws_with<UsageError>([] { tether::sim::configure(tether::sim::Options{2, std::size_t{16} << 30, {{0, 0}}}); },
                                "no_peer names the pair 0-0; a pair is two different device ordinals"));
  CHECK(throws_with<UsageError>(
      [] { tether::sim::configure(tether::sim::Options{2, std::size_t{16} << 30, {{0, 1}, {1, 2}}}); },
      "already open with other options"));
}

// ------------------------------------------------------------------------------ on demand

TEST_CASE_FIXTURE(MultiFixture, "a kernel that keeps a buffer of another device enables peer access from the kernel's "
                                "context once per pair, whether the buffer comes to an edit, an update, a parameter, "
                                "stream work or a capture") {
  if (!has_two()) return;
  if (!connected()) {
    MESSAGE("needs two devices that can access each other's memory");
    return;
  }
  disable_peer_access();
  SharedBuffer<float> y0 = buffer(64, 1.0f), z0 = buffer(64, 0.0f);
  SharedBuffer<float> x1 = buffer_on(*ctx1, 64, 2.0f), w1 = buffer_on(*ctx1, 64, 4.0f);
  const std::uint64_t enables = calls("cuCtxEnablePeerAccess");
  const std::uint64_t once = simulated ? 1 : 0;

  Graph g{ctx};
  Node<KernelNode<float*, const float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.axpy, Grid{1}, Block{64}, y0, x1, 1.0f, 64); });  // y0 = 1 + 2
  CHECK(calls("cuCtxEnablePeerAccess") == enables + once);
  Param<SharedBuffer<float>> weights(w1, "weights");
  g.edit([&](Edit& e) {
    auto a = e.after(n).launch(k.axpy, Grid{1}, Block{64}, z0, weights, 1.0f, 64);  // z0 = 4
    e.after(a).launch(k.fill, Grid{1}, Block{64}, ctx1->alloc<float>(64), 5.0f, 64);  // a DeviceBuffer moved in
  });
  CHECK(g.node_count() == 3);
  GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(y0) == filled(64, 3.0f));
  CHECK(read(z0) == filled(64, 4.0f));
  exec.update(n, Grid{1}, Block{64}, y0, w1, 1.0f, 64);  // y0 = 3 + 4
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(y0) == filled(64, 7.0f));
  g.edit([&](Edit& e) { e.update(n, Grid{1}, Block{64}, z0, x1, 1.0f, 64); });
  stream.launch(k.axpy, Grid{1}, Block{64}, y0, x1, 1.0f, 64);  // y0 = 9
  Graph captured = capture(stream, [&] { stream.launch(k.axpy, Grid{1}, Block{64}, y0, x1, 1.0f, 64); });
  run(captured);  // y0 = 11
  CHECK(read(y0) == filled(64, 11.0f));
  CHECK(calls("cuCtxEnablePeerAccess") == enables + once);

  // The other direction: device 1's kernel reading device 0's buffer.
  s1->launch(k1->axpy, Grid{1}, Block{64}, x1, y0, 1.0f, 64);  // x1 = 2 + 11
  s1->synchronize();
  CHECK(read(x1) == filled(64, 13.0f));
  CHECK(calls("cuCtxEnablePeerAccess") == enables + 2 * once);
}

TEST_CASE_FIXTURE(MultiFixture, "where two devices cannot connect, a kernel that keeps the other device's buffer is "
                                "refused with a UsageError naming the argument, both devices and the kernel, before "
                                "its node or launch reaches the driver") {
  if (!has_two()) return;
  if (connected()) {
    MESSAGE("needs two devices that cannot access each other's memory (TETHER_SIM_NO_PEER=0-1: meson's second run)");
    return;
  }
  SharedBuffer<float> y0 = buffer(64, 1.0f), x1 = buffer_on(*ctx1, 64, 2.0f);
  const std::uint64_t adds = calls("cuGraphAddNode"), launches = calls("cuLaunchKernel");
  Graph g{ctx};
  std::string m = message_of([&] {
    g.edit([&](Edit& e) { e.launch(k.axpy, Grid{1}, Block{64}, y0, x1, 1.0f, 64); });
  });
  INFO(m);
  CHECK(contains(m, "Edit::launch: argument 1 of kernel 'axpy' is a buffer of device 1, and the kernel runs on device "
                    "0, which cannot access device 1's memory on this machine"));
  CHECK(contains(m, "copy the data into a buffer of device 0 first (a memcpy node or Stream::memcpy, which need no "
                    "peer access), or run the kernel on device 1"));
  CHECK(g.node_count() == 0);
  // Known now: the next refusals make no driver call at all.
  const std::uint64_t all = calls("*");
  std::string s = message_of([&] { stream.launch(k.axpy, Grid{1}, Block{64}, y0, x1, 1.0f, 64); });
  CHECK(contains(s, "Stream::launch: argument 1 of kernel 'axpy' is a buffer of device 1"));
  std::string spec = message_of([&] { (void)enqueue(stream, tether::kernel(k.scale, Grid{1}, Block{64}, x1, 2.0f, 64)); });
  CHECK(contains(spec, "tether::enqueue: argument 0 of kernel 'scale' is a buffer of device 1, and the kernel runs on "
                       "device 0"));
  CHECK(calls("*") == all);
  CHECK(calls("cuGraphAddNode") == adds);
  CHECK(calls("cuLaunchKernel") == launches);
  // What needs no peer access still works: the copy the message suggests, and the kernel there.
  SharedBuffer<float> x0 = buffer(64, 0.0f);
  stream.memcpy(x0, x1);
  stream.launch(k.axpy, Grid{1}, Block{64}, y0, x0, 1.0f, 64);
  stream.synchronize();
  CHECK(read(y0) == filled(64, 3.0f));
}

TEST_CASE_FIXTURE(MultiFixture, "a kernel given an unowned pointer to another device's memory without peer access is "
                                "a peer_access violation in the simulator, and does not run") {
  if (!has_two()) return;
  if (!simulated) {
    MESSAGE("the simulator's check: on a GPU such a kernel faults with an illegal address");
    return;
  }
  disable_peer_access();
  SharedBuffer<float> y0 = buffer(64, 1.0f), x1 = buffer_on(*ctx1, 64, 2.0f);
  {
    tether::sim::ExpectViolations expected;
    stream.launch(k.axpy, Grid{1}, Block{64}, y0, unowned(x1), 1.0f, 64);
    stream.synchronize();
    Graph g{ctx};
    g.edit([&](Edit& e) { e.launch(k.axpy, Grid{1}, Block{64}, y0, unowned(x1), 1.0f, 64); });
    run(g);
    CHECK(expected.absorbed() == 2);
  }
  std::vector<tether::sim::Violation> v = tether::sim::violations();
  REQUIRE(v.size() == 2);
  for (const tether::sim::Violation& x : v) {
    INFO(x.detail);
    CHECK(x.kind == tether::sim::ViolationKind::peer_access);
    CHECK(contains(x.detail, "kernel 'axpy' runs on device 0 and its argument 1"));
    CHECK(contains(x.detail, "is memory of device 1, whose peer access from device 0's context is not enabled"));
  }
  tether::sim::clear_violations();
  CHECK(read(y0) == filled(64, 1.0f));  // neither ran
  if (!connected()) return;
  ctx.enable_peer_access(*ctx1);  // by hand, as unowned pointers need
  stream.launch(k.axpy, Grid{1}, Block{64}, y0, unowned(x1), 1.0f, 64);
  stream.synchronize();
  CHECK(read(y0) == filled(64, 3.0f));
}

TEST_CASE_FIXTURE(MultiFixture, "after the last context of a device is released, its next context gets peer access "
                                "enabled again") {
  if (!has_two()) return;
  if (!connected()) {
    MESSAGE("needs two devices that can access each other's memory");
    return;
  }
  disable_peer_access();
  // The fixture's objects of device 1 retain its primary context: drop them.
  s1.reset();
  k1.reset();
  ctx1.reset();
  CHECK(wait_released(ctx));
  SharedBuffer<float> y0 = buffer(64, 1.0f);
  const std::uint64_t enables = calls("cuCtxEnablePeerAccess");
  auto use_device_1 = [&] {
    const Context c1 = rt.context(1);
    SharedBuffer<float> x1 = buffer_on(c1, 64, 1.0f);
    stream.launch(k.axpy, Grid{1}, Block{64}, y0, x1, 1.0f, 64);
    stream.synchronize();
  };
  use_device_1();
  CHECK(wait_released(ctx));  // device 1's buffer, then its context, are released
  use_device_1();             // a new primary context of device 1: enabled again
  CHECK(read(y0) == filled(64, 3.0f));
  CHECK(calls("cuCtxEnablePeerAccess") == enables + (simulated ? 2 : 0));
}

// ------------------------------------------------------------------------- multi-device work

TEST_CASE_FIXTURE(MultiFixture, "a graph of device 0 runs kernels of both devices, with copies between their buffers "
                                "both ways and through pinned memory, in edge order, launched from a stream of device 0; "
                                "events order work across the two devices' streams") {
  if (!has_two()) return;
  SharedBuffer<float> x0 = buffer(64, 1.0f), y0 = buffer(64, 0.0f);
  SharedBuffer<float> x1 = buffer_on(*ctx1, 64, 0.0f), z1 = buffer_on(*ctx1, 64, 0.0f);
  SharedPinnedBuffer<float> host0 = ctx.alloc_pinned<float>(64).share();
  SharedPinnedBuffer<float> host1 = ctx1->alloc_pinned<float>(64).share();
  Graph g{ctx};
  g.edit([&](Edit& e) {
    auto a = e.launch(k.scale, Grid{1}, Block{64}, x0, 2.0f, 64);      // x0 = 2 (device 0)
    auto b = e.after(a).memcpy(x1, x0);                                // device 0 -> device 1
    auto c = e.after(b).launch(k1->scale, Grid{1}, Block{64}, x1, 3.0f, 64);  // x1 = 6 (device 1)
    auto d = e.after(c).memcpy(y0, x1);                                // device 1 -> device 0
    e.after(d).launch(k.scale, Grid{1}, Block{64}, y0, 0.5f, 64);      // y0 = 3 (device 0)
    auto p = e.after(c).memcpy(host0, x1);                             // device 1 -> pinned of device 0
    e.after(p).memcpy(z1, host0);                                      // pinned of device 0 -> device 1
  });
  CHECK(g.node_count() == 7);
  GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x0) == filled(64, 2.0f));
  CHECK(read(x1) == filled(64, 6.0f));
  CHECK(read(y0) == filled(64, 3.0f));
  CHECK(std::vector<float>(host0.span().begin(), host0.span().end()) == filled(64, 6.0f));
  CHECK(read(z1) == filled(64, 6.0f));

  // Across the two devices' streams: device 1 waits for device 0's launch, device 0 for device 1's.
  exec.launch(stream);  // x1 = 12
  Event done0 = ctx.make_event(EventFlags::disable_timing);
  stream.record(done0);
  s1->wait(done0);
  s1->launch(k1->scale, Grid{1}, Block{64}, x1, 10.0f, 64);  // x1 = 120, after the launch wrote 12
  x1.copy_to(host1, *s1);
  Event done1 = ctx1->make_event(EventFlags::disable_timing);
  s1->record(done1);
  stream.wait(done1);
  stream.memcpy(y0, x1);
  stream.synchronize();
  CHECK(read(y0) == filled(64, 120.0f));
  CHECK(std::vector<float>(host1.span().begin(), host1.span().end()) == filled(64, 120.0f));
  // Stream work of device 0 copying to device 1, and from device 1's pinned memory.
  SharedBuffer<float> w0 = buffer(64, 0.0f);
  stream.memcpy(z1, y0);
  stream.memcpy(w0, host1);
  stream.synchronize();
  CHECK(read(z1) == filled(64, 120.0f));
  CHECK(read(w0) == filled(64, 120.0f));
}

TEST_CASE_FIXTURE(MultiFixture, "the owners of both devices in one graph are released exactly once after its last "
                                "launch, each with its own device's context current") {
  if (!has_two()) return;
  ReleaseSpy spy(rt);
  LaunchGate gate;
  SharedBuffer<float> out0 = buffer(64, 0.0f);
  CUdeviceptr a0 = 0, a1 = 0;
  CUmodule mod1 = nullptr;
  {
    Module m1 = test_module(*ctx1);
    mod1 = m1.get();
    Kernel<float*, float, int> scale1 = m1.kernel<float*, float, int>("scale");
    SharedBuffer<float> x0 = buffer(64, 1.0f), x1 = buffer_on(*ctx1, 64, 0.0f);
    a0 = x0.address();
    a1 = x1.address();
    Graph g{ctx};
    g.edit([&](Edit& e) {
      auto a = e.launch(k.scale, Grid{1}, Block{64}, x0, 2.0f, 64);
      auto b = e.after(a).memcpy(x1, x0);
      auto c = e.after(b).launch(scale1, Grid{1}, Block{64}, x1, 3.0f, 64);
      auto d = e.after(c).memcpy(out0, x1);
      e.after(d).host([&gate] { gate.wait(); });
    });
    GraphExec exec = g.instantiate();
    exec.launch(stream);
  }  // the executable, the graph, both buffers and device 1's module are dropped while the launch runs
  std::this_thread::sleep_for(30ms);
  CHECK(ReleaseSpy::frees_of(a0).empty());
  CHECK(ReleaseSpy::frees_of(a1).empty());
  CHECK(ReleaseSpy::unloads_of(mod1).empty());
  gate.open = true;
  stream.synchronize();
  CHECK(wait_released(ctx));
  CHECK(wait_released(*ctx1));
  CHECK(read(out0) == filled(64, 6.0f));
  CHECK(ReleaseSpy::frees_of(a0) == std::vector<CUcontext>{ctx.get()});
  CHECK(ReleaseSpy::frees_of(a1) == std::vector<CUcontext>{ctx1->get()});
  CHECK(ReleaseSpy::unloads_of(mod1) == std::vector<CUcontext>{ctx1->get()});
}

TEST_CASE_FIXTURE(MultiFixture, "a capture forked onto a stream of another device with events runs both devices' work "
                                "in order, and releases each device's owners once with its context current") {
  if (!has_two()) return;
  ReleaseSpy spy(rt);
  SharedBuffer<float> out0 = buffer(64, 0.0f);
  CUdeviceptr a0 = 0, a1 = 0;
  {
    SharedBuffer<float> x0 = buffer(64, 1.0f), x1 = buffer_on(*ctx1, 64, 0.0f);
    a0 = x0.address();
    a1 = x1.address();
    Event fork = ctx.make_event(EventFlags::disable_timing), join = ctx1->make_event(EventFlags::disable_timing);
    Graph g = capture(stream, [&] {
      stream.launch(k.scale, Grid{1}, Block{64}, x0, 2.0f, 64);  // x0 = 2
      stream.record(fork);
      s1->wait(fork);  // device 1's stream joins the capture after the scale
      s1->memcpy(x1, x0);
      s1->launch(k1->scale, Grid{1}, Block{64}, x1, 3.0f, 64);  // x1 = 6, on device 1
      s1->record(join);
      stream.wait(join);  // joined back
      stream.memcpy(out0, x1);
      stream.launch(k.scale, Grid{1}, Block{64}, out0, 0.5f, 64);  // out0 = 3
    });
    CHECK_FALSE(s1->capturing());
    CHECK(g.node_count() == 5);
    GraphExec exec = g.instantiate();
    exec.launch(stream);
    exec.launch(stream);  // x0 = 4, x1 = 12, out0 = 6
    stream.synchronize();
    CHECK(read(out0) == filled(64, 6.0f));
    CHECK(read(x1) == filled(64, 12.0f));
  }
  CHECK(wait_released(ctx));
  CHECK(wait_released(*ctx1));
  CHECK(ReleaseSpy::frees_of(a0) == std::vector<CUcontext>{ctx.get()});
  CHECK(ReleaseSpy::frees_of(a1) == std::vector<CUcontext>{ctx1->get()});
  out0 = SharedBuffer<float>{};  // released while the spy still watches
  CHECK(wait_released(ctx));
}

TEST_SUITE_END();

TEST_CASE_FIXTURE(MultiFixture, "Capture::fork and join bring a stream of another device into a capture and back") {
  if (!has_two()) return;
  SharedBuffer<float> x0 = buffer(64, 1.0f), x1 = buffer_on(*ctx1, 64, 0.0f), out0 = buffer(64, 0.0f);
  Capture c(stream);
  stream.launch(k.scale, Grid{1}, Block{64}, x0, 2.0f, 64);  // x0 = 2
  c.fork(*s1);                                                // the fork point's event is device 0's
  s1->memcpy(x1, x0);
  s1->launch(k1->scale, Grid{1}, Block{64}, x1, 3.0f, 64);  // x1 = 6, on device 1
  c.join(*s1);
  stream.memcpy(out0, x1);
  Graph g = c.end();
  CHECK(g.node_count() == 4);
  GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(out0) == filled(64, 6.0f));
}
