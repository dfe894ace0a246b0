// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// tether's NCCL layer through the public API: ids, communicators, every collective on streams and
// in captured graphs, groups, ownership across every order of drops, registrations, failing fast
// (asynchronous errors, abort, the watchdog, the sequence check) and bad input. On the simulator's
// NCCL in CI (TETHER_SIM_DEVICES ranks); on real NCCL on a GPU machine, as many ranks as it has GPUs.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "nccl/library.hpp"
#include "nccl/nccl_support.hpp"

using namespace tether;
using namespace tether_test;
using namespace std::chrono_literals;

TEST_SUITE_BEGIN("nccl");

TEST_CASE("a unique id round-trips through its bytes and its hex text, and bad input is refused naming what is wrong") {
  NcclFixture f;
  nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
  CHECK(static_cast<bool>(id));
  CHECK_FALSE(static_cast<bool>(nccl::UniqueId{}));
  const std::string hex = id.to_hex();
  CHECK(hex.size() == 256);
  CHECK(nccl::UniqueId::from_hex(hex) == id);
  std::string upper = hex;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](char c) { return static_cast<char>(std::toupper(c)); });
  CHECK(nccl::UniqueId::from_hex(upper) == id);
  CHECK(nccl::UniqueId::from_bytes(id.bytes()) == id);
  CHECK_FALSE(nccl::UniqueId::generate(f.rt) == id);
  std::string bad = hex;
  bad[17] = 'g';
  CHECK_THROWS_WITH_AS(nccl::UniqueId::from_hex(bad), "nccl::UniqueId::from_hex: character 17 ('g') is not a hexadecimal digit",
                       UsageError);
  CHECK_THROWS_WITH_AS(nccl::UniqueId::from_hex("abc"), "nccl::UniqueId::from_hex: an id is 256 hexadecimal digits, not 3",
                       UsageError);
  std::array<std::byte, 5> few{};
  CHECK_THROWS_WITH_AS(nccl::UniqueId::from_bytes(few), "nccl::UniqueId::from_bytes: an id is 128 bytes, not 5", UsageError);
}

TEST_CASE("describe and version name the NCCL the runtime uses") {
  NcclFixture f;
  const std::string d = nccl::describe(f.rt);
  CHECK(d.starts_with("NCCL 2."));
  CHECK(nccl::version(f.rt) >= 21400);
  if (f.simulated) CHECK(d.find("tether simulator") != std::string::npos);
  CHECK(nccl::result_name(5) == "ncclInvalidUsage");
  CHECK(std::error_code(nccl::Errc::remote_error).message() ==
        "ncclRemoteError: remote process exited or there was a network error");
}

TEST_CASE("a communicator knows its rank, size and device, and the ranks of one id join from their own threads") {
  NcclFixture f;
  for (int n : {1, 2, 4}) {
    if (!f.fits(n)) continue;
    CAPTURE(n);
    nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
    f.on_ranks(n, [&](int r, Context& ctx) {
      nccl::Communicator c = nccl::Communicator::create(ctx, id, n, r);
      CHECK(c.rank() == r);
      CHECK(c.size() == n);
      CHECK(c.context().device() == r);
      CHECK(c.get() != nullptr);
      CHECK(c.async_error() == nccl::Errc::success);
      CHECK(fmt::format("{}", detail::owner_label(c)) == fmt::format("Communicator rank {} of {} (device {})", r, n, r));
    });
    CHECK(f.settle());
    CHECK(nccl::communicator_counts().alive == 0);
  }
}

TEST_CASE("create_all makes one rank per context in order, and refuses two contexts of one device") {
  NcclFixture f;
  const int n = std::min(f.devices, 4);
  std::vector<Context> ctxs;
  for (int d = 0; d < n; ++d) ctxs.push_back(f.rt.context(d));
  std::vector<nccl::Communicator> comms = nccl::Communicator::create_all(ctxs);
  REQUIRE(comms.size() == static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    CHECK(comms[static_cast<std::size_t>(r)].rank() == r);
    CHECK(comms[static_cast<std::size_t>(r)].context().device() == r);
  }
  std::vector<Context> twice{f.rt.context(0), f.rt.context(0)};
  CHECK_THROWS_WITH_AS(nccl::Communicator::create_all(twice),
                       "nccl::Communicator::create_all: contexts 0 and 1 are both of device 0; NCCL takes one rank per device",
                       UsageError);
  CHECK_THROWS_WITH_AS(nccl::Communicator::create_all(std::span<const Context>{}),
                       "nccl::Communicator::create_all: no context was given", UsageError);
}

namespace {

// Every collective once, on `n` ranks, as stream work; values exact.
void every_collective(NcclFixture& f, int n, bool grouped) {
  nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
  constexpr std::size_t k = 6;
  f.on_ranks(n, [&](int r, Context& ctx) {
    nccl::Communicator c = nccl::Communicator::create(ctx, id, n, r);
    Stream s = ctx.make_stream();
    const float fr = static_cast<float>(r + 1);
    auto sum = filled<float>(ctx, k, [&](std::size_t i) { return fr * static_cast<float>(i + 1); });
    auto sum_out = filled<float>(ctx, k, [](std::size_t) { return -1; });
    auto mx = filled<std::int32_t>(ctx, k, [&](std::size_t i) { return static_cast<int>(i) * 10 + r; });
    auto mx_out = filled<std::int32_t>(ctx, k, [](std::size_t) { return -1; });
    auto gather_in = filled<double>(ctx, k, [&](std::size_t i) { return r * 100.0 + static_cast<double>(i); });
    auto gather_out = filled<double>(ctx, k * static_cast<std::size_t>(n), [](std::size_t) { return -1.0; });
    auto scatter_in = filled<std::int64_t>(ctx, k * static_cast<std::size_t>(n), [&](std::size_t i) { return static_cast<std::int64_t>(i) + r; });
    auto scatter_out = filled<std::int64_t>(ctx, k, [](std::size_t) { return -1; });
    auto bcast_in = filled<std::uint8_t>(ctx, k, [&](std::size_t i) { return 7 * (r + 1) + static_cast<int>(i); });
    auto bcast_out = filled<std::uint8_t>(ctx, k, [](std::size_t) { return 0; });
    auto red_in = filled<float>(ctx, k, [&](std::size_t) { return fr; });
    auto red_out = filled<float>(ctx, k, [](std::size_t) { return -1; });
    auto ring_in = filled<float>(ctx, k, [&](std::size_t i) { return 1000.0f * fr + static_cast<float>(i); });
    auto ring_out = filled<float>(ctx, k, [](std::size_t) { return -1; });
    auto issue = [&] {
      c.all_reduce(s, sum, sum_out);
      c.all_reduce(s, mx, mx_out, nccl::ReduceOp::max);
      c.all_gather(s, gather_in, gather_out);
      c.reduce_scatter(s, scatter_in, scatter_out);
      c.broadcast(s, bcast_in, bcast_out, n - 1);
      c.reduce(s, red_in, red_out, 0, nccl::ReduceOp::prod);
    };
    if (grouped) {
      nccl::group([&] {
        issue();
        c.send(s, ring_in, (r + 1) % n);
        c.recv(s, ring_out, (r + n - 1) % n);
      });
    } else {
      issue();
      nccl::group([&] {  // a send and its receive on one thread are grouped, as NCCL requires
        c.send(s, ring_in, (r + 1) % n);
        c.recv(s, ring_out, (r + n - 1) % n);
      });
    }
    s.synchronize();
    const float tri = static_cast<float>(n * (n + 1) / 2);
    std::vector<float> got = read_all(sum_out);
    for (std::size_t i = 0; i < k; ++i) CHECK(got[i] == tri * static_cast<float>(i + 1));
    std::vector<std::int32_t> m = read_all(mx_out);
    for (std::size_t i = 0; i < k; ++i) CHECK(m[i] == static_cast<int>(i) * 10 + n - 1);
    std::vector<double> g = read_all(gather_out);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < k; ++i) CHECK(g[static_cast<std::size_t>(q) * k + i] == q * 100.0 + static_cast<double>(i));
    std::vector<std::int64_t> sc = read_all(scatter_out);
    for (std::size_t i = 0; i < k; ++i) {
      std::int64_t want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<std::int64_t>(static_cast<std::size_t>(r) * k + i) + q;
      CHECK(sc[i] == want);
    }
    std::vector<std::uint8_t> b = read_all(bcast_out);
    for (std::size_t i = 0; i < k; ++i) CHECK(b[i] == 7 * n + static_cast<int>(i));
    std::vector<float> red = read_all(red_out);
    float fact = 1;
    for (int q = 1; q <= n; ++q) fact *= static_cast<float>(q);
    for (std::size_t i = 0; i < k; ++i) CHECK(red[i] == (r == 0 ? fact : -1.0f));
    std::vector<float> ring = read_all(ring_out);
    const int from = (r + n - 1) % n;
    for (std::size_t i = 0; i < k; ++i) CHECK(ring[i] == 1000.0f * static_cast<float>(from + 1) + static_cast<float>(i));
  });
}

}  // namespace

TEST_CASE("every collective computes exact results on 1, 2 and 4 ranks as stream work, grouped or not") {
  NcclFixture f;
  for (int n : {1, 2, 4})
    for (bool grouped : {false, true}) {
      if (!f.fits(n)) continue;
      CAPTURE(n);
      CAPTURE(grouped);
      every_collective(f, n, grouped);
      CHECK(f.settle());
    }
}

TEST_CASE("an all_reduce is typed by its element type for every type NCCL has, in place and out of place") {
  NcclFixture f;
  const int n = std::min(f.devices, 2);
  nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
  f.on_ranks(n, [&](int r, Context& ctx) {
    nccl::Communicator c = nccl::Communicator::create(ctx, id, n, r);
    Stream s = ctx.make_stream();
    auto check_type = [&]<class T>(T one, auto sum_of) {
      auto in = filled<T>(ctx, 5, [&](std::size_t) { return one; });
      auto out = filled<T>(ctx, 5, [&](std::size_t) { return T{}; });
      c.all_reduce(s, in, out);
      c.all_reduce(s, in, in);  // in place
      s.synchronize();
      for (const T& v : read_all(out)) CHECK(sum_of(v));
      for (const T& v : read_all(in)) CHECK(sum_of(v));
    };
    check_type(std::int8_t{3}, [&](std::int8_t v) { return v == 3 * n; });
    check_type(std::uint8_t{3}, [&](std::uint8_t v) { return v == 3 * n; });
    check_type(std::int32_t{-3}, [&](std::int32_t v) { return v == -3 * n; });
    check_type(std::uint32_t{3}, [&](std::uint32_t v) { return v == 3u * static_cast<unsigned>(n); });
    check_type(std::int64_t{1} << 40, [&](std::int64_t v) { return v == (std::int64_t{1} << 40) * n; });
    check_type(std::uint64_t{5}, [&](std::uint64_t v) { return v == 5u * static_cast<unsigned>(n); });
    check_type(0.5f, [&](float v) { return v == 0.5f * static_cast<float>(n); });
    check_type(0.25, [&](double v) { return v == 0.25 * n; });
    // bf16 1.0 is 0x3F80 and 2.0 is 0x4000; f16 1.0 is 0x3C00 and 2.0 is 0x4000.
    if (n == 2) {
      check_type(nccl::BFloat16{0x3F80}, [](nccl::BFloat16 v) { return v.bits == 0x4000; });
      check_type(nccl::Half{0x3C00}, [](nccl::Half v) { return v.bits == 0x4000; });
    }
  });
}

TEST_CASE("collectives captured into a graph run again at every launch and keep their buffers and communicator") {
  NcclFixture f;
  for (int n : {1, 2}) {
    if (!f.fits(n)) continue;
    CAPTURE(n);
    nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
    f.on_ranks(n, [&](int r, Context& ctx) {
      Stream s = ctx.make_stream();
      GraphExec exec;
      SharedBuffer<float> out;
      {
        nccl::Communicator c = nccl::Communicator::create(ctx, id, n, r);
        SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
        out = filled<float>(ctx, 4, [](std::size_t) { return 0; });
        Graph g = tether::capture(s, CaptureMode::thread_local_, [&] {
          c.all_reduce(s, x, x);  // in place: x doubles (n = 2) at every launch
          c.all_reduce(s, x, out);
        });
        exec = g.instantiate();
      }  // the communicator, the graph and x are dropped: the executable keeps them
      for (int launch = 1; launch <= 3; ++launch) {
        exec.launch(s);
        s.synchronize();
        const float want = static_cast<float>(std::pow(n, launch + 1));  // x is n^launch, summed once more
        for (float v : read_all(out)) CHECK(v == want);
      }
      CHECK(nccl::communicator_counts().alive >= 1);
    });
    CHECK(f.settle());
    CHECK(nccl::communicator_counts().alive == 0);
    CHECK(nccl::communicator_counts().closing == 0);
  }
}

TEST_CASE("a captured collective's node is identified, and inspect names the collective and its communicator") {
  NcclFixture f;
  const int n = std::min(f.devices, 2);
  if (n < 2) {
    MESSAGE("skipped: one rank's collective is a copy or nothing at all (NCCL 2.28): owed on two GPUs");
    return;
  }
  nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
  f.on_ranks(n, [&](int r, Context& ctx) {
    nccl::Communicator c = nccl::Communicator::create(ctx, id, n, r);
    Stream s = ctx.make_stream();
    SharedBuffer<float> x = filled<float>(ctx, 8, [](std::size_t) { return 1; });
    Node<> node;
    Graph g = tether::capture(s, CaptureMode::thread_local_, [&] { node = c.all_reduce(s, x, x); });
    CHECK(node.valid());
    const std::string text = fmt::format("{}", inspect(g));
    CHECK_MESSAGE(text.find(fmt::format("all_reduce of 8 float32 (sum) on Communicator rank {} of 2 (device {})", r, r)) !=
                      std::string::npos,
                  text);
    CHECK(text.find("SharedBuffer<float>[8]") != std::string::npos);
    GraphExec e = g.instantiate();
    e.launch(s);
    s.synchronize();
    for (float v : read_all(x)) CHECK(v == 2.0f);
  });
}

TEST_CASE("a group's collectives captured on every rank keep their owners with the captured nodes") {
  NcclFixture f;
  const int n = std::min(f.devices, 2);
  nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
  f.on_ranks(n, [&](int r, Context& ctx) {
    nccl::Communicator c = nccl::Communicator::create(ctx, id, n, r);
    Stream s = ctx.make_stream();
    SharedBuffer<float> a = filled<float>(ctx, 3, [&](std::size_t) { return static_cast<float>(r + 1); });
    SharedBuffer<float> b = filled<float>(ctx, 3, [](std::size_t) { return 0; });
    SharedBuffer<float> got = filled<float>(ctx, 3, [](std::size_t) { return 0; });
    Graph g = tether::capture(s, CaptureMode::thread_local_, [&] {
      nccl::Group grp;
      c.all_reduce(s, a, b);
      c.send(s, a, (r + 1) % n);
      c.recv(s, got, (r + n - 1) % n);
      grp.end();
    });
    const long before = a.use_count();
    GraphExec e = g.instantiate();
    g = Graph{};
    e.launch(s);
    s.synchronize();
    for (float v : read_all(b)) CHECK(v == static_cast<float>(n * (n + 1) / 2));
    for (float v : read_all(got)) CHECK(v == static_cast<float>((r + n - 1) % n + 1));
    CHECK(a.use_count() >= before - 1);  // the executable still holds a
    e = GraphExec{};
    CHECK(eventually([&] { tether::reclaim(); return a.use_count() == 1 && got.use_count() == 1; }, 10s));
  });
}

namespace {

// The objects a rank may drop, and the order it drops them in.
enum class Held { comm, buffers, graph, exec, stream };
constexpr std::array<Held, 5> kHeld{Held::comm, Held::buffers, Held::graph, Held::exec, Held::stream};

}  // namespace

TEST_CASE("every order of dropping the communicator, its buffers, the graph, the executable and the stream releases each "
          "exactly once "
          "after its last consumer and never hangs, with a launch in flight") {
  NcclFixture f;
  const int n = std::min(f.devices, 2);
  std::array<Held, 5> order = kHeld;
  std::sort(order.begin(), order.end());
  int orders = 0;
  do {
    CAPTURE(orders);
    nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
    std::atomic<bool> open{false};
    std::atomic<int> dropped{0};
    f.on_ranks(n, [&](int r, Context& ctx) {
      std::optional<Stream> s = ctx.make_stream();
      std::optional<nccl::Communicator> c = nccl::Communicator::create(ctx, id, n, r);
      std::optional<SharedBuffer<float>> send = filled<float>(ctx, 16, [&](std::size_t) { return static_cast<float>(r + 1); });
      std::optional<SharedBuffer<float>> recv = filled<float>(ctx, 16, [](std::size_t) { return 0; });
      std::optional<SharedBuffer<float>> ring = filled<float>(ctx, 16, [](std::size_t) { return 0; });
      SharedBuffer<float> watch = *recv;  // kept to read the result; watch.use_count() tells who else holds it
      SharedBuffer<float> watch_ring = *ring;
      std::optional<Graph> g = tether::capture(*s, CaptureMode::thread_local_, [&] {
        s->host([&open] {
          while (!open.load()) std::this_thread::sleep_for(200us);
        });
        c->all_reduce(*s, *send, *recv);
        // A send and receive in a group: NCCL captures a kernel and holds the communicator from
        // the graph even for one rank (sending to itself).
        nccl::group([&] {
          c->send(*s, *send, (r + 1) % n);
          c->recv(*s, *ring, (r + n - 1) % n);
        });
      });
      std::optional<GraphExec> e = g->instantiate();
      e->launch(*s);  // held in flight by the host node
      for (Held h : order) switch (h) {
          case Held::comm: c.reset(); break;
          case Held::buffers:
            send.reset();
            recv.reset();
            ring.reset();
            break;
          case Held::graph: g.reset(); break;
          case Held::exec: e.reset(); break;
          case Held::stream: s.reset(); break;
        }
      // Everything is dropped; the launch in flight still holds all it uses.
      tether::reclaim();
      CHECK(watch.use_count() > 1);
      dropped.fetch_add(1);
      if (r == 0) {
        while (dropped.load() < n) std::this_thread::sleep_for(100us);
        open = true;
      }
      CHECK(eventually([&] { tether::reclaim(); return watch.use_count() == 1 && watch_ring.use_count() == 1; }, 20s));
      for (float v : read_all(watch)) CHECK(v == static_cast<float>(n * (n + 1) / 2));
      for (float v : read_all(watch_ring)) CHECK(v == static_cast<float>((r + n - 1) % n + 1));
    });
    CHECK(f.settle());
    CHECK(nccl::communicator_counts().alive == 0);
    CHECK(nccl::communicator_counts().closing == 0);
    if (f.simulated) CHECK(sim::nccl_stats().communicators == 0);
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 120);
}

TEST_CASE("dropping the last handle of a communicator that a raw capture still holds returns at once, and NCCL's "
          "destroy completes on its own thread once that graph is gone") {
  NcclFixture f;
  Context ctx = f.rt.context(0);
  ctx.make_current();
  nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
  nccl::Communicator c = nccl::Communicator::create(ctx, id, 1, 0);
  Stream s = ctx.make_stream();
  SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
  SharedBuffer<float> y = filled<float>(ctx, 4, [](std::size_t) { return 0; });
  // Raw NCCL, captured by a raw capture: NCCL's own user object holds the communicator; tether
  // knows neither the graph nor the work.
  const DriverApi& api = f.rt.driver();
  const detail::NcclTable& nt = detail::nccl_table(f.rt);
  REQUIRE(api.cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
  {
    ctx.make_current();
    using detail::nccl_abi::DataType, detail::nccl_abi::Result;
    void* px = reinterpret_cast<void*>(static_cast<std::uintptr_t>(x.address()));
    void* py = reinterpret_cast<void*>(static_cast<std::uintptr_t>(y.address()));
    // A send to itself and its receive: NCCL launches a kernel even for one rank (a lone
    // collective would be a copy, with no reference on the communicator).
    REQUIRE(nt.ncclGroupStart() == Result::success);
    REQUIRE(nt.ncclSend(px, 4, DataType::float32, 0, c.get(), s.get()) == Result::success);
    REQUIRE(nt.ncclRecv(py, 4, DataType::float32, 0, c.get(), s.get()) == Result::success);
    REQUIRE(nt.ncclGroupEnd() == Result::success);
    ctx.make_current();
  }
  CUgraph raw = nullptr;
  REQUIRE(api.cuStreamEndCapture(s.get(), &raw) == CUDA_SUCCESS);
  tether::reclaim();
  c = nccl::Communicator{};  // the last tether handle: must not wait for the raw graph
  CHECK(tether::wait_reclaimed(5s));
  std::this_thread::sleep_for(50ms);
  CHECK(nccl::communicator_counts().alive == 0);
  CHECK(nccl::communicator_counts().closing == 1);  // NCCL's destroy waits for the raw graph
  CHECK_FALSE(nccl::wait_closed(100ms));
  REQUIRE(api.cuGraphDestroy(raw) == CUDA_SUCCESS);
  CHECK(nccl::wait_closed(30s));
  CHECK(nccl::communicator_counts().closing == 0);
}

TEST_CASE("collective arguments are checked before NCCL is called, naming what is wrong") {
  NcclFixture f;
  auto [ctx, c, s] = f.one_rank();
  SharedBuffer<float> four = filled<float>(ctx, 4, [](std::size_t) { return 1; });
  SharedBuffer<float> two = filled<float>(ctx, 2, [](std::size_t) { return 1; });
  const nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
  if (f.simulated) sim::reset_call_counts();
  CHECK_THROWS_WITH_AS(c.all_reduce(s, four, two),
                       "Communicator::all_reduce: the receive buffer holds 2 float32; the all_reduce of 4 float32 (sum) needs 4",
                       UsageError);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, two, four, nccl::ReduceOp::sum, 3),
                       "Communicator::all_reduce: the send buffer holds 2 float32; the all_reduce of 3 float32 (sum) needs 3",
                       UsageError);
  CHECK_THROWS_WITH_AS(c.broadcast(s, four, four, 1), "Communicator::broadcast: root 1 is not a rank of the communicator (1 ranks)",
                       UsageError);
  CHECK_THROWS_WITH_AS(c.send(s, four, -1), "Communicator::send: peer -1 is not a rank of the communicator (1 ranks)",
                       UsageError);
  CHECK_THROWS_WITH_AS(c.all_gather(s, four, two),
                       "Communicator::all_gather: the receive buffer holds 2 float32; the all_gather of 4 float32 per rank needs 4",
                       UsageError);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, SharedBuffer<float>{}, four), "Communicator::all_reduce: the send buffer is empty",
                       UsageError);
  CHECK_THROWS_WITH_AS(c.all_reduce(Stream{}, four, four), doctest::Contains("Communicator::all_reduce: this Stream is"),
                       UsageError);
  CHECK_THROWS_WITH_AS(nccl::Communicator{}.all_reduce(s, four, four),
                       doctest::Contains("Communicator::all_reduce: this Communicator is"), UsageError);
  CHECK_THROWS_WITH_AS(nccl::Communicator::create(ctx, nccl::UniqueId{}, 1, 0),
                       doctest::Contains("the UniqueId is empty"), UsageError);
  CHECK_THROWS_WITH_AS(nccl::Communicator::create(ctx, id, 2, 2),
                       "nccl::Communicator::create: rank 2 is not a rank of a 2-rank communicator (0 to 1)", UsageError);
  CHECK_THROWS_WITH_AS(nccl::Communicator::create(ctx, id, 0, 0),
                       "nccl::Communicator::create: a communicator has at least 1 rank, not 0", UsageError);
  nccl::CommunicatorOptions negative;
  negative.watchdog = -1ms;
  CHECK_THROWS_WITH_AS(nccl::Communicator::create(ctx, id, 1, 0, negative),
                       "nccl::Communicator::create: CommunicatorOptions::watchdog is negative (-1 ms)", UsageError);
  if (f.simulated) CHECK(sim::nccl_call_count("*") == 0);
  if (f.devices >= 2) {
    Context other = f.rt.context(1);
    SharedBuffer<float> there = filled<float>(other, 4, [](std::size_t) { return 1; });
    Stream elsewhere = other.make_stream();
    CHECK_THROWS_WITH_AS(c.all_reduce(s, there, four),
                         "Communicator::all_reduce: the send buffer is memory of device 1; the communicator's rank (rank 0 "
                         "of 1 (device 0)) reads and writes its buffers on device 0",
                         UsageError);
    CHECK_THROWS_WITH_AS(c.all_reduce(elsewhere, four, four),
                         "Communicator::all_reduce: the stream belongs to device 1, the communicator (rank 0 of 1 (device "
                         "0)) to device 0: issue it on a stream of device 0",
                         UsageError);
  }
}

TEST_CASE("an empty communicator, registered buffer and group say so, and a group ends once") {
  NcclFixture f;
  nccl::Communicator c;
  CHECK_FALSE(static_cast<bool>(c));
  CHECK(c.get() == nullptr);
  for (auto call : std::vector<std::function<void()>>{[&] { (void)c.rank(); }, [&] { (void)c.size(); },
                                                       [&] { (void)c.context(); }, [&] { (void)c.async_error(); },
                                                       [&] { c.abort(); }, [&] { (void)c.aborted(); }})
    CHECK_THROWS_WITH_AS(call(), doctest::Contains("this Communicator is moved from or empty"), UsageError);
  nccl::RegisteredBuffer<float> none;
  CHECK_FALSE(static_cast<bool>(none));
  CHECK(none.data() == nullptr);
  CHECK_FALSE(static_cast<bool>(none.communicator()));
  nccl::Group g;
  g.end();
  CHECK_THROWS_WITH_AS(g.end(), "nccl::Group::end: this group has ended already", UsageError);
  nccl::Group outer;
  nccl::Group inner;
  CHECK_THROWS_WITH_AS(outer.end(), doctest::Contains("a group opened inside this one is still open"), UsageError);
  inner.end();
  outer.end();
}

TEST_CASE("a collective inside a host callback is refused, and nothing reaches NCCL") {
  NcclFixture f;
  auto [ctx, c, s] = f.one_rank();
  Stream other = ctx.make_stream();
  SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
  std::string refused;
  s.host([&] {
    try {
      c.all_reduce(other, x, x);
    } catch (const UsageError& e) {
      refused = e.what();
    }
  });
  s.synchronize();
  CHECK(refused.find("Communicator::all_reduce") != std::string::npos);
  CHECK(refused.find("host callback") != std::string::npos);
}

TEST_CASE("an asynchronous error refuses later collectives and launches, naming it, and the communicator is aborted "
          "when dropped") {
  NcclFixture f;
  if (!f.simulated) {
    MESSAGE("skipped: an asynchronous error is injected by the simulator");
    return;
  }
  auto [ctx, c, s] = f.one_rank();
  SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
  SharedBuffer<float> y = filled<float>(ctx, 4, [](std::size_t) { return 0; });
  Graph g = tether::capture(s, CaptureMode::thread_local_, [&] { c.all_reduce(s, x, y); });
  GraphExec e = g.instantiate();
  e.launch(s);
  s.synchronize();
  sim::inject_nccl_async_error(c.get(), 6);
  CHECK(c.async_error() == nccl::Errc::remote_error);
  try {
    c.all_reduce(s, x, y);
    FAIL("not refused");
  } catch (const nccl::Error& err) {
    CHECK(err.entry_point() == "ncclCommGetAsyncError");
    CHECK(err.code() == nccl::Errc::remote_error);
    CHECK(std::string(err.what()).find("reported an asynchronous error") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(e.launch(s), doctest::Contains("reported an asynchronous error"), nccl::Error);
  e = GraphExec{};
  g = Graph{};
  c = nccl::Communicator{};
  CHECK(f.settle());
  CHECK(sim::nccl_stats().communicators == 0);
}

TEST_CASE("an aborted communicator refuses collectives and launches, quoting why, and closes once its graphs are gone") {
  NcclFixture f;
  auto [ctx, c, s] = f.one_rank();
  SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
  nccl::Group grp;
  c.send(s, x, 0);
  c.recv(s, x, 0);
  grp.end();
  s.synchronize();
  SharedBuffer<float> y = filled<float>(ctx, 4, [](std::size_t) { return 0; });
  Graph g = tether::capture(s, CaptureMode::thread_local_, [&] { c.all_reduce(s, x, y); });  // one rank out of place: a copy node
  GraphExec e = g.instantiate();
  c.abort("the test stops this job");
  c.abort("again");  // idempotent: the first reason stays
  CHECK(c.aborted());
  CHECK(c.abort_reason() == "the test stops this job");
  CHECK_THROWS_WITH_AS(c.all_reduce(s, x, x),
                       "Communicator::all_reduce: the communicator (rank 0 of 1 (device 0)) was aborted (the test stops this "
                       "job); it cannot be used any more: make a new one",
                       UsageError);
  CHECK_THROWS_WITH_AS(e.launch(s), doctest::Contains("was aborted (the test stops this job)"), UsageError);
  CHECK(c.async_error() == nccl::Errc::invalid_usage);
  e = GraphExec{};
  g = Graph{};
  c = nccl::Communicator{};
  CHECK(f.settle());
  CHECK(nccl::communicator_counts().closing == 0);
}

TEST_CASE("the watchdog aborts a communicator whose collective never completes, on a stream or in a launched "
          "executable, says what it did, and the stream then finishes") {
  NcclFixture f;
  if (!f.fits(2)) return;
  for (bool launched : {false, true}) {
    CAPTURE(launched);
    nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
    HookLog log;
    std::atomic<bool> rank0_done{false};
    f.on_ranks(2, [&](int r, Context& ctx) {
      nccl::CommunicatorOptions o;
      o.watchdog = 300ms;
      nccl::Communicator c = nccl::Communicator::create(ctx, id, 2, r, o);
      Stream s = ctx.make_stream();
      SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
      std::optional<GraphExec> e;
      if (launched) e = tether::capture(s, CaptureMode::thread_local_, [&] { c.all_reduce(s, x, x); }).instantiate();
      auto issue = [&] { launched ? e->launch(s) : (void)c.all_reduce(s, x, x); };
      if (r == 0) {
        issue();           // rank 1 never issues its half
        s.synchronize();  // returns once the watchdog aborted the communicator
        CHECK(c.aborted());
        const std::string why = c.abort_reason();
        CHECK_MESSAGE(why.find("the NCCL watchdog") != std::string::npos, why);
        CHECK_MESSAGE(why.find(launched ? "a launch of an executable holding 1 NCCL collective(s)"
                                        : "all_reduce of 4 float32 (sum) on rank 0 of 2 (device 0) queued on a stream "
                                          "did not finish within 300 ms") != std::string::npos,
                      why);
        CHECK_THROWS_WITH_AS(issue(), doctest::Contains("was aborted (the NCCL watchdog"), UsageError);
        rank0_done = true;
      } else {
        while (!rank0_done.load()) std::this_thread::sleep_for(1ms);
        c.abort("rank 0 gave up");  // its peer is gone: this rank goes too
      }
    });
    CHECK(log.all().find("the NCCL watchdog") != std::string::npos);
    CHECK(f.settle());
  }
}

TEST_CASE("with check_sequences, ranks whose executables hold different collectives are refused at the first launch, "
          "naming the first difference, and equal ones launch") {
  NcclFixture f;
  if (!f.fits(2)) return;
  for (bool same : {true, false}) {
    CAPTURE(same);
    nccl::UniqueId id = nccl::UniqueId::generate(f.rt);
    f.on_ranks(2, [&](int r, Context& ctx) {
      nccl::CommunicatorOptions o;
      o.check_sequences = true;
      nccl::Communicator c = nccl::Communicator::create(ctx, id, 2, r, o);
      Stream s = ctx.make_stream();
      SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
      Graph g = tether::capture(s, CaptureMode::thread_local_, [&] {
        c.all_reduce(s, x, x);
        if (same || r == 0)
          c.all_reduce(s, x, x, nccl::ReduceOp::max);
        else
          c.broadcast(s, x, x, 0);
      });
      GraphExec e = g.instantiate();
      if (same) {
        e.launch(s);
        e.launch(s);  // checked once
        s.synchronize();
        for (float v : read_all(x)) CHECK(v == 4.0f);
      } else {
        CHECK_THROWS_WITH_AS(e.launch(s),
                             doctest::Contains("rank 0 holds 2, rank 1 holds 2; the first difference is collective 2: rank 0 "
                                               "all_reduce of 4 float32 (max), rank 1 broadcast of 4 float32 from rank 0"),
                             UsageError);
      }
    });
    CHECK(f.settle());
  }
}

TEST_CASE("a registered buffer is deregistered only after its last consumer, whatever is dropped first") {
  NcclFixture f;
  Context ctx = f.rt.context(0);
  ctx.make_current();
  for (bool graph_last : {false, true}) {
    CAPTURE(graph_last);
    std::optional<nccl::Communicator> c = nccl::Communicator::create(ctx, nccl::UniqueId::generate(f.rt), 1, 0);
    Stream s = ctx.make_stream();
    SharedBuffer<float> raw = filled<float>(ctx, 1024, [](std::size_t i) { return static_cast<float>(i); });
    std::optional<nccl::RegisteredBuffer<float>> reg = c->register_buffer(raw);
    CHECK(fmt::format("{}", detail::owner_label(*reg)) ==
          "RegisteredBuffer<float>[1024] on Communicator rank 0 of 1 (device 0)");
    if (f.simulated) CHECK(sim::nccl_stats().registrations == 1);
    std::optional<Graph> g = tether::capture(s, CaptureMode::thread_local_, [&] { c->all_reduce(s, *reg, *reg); });
    std::optional<GraphExec> e = g->instantiate();
    if (graph_last) {
      reg.reset();
      c.reset();
      raw = SharedBuffer<float>{};
      tether::reclaim();
      CHECK(nccl::wait_closed(5s));
      if (f.simulated) CHECK(sim::nccl_stats().registrations == 1);
      e->launch(s);
      s.synchronize();
      e.reset();
      g.reset();
    } else {
      e.reset();
      g.reset();
      tether::reclaim();
      CHECK(nccl::wait_closed(5s));
      if (f.simulated) CHECK(sim::nccl_stats().registrations == 1);
      reg.reset();
      c.reset();
    }
    CHECK(f.settle());
    if (f.simulated) CHECK(sim::nccl_stats().registrations == 0);
    CHECK(nccl::communicator_counts().alive == 0);
  }
  SharedBuffer<float> here = filled<float>(ctx, 4, [](std::size_t) { return 0; });
  CHECK_THROWS_WITH_AS(nccl::Communicator{}.register_buffer(here), doctest::Contains("Communicator::register_buffer"), UsageError);
}

TEST_CASE("NCCL memory is a buffer like any other, freed with ncclMemFree only after its last consumer") {
  NcclFixture f;
  Context ctx = f.rt.context(0);
  ctx.make_current();
  const std::size_t before = f.simulated ? sim::nccl_stats().allocations : 0;
  std::optional<nccl::Communicator> c = nccl::Communicator::create(ctx, nccl::UniqueId::generate(f.rt), 1, 0);
  Stream s = ctx.make_stream();
  std::optional<SharedBuffer<float>> x = nccl::alloc<float>(ctx, 300).share();
  CHECK(x->size() == 300);
  x->copy_from(std::vector<float>(300, 2.0f));
  std::optional<nccl::RegisteredBuffer<float>> reg = c->register_buffer(*x);
  SharedBuffer<float> y = filled<float>(ctx, 300, [](std::size_t) { return 0; });
  GraphExec e = tether::capture(s, CaptureMode::thread_local_, [&] { c->all_reduce(s, *reg, y); }).instantiate();
  if (f.simulated) CHECK(sim::nccl_stats().allocations == before + 1);
  reg.reset();
  x.reset();
  c.reset();
  tether::reclaim();
  CHECK(nccl::wait_closed(5s));
  if (f.simulated) CHECK(sim::nccl_stats().allocations == before + 1);  // the executable still holds it
  e.launch(s);
  s.synchronize();
  for (float v : read_all(y)) CHECK(v == 2.0f);
  e = GraphExec{};
  CHECK(f.settle());
  if (f.simulated) CHECK(sim::nccl_stats().allocations == before);
  CHECK_THROWS_WITH_AS(nccl::alloc<float>(ctx, 0), "nccl::alloc: allocating 0 elements of float: a buffer cannot be empty",
                       UsageError);
}

TEST_CASE("an NCCL call that fails is thrown naming its entry point and NCCL's result, and keeps nothing it should not") {
  NcclFixture f;
  if (!f.simulated) {
    MESSAGE("skipped: faults are injected by the simulator");
    return;
  }
  Context ctx = f.rt.context(0);
  ctx.make_current();
  const auto before = sim::stats();
  {
    nccl::Communicator c = nccl::Communicator::create(ctx, nccl::UniqueId::generate(f.rt), 1, 0);
    Stream s = ctx.make_stream();
    SharedBuffer<float> x = filled<float>(ctx, 4, [](std::size_t) { return 1; });
    sim::fail_nccl_call("ncclAllReduce", 1, 4);
    try {
      c.all_reduce(s, x, x);
      FAIL("not thrown");
    } catch (const nccl::Error& e) {
      CHECK(e.entry_point() == "ncclAllReduce");
      CHECK(e.code() == nccl::Errc::invalid_argument);
      CHECK(std::string(e.what()).starts_with("ncclAllReduce failed with ncclInvalidArgument (4: invalid argument"));
      CHECK(std::string(e.what()).find("while all_reduce of 4 float32 (sum) on rank 0 of 1 (device 0)") != std::string::npos);
    }
    sim::fail_nccl_call("ncclCommInitRank", 1, 2);
    CHECK_THROWS_WITH_AS(nccl::Communicator::create(ctx, nccl::UniqueId::generate(f.rt), 1, 0),
                         doctest::Contains("ncclCommInitRank failed with ncclSystemError (2: unhandled system error"),
                         nccl::Error);
    sim::fail_nccl_call("ncclGroupEnd", 1, 5);
    nccl::Group g;
    c.send(s, x, 0);
    c.recv(s, x, 0);
    CHECK_THROWS_WITH_AS(g.end(), doctest::Contains("ncclGroupEnd failed with ncclInvalidUsage"), nccl::Error);
    s.synchronize();
  }
  CHECK(f.settle());
  const auto after = sim::stats();
  CHECK(after.device_allocations == before.device_allocations);
  CHECK(sim::nccl_stats().communicators == 0);
}

TEST_SUITE_END();
