// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The simulator's NCCL twin at the raw ABI (tether::detail::simulated_nccl_table) with raw calls of
// the simulated driver: ranks are threads, each with a simulated device of its own and a stream.
// Runs with TETHER_DRIVER=sim and TETHER_SIM_DEVICES=4 (tests/nccl/meson.build).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl/table.hpp"
#include "sim/nccl_sim.hpp"
#include "sim/sim.hpp"
#include "tether.hpp"

namespace tether::detail::nccl_abi {
// Why here: doctest finds it by argument-dependent lookup and prints "invalid_usage (5)".
inline doctest::String toString(Result r) {
  static constexpr const char* names[] = {"success",        "unhandled_cuda_error", "system_error",
                                          "internal_error", "invalid_argument",     "invalid_usage",
                                          "remote_error",   "in_progress"};
  const int i = static_cast<int>(r);
  return doctest::String(
      (std::string(i >= 0 && i < 8 ? names[i] : "?") + " (" + std::to_string(i) + ")").c_str());
}
}  // namespace tether::detail::nccl_abi

inline doctest::String toString(CUresult r) {
  return doctest::String(std::string(tether::result_name(static_cast<int>(r))).c_str());
}

namespace {

using tether::detail::Entry;
using tether::detail::raw;
namespace abi = tether::detail::nccl_abi;
using R = abi::Result;
using DT = abi::DataType;
using Op = abi::RedOp;
using Comm = ::ncclComm*;

const tether::detail::NcclTable& nccl() {
  return tether::detail::simulated_nccl_table();
}
const tether::detail::DriverTable& drv() {
  return tether::detail::table_of(tether::Runtime::simulated());
}

std::string last_error() {
  return nccl().ncclGetLastError(nullptr);
}
bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// ----------------------------------------------------------------------------------- devices

// The primary context of each simulated device, retained once for the whole run (as the driver
// fixture does for device 0).
CUcontext primary(int device) {
  static std::array<CUcontext, 64> ctx{};
  static std::mutex mu;
  std::lock_guard lock(mu);
  CUcontext& c = ctx[static_cast<std::size_t>(device)];
  if (!c) REQUIRE(raw<Entry::cuDevicePrimaryCtxRetain>(drv(), &c, device) == CUDA_SUCCESS);
  return c;
}

CUcontext current() {
  CUcontext c = nullptr;
  CHECK(raw<Entry::cuCtxGetCurrent>(drv(), &c) == CUDA_SUCCESS);
  return c;
}
void make_current(CUcontext c) {
  CHECK(raw<Entry::cuCtxSetCurrent>(drv(), c) == CUDA_SUCCESS);
}

// Makes `c` current for a scope, and what was current before afterwards.
struct Current {
  CUcontext saved;
  explicit Current(CUcontext c) : saved(current()) { make_current(c); }
  ~Current() { make_current(saved); }
  Current(const Current&) = delete;
  Current& operator=(const Current&) = delete;
};

CUstream new_stream(int device) {
  Current cur(primary(device));
  CUstream s = nullptr;
  REQUIRE(raw<Entry::cuStreamCreate>(drv(), &s, unsigned{CU_STREAM_NON_BLOCKING}) == CUDA_SUCCESS);
  return s;
}
void sync(CUstream s) {
  CHECK(raw<Entry::cuStreamSynchronize>(drv(), s) == CUDA_SUCCESS);
}
bool idle(CUstream s) {
  return raw<Entry::cuStreamQuery>(drv(), s) == CUDA_SUCCESS;
}

CUdeviceptr alloc(int device, std::size_t bytes) {
  Current cur(primary(device));
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(drv(), &d, bytes) == CUDA_SUCCESS);
  return d;
}
void free_mem(CUdeviceptr d) {
  Current cur(primary(0));
  CHECK(raw<Entry::cuMemFree>(drv(), d) == CUDA_SUCCESS);
}
void upload(CUdeviceptr d, const std::vector<std::byte>& v) {
  Current cur(primary(0));
  REQUIRE(raw<Entry::cuMemcpyHtoD>(drv(), d, static_cast<const void*>(v.data()), v.size()) == CUDA_SUCCESS);
}
std::vector<std::byte> download(CUdeviceptr d, std::size_t bytes) {
  Current cur(primary(0));
  std::vector<std::byte> v(bytes);
  REQUIRE(raw<Entry::cuMemcpyDtoH>(drv(), static_cast<void*>(v.data()), d, bytes) == CUDA_SUCCESS);
  return v;
}
void* ptr(CUdeviceptr d) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(d));
}

// Runs f(rank) on one thread per rank, each with its device's primary context current.
void parallel(int n, const std::function<void(int)>& f, bool with_context = true) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      if (with_context) make_current(primary(r));
      f(r);
    });
  for (std::thread& t : threads) t.join();
}

abi::UniqueId new_id() {
  abi::UniqueId id{};
  REQUIRE(nccl().ncclGetUniqueId(&id) == R::success);
  return id;
}

// n ranks on devices 0..n-1, made with ncclCommInitRank on n threads, each with a stream.
struct Cluster {
  int n;
  std::vector<CUstream> streams;
  std::vector<Comm> comms;

  explicit Cluster(int ranks) : n(ranks), comms(static_cast<std::size_t>(ranks), nullptr) {
    for (int r = 0; r < n; ++r) streams.push_back(new_stream(r));
    abi::UniqueId id = new_id();
    std::vector<R> results(static_cast<std::size_t>(n), R::internal_error);
    parallel(n, [&](int r) {
      results[static_cast<std::size_t>(r)] =
          nccl().ncclCommInitRank(&comms[static_cast<std::size_t>(r)], n, id, r);
    });
    for (R res : results) REQUIRE(res == R::success);
  }
  ~Cluster() {
    for (CUstream s : streams) sync(s);
    for (Comm& c : comms)
      if (c) CHECK(nccl().ncclCommDestroy(c) == R::success);
    for (CUstream s : streams) CHECK(raw<Entry::cuStreamDestroy>(drv(), s) == CUDA_SUCCESS);
  }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  Comm comm(int r) const { return comms[static_cast<std::size_t>(r)]; }
  CUstream stream(int r) const { return streams[static_cast<std::size_t>(r)]; }
  void sync_all() const {
    for (CUstream s : streams) sync(s);
  }
};

// ------------------------------------------------------------------------- values of every type

std::size_t size_of(DT t) {
  switch (t) {
    case DT::int8:
    case DT::uint8:
    case DT::float8e4m3:
    case DT::float8e5m2:
      return 1;
    case DT::float16:
    case DT::bfloat16:
      return 2;
    case DT::int32:
    case DT::uint32:
    case DT::float32:
      return 4;
    default:
      return 8;
  }
}
const char* name_of(DT t) {
  static const char* names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
                                "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return names[static_cast<int>(t)];
}

// The bits of an exactly representable value in a small float format (the test's own encoder:
// it only accepts values the format holds exactly, so it cannot share a rounding bug).
std::uint32_t exact_bits(double v, int ebits, int mbits) {
  if (v == 0) return 0;
  const std::uint32_t sign = v < 0 ? 1u << (ebits + mbits) : 0u;
  double a = std::fabs(v);
  int e = 0;
  while (a >= 2) a /= 2, ++e;
  while (a < 1) a *= 2, --e;
  const double m = (a - 1) * static_cast<double>(1u << mbits);
  REQUIRE(m == std::floor(m));
  const int bias = (1 << (ebits - 1)) - 1;
  REQUIRE(e + bias > 0);
  return sign | (static_cast<std::uint32_t>(e + bias) << mbits) | static_cast<std::uint32_t>(m);
}
double exact_value(std::uint32_t b, int ebits, int mbits) {
  const std::uint32_t emask = (1u << ebits) - 1;
  const std::uint32_t ef = (b >> mbits) & emask, m = b & ((1u << mbits) - 1);
  const bool neg = ((b >> (ebits + mbits)) & 1u) != 0;
  if (ef == 0 && m == 0) return neg ? -0.0 : 0.0;
  REQUIRE(ef != 0);  // the tests use normal values only
  const double v =
      std::ldexp(1.0 + m / static_cast<double>(1u << mbits), static_cast<int>(ef) - ((1 << (ebits - 1)) - 1));
  return neg ? -v : v;
}

template <class T>
void put(std::vector<std::byte>& out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

std::vector<std::byte> encode(DT t, const std::vector<double>& values) {
  std::vector<std::byte> out;
  for (double v : values) switch (t) {
      case DT::int8:
        put(out, static_cast<std::int8_t>(v));
        break;
      case DT::uint8:
        put(out, static_cast<std::uint8_t>(v));
        break;
      case DT::int32:
        put(out, static_cast<std::int32_t>(v));
        break;
      case DT::uint32:
        put(out, static_cast<std::uint32_t>(v));
        break;
      case DT::int64:
        put(out, static_cast<std::int64_t>(v));
        break;
      case DT::uint64:
        put(out, static_cast<std::uint64_t>(v));
        break;
      case DT::float32:
        put(out, static_cast<float>(v));
        break;
      case DT::float64:
        put(out, v);
        break;
      case DT::float16:
        put(out, static_cast<std::uint16_t>(exact_bits(v, 5, 10)));
        break;
      case DT::bfloat16:
        put(out, static_cast<std::uint16_t>(exact_bits(v, 8, 7)));
        break;
      case DT::float8e4m3:
        put(out, static_cast<std::uint8_t>(exact_bits(v, 4, 3)));
        break;
      case DT::float8e5m2:
        put(out, static_cast<std::uint8_t>(exact_bits(v, 5, 2)));
        break;
    }
  return out;
}

template <class T>
T get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
std::vector<double> decode(DT t, const std::vector<std::byte>& bytes) {
  std::vector<double> out;
  const std::size_t s = size_of(t);
  for (std::size_t i = 0; i + s <= bytes.size(); i += s) {
    const std::byte* p = bytes.data() + i;
    switch (t) {
      case DT::int8:
        out.push_back(get<std::int8_t>(p));
        break;
      case DT::uint8:
        out.push_back(get<std::uint8_t>(p));
        break;
      case DT::int32:
        out.push_back(get<std::int32_t>(p));
        break;
      case DT::uint32:
        out.push_back(get<std::uint32_t>(p));
        break;
      case DT::int64:
        out.push_back(static_cast<double>(get<std::int64_t>(p)));
        break;
      case DT::uint64:
        out.push_back(static_cast<double>(get<std::uint64_t>(p)));
        break;
      case DT::float32:
        out.push_back(get<float>(p));
        break;
      case DT::float64:
        out.push_back(get<double>(p));
        break;
      case DT::float16:
        out.push_back(exact_value(get<std::uint16_t>(p), 5, 10));
        break;
      case DT::bfloat16:
        out.push_back(exact_value(get<std::uint16_t>(p), 8, 7));
        break;
      case DT::float8e4m3:
        out.push_back(exact_value(get<std::uint8_t>(p), 4, 3));
        break;
      case DT::float8e5m2:
        out.push_back(exact_value(get<std::uint8_t>(p), 5, 2));
        break;
    }
  }
  return out;
}

bool integral(DT t) {
  return static_cast<int>(t) <= 5;
}

// What op makes of `in` (the ranks' values of one element, in rank order), as NCCL defines it:
// ncclAvg of integers truncates toward zero.
double combine(Op op, DT t, const std::vector<double>& in) {
  double acc = in[0];
  for (std::size_t j = 1; j < in.size(); ++j) switch (op) {
      case Op::sum:
      case Op::avg:
        acc += in[j];
        break;
      case Op::prod:
        acc *= in[j];
        break;
      case Op::max:
        acc = std::max(acc, in[j]);
        break;
      case Op::min:
        acc = std::min(acc, in[j]);
        break;
    }
  if (op == Op::avg)
    acc =
        integral(t) ? std::trunc(acc / static_cast<double>(in.size())) : acc / static_cast<double>(in.size());
  return acc;
}

// ------------------------------------------------------------------------------ one collective

enum class Coll { all_reduce, broadcast, reduce, all_gather, reduce_scatter };
const char* coll_name(Coll c) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter"};
  return names[static_cast<int>(c)];
}

// The input of element i of rank r: 1..4, distinct across the ranks of an element (for 4 ranks at
// most), and small enough that sums, products and averages are exact in every type of the matrix.
double input(int r, std::size_t i) {
  return 1.0 + static_cast<double>((static_cast<std::size_t>(r) + 2 * i) % 4);
}
constexpr double kSentinel = 100;  // what a receive buffer holds before the call (exact everywhere)

// Runs one collective on every rank of `c` and checks every rank's receive buffer exactly.
void check_collective(const Cluster& c, Coll coll, DT type, Op op, bool in_place) {
  CAPTURE(coll_name(coll));
  CAPTURE(name_of(type));
  CAPTURE(static_cast<int>(op));
  CAPTURE(in_place);
  CAPTURE(c.n);
  const int n = c.n;
  const auto un = static_cast<std::size_t>(n);
  constexpr std::size_t count = 7;
  const std::size_t es = size_of(type);
  const int root = coll == Coll::reduce ? n / 2 : n - 1;
  const std::size_t send_elems = coll == Coll::reduce_scatter ? count * un : count;
  const std::size_t recv_elems = coll == Coll::all_gather ? count * un : count;
  // In place, one buffer per rank holds both; its size is the larger one.
  const std::size_t buf_elems = std::max(send_elems, recv_elems);
  std::vector<CUdeviceptr> send(un), recv(un), base(un);
  std::vector<std::vector<double>> inputs(un);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    for (std::size_t i = 0; i < send_elems; ++i) inputs[ur].push_back(input(r, i));
    base[ur] = alloc(r, buf_elems * es);
    upload(base[ur], encode(type, std::vector<double>(buf_elems, kSentinel)));
    if (in_place) {
      // The in-place forms: AllGather's send buffer is the rank's slice of the receive buffer,
      // ReduceScatter's receive buffer the rank's slice of the send buffer; the others share one.
      send[ur] = coll == Coll::all_gather ? base[ur] + ur * count * es : base[ur];
      recv[ur] = coll == Coll::reduce_scatter ? base[ur] + ur * count * es : base[ur];
      upload(send[ur], encode(type, inputs[ur]));
    } else {
      recv[ur] = base[ur];
      send[ur] = alloc(r, send_elems * es);
      upload(send[ur], encode(type, inputs[ur]));
    }
  }
  std::vector<R> results(un, R::internal_error);
  parallel(n, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    const void* s = ptr(send[ur]);
    void* d = ptr(recv[ur]);
    R& res = results[ur];
    switch (coll) {
      case Coll::all_reduce:
        res = nccl().ncclAllReduce(s, d, count, type, op, c.comm(r), c.stream(r));
        break;
      case Coll::broadcast:
        res = nccl().ncclBroadcast(s, d, count, type, root, c.comm(r), c.stream(r));
        break;
      case Coll::reduce:
        res = nccl().ncclReduce(s, d, count, type, op, root, c.comm(r), c.stream(r));
        break;
      case Coll::all_gather:
        res = nccl().ncclAllGather(s, d, count, type, c.comm(r), c.stream(r));
        break;
      case Coll::reduce_scatter:
        res = nccl().ncclReduceScatter(s, d, count, type, op, c.comm(r), c.stream(r));
        break;
    }
  });
  for (R res : results) CHECK(res == R::success);
  c.sync_all();
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    std::vector<double> expected;
    switch (coll) {
      case Coll::all_reduce:
      case Coll::reduce:
        for (std::size_t k = 0; k < count; ++k) {
          std::vector<double> in;
          for (std::size_t j = 0; j < un; ++j) in.push_back(inputs[j][k]);
          // A non-root rank's receive buffer is untouched by ncclReduce (in place it holds its input).
          if (coll == Coll::reduce && r != root)
            expected.push_back(in_place ? inputs[ur][k] : kSentinel);
          else
            expected.push_back(combine(op, type, in));
        }
        break;
      case Coll::broadcast:
        expected = inputs[static_cast<std::size_t>(root)];
        break;
      case Coll::all_gather:
        for (std::size_t j = 0; j < un; ++j)
          expected.insert(expected.end(), inputs[j].begin(), inputs[j].end());
        break;
      case Coll::reduce_scatter:
        for (std::size_t k = 0; k < count; ++k) {
          std::vector<double> in;
          for (std::size_t j = 0; j < un; ++j) in.push_back(inputs[j][ur * count + k]);
          expected.push_back(combine(op, type, in));
        }
        break;
    }
    CAPTURE(r);
    CHECK(decode(type, download(recv[ur], recv_elems * es)) == expected);
  }
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    free_mem(base[ur]);
    if (!in_place) free_mem(send[ur]);
  }
}

// ------------------------------------------------------------------------------------ graphs

std::vector<CUgraphNode> nodes_of(CUgraph g) {
  std::size_t n = 0;
  CHECK(raw<Entry::cuGraphGetNodes>(drv(), g, static_cast<CUgraphNode*>(nullptr), &n) == CUDA_SUCCESS);
  std::vector<CUgraphNode> v(n);
  if (n) CHECK(raw<Entry::cuGraphGetNodes>(drv(), g, v.data(), &n) == CUDA_SUCCESS);
  return v;
}
CUgraphNodeType type_of(CUgraphNode node) {
  CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
  CHECK(raw<Entry::cuGraphNodeGetType>(drv(), node, &t) == CUDA_SUCCESS);
  return t;
}
std::vector<CUgraphNode> deps_of(CUgraphNode node) {
  std::size_t n = 0;
  CHECK(raw<Entry::cuGraphNodeGetDependencies>(drv(), node, static_cast<CUgraphNode*>(nullptr),
                                               static_cast<CUgraphEdgeData*>(nullptr), &n) == CUDA_SUCCESS);
  std::vector<CUgraphNode> v(n);
  if (n)
    CHECK(raw<Entry::cuGraphNodeGetDependencies>(drv(), node, v.data(),
                                                 static_cast<CUgraphEdgeData*>(nullptr), &n) == CUDA_SUCCESS);
  return v;
}
CUgraphNode only(const std::vector<CUgraphNode>& nodes, CUgraphNodeType type) {
  CUgraphNode found = nullptr;
  int matches = 0;
  for (CUgraphNode n : nodes)
    if (type_of(n) == type) found = n, ++matches;
  CHECK(matches == 1);
  return found;
}
void begin_capture(CUstream s) {
  REQUIRE(raw<Entry::cuStreamBeginCapture>(drv(), s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
}
CUgraph end_capture(CUstream s) {
  CUgraph g = nullptr;
  REQUIRE(raw<Entry::cuStreamEndCapture>(drv(), s, &g) == CUDA_SUCCESS);
  return g;
}
CUgraphExec instantiate(CUgraph g) {
  CUgraphExec e = nullptr;
  REQUIRE(raw<Entry::cuGraphInstantiateWithFlags>(drv(), &e, g, 0ull) == CUDA_SUCCESS);
  return e;
}
void destroy_graph(CUgraph g) {
  CHECK(raw<Entry::cuGraphDestroy>(drv(), g) == CUDA_SUCCESS);
}
void destroy_exec(CUgraphExec e) {
  CHECK(raw<Entry::cuGraphExecDestroy>(drv(), e) == CUDA_SUCCESS);
}

// Polls (at most 5 s) until `done` holds; whether it did.
bool eventually(const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

std::vector<float> floats(CUdeviceptr d, std::size_t n) {
  std::vector<std::byte> b = download(d, n * sizeof(float));
  std::vector<float> v(n);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}
void put_floats(CUdeviceptr d, const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  upload(d, b);
}

void require_devices() {
  REQUIRE_MESSAGE(tether::Runtime::simulated().device_count() >= 4,
                  "these tests need TETHER_SIM_DEVICES=4 (tests/nccl/meson.build sets it)");
}

}  // namespace

TEST_SUITE_BEGIN("simulated NCCL");

TEST_CASE(
    "the twin's table says it is NCCL 2.28.9 in the simulator, provides every entry and answers NCCL's fixed "
    "strings") {
  const auto& t = nccl();
  CHECK(t.simulated);
  CHECK(t.origin == "tether simulator");
  CHECK(t.version == 22809);
  for (bool p : t.provided) CHECK(p);
  int v = 0;
  CHECK(t.ncclGetVersion(&v) == R::success);
  CHECK(v == 22809);
  CHECK(t.ncclGetVersion(nullptr) == R::invalid_argument);
  CHECK(std::string(t.ncclGetErrorString(R::success)) == "no error");
  CHECK(std::string(t.ncclGetErrorString(R::invalid_argument)) ==
        "invalid argument (run with NCCL_DEBUG=WARN for details)");
  CHECK(std::string(t.ncclGetErrorString(R::invalid_usage)) ==
        "invalid usage (run with NCCL_DEBUG=WARN for details)");
  CHECK(std::string(t.ncclGetErrorString(R::system_error)) ==
        "unhandled system error (run with NCCL_DEBUG=INFO for details)");
  CHECK(std::string(t.ncclGetErrorString(R::remote_error)) ==
        "remote process exited or there was a network error");
  CHECK(std::string(t.ncclGetErrorString(static_cast<R>(8))) == "unknown result code");
}

TEST_CASE(
    "ncclGetUniqueId makes distinct 128-byte ids without a context, and ncclCommInitRank refuses ids it did "
    "not make") {
  require_devices();
  std::thread([] {
    // A thread with no context current, as on real NCCL (no CUDA call).
    abi::UniqueId a{}, b{};
    CHECK(nccl().ncclGetUniqueId(&a) == R::success);
    CHECK(nccl().ncclGetUniqueId(&b) == R::success);
    CHECK(std::memcmp(a.internal, b.internal, sizeof a.internal) != 0);
    CHECK(std::memcmp(a.internal, b.internal, 8) == 0);  // the same magic prefix
    CHECK(current() == nullptr);
  }).join();
  CHECK(nccl().ncclGetUniqueId(nullptr) == R::invalid_argument);
  abi::UniqueId forged{};
  std::memset(forged.internal, 7, sizeof forged.internal);
  Comm c = nullptr;
  CHECK(nccl().ncclCommInitRank(&c, 1, forged, 0) == R::invalid_argument);
  CHECK(contains(last_error(), "not made by ncclGetUniqueId"));
  abi::UniqueId id = new_id();
  CHECK(nccl().ncclCommInitRank(&c, 0, id, 0) == R::invalid_argument);
  CHECK(contains(last_error(), "Invalid rank requested : 0/0"));
  CHECK(nccl().ncclCommInitRank(&c, 2, id, 2) == R::invalid_argument);
  CHECK(nccl().ncclCommInitRank(&c, 2, id, -1) == R::invalid_argument);
  CHECK(nccl().ncclCommInitRank(nullptr, 1, id, 0) == R::invalid_argument);
  // The failed calls left the id usable: a one-rank communicator forms at once.
  {
    Current cur(primary(0));
    REQUIRE(nccl().ncclCommInitRank(&c, 1, id, 0) == R::success);
  }
  // A spent id cannot make a second communicator (NCCL's bootstrap root is gone).
  Comm again = nullptr;
  CHECK(nccl().ncclCommInitRank(&again, 1, id, 0) == R::invalid_usage);
  CHECK(nccl().ncclCommDestroy(c) == R::success);
}

TEST_CASE(
    "ncclCommInitRank blocks until every rank joined, takes the thread's device and leaves its primary "
    "context current") {
  require_devices();
  abi::UniqueId id = new_id();
  std::atomic<bool> returned{false};
  Comm c0 = nullptr, c1 = nullptr;
  R r0 = R::internal_error, r1 = R::internal_error;
  CUcontext after0 = nullptr;
  std::thread first([&] {
    // No context current: NCCL's cudaGetDevice reports device 0.
    r0 = nccl().ncclCommInitRank(&c0, 2, id, 0);
    after0 = current();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(returned.load());
  CHECK(tether::sim::nccl_stats().cliques >= 1);
  std::thread second([&] {
    make_current(primary(2));
    r1 = nccl().ncclCommInitRank(&c1, 2, id, 1);
  });
  first.join();
  second.join();
  REQUIRE(r0 == R::success);
  REQUIRE(r1 == R::success);
  CHECK(after0 == primary(0));
  int v = -1;
  CHECK(nccl().ncclCommCount(c0, &v) == R::success);
  CHECK(v == 2);
  CHECK(nccl().ncclCommUserRank(c1, &v) == R::success);
  CHECK(v == 1);
  CHECK(nccl().ncclCommCuDevice(c0, &v) == R::success);
  CHECK(v == 0);
  CHECK(nccl().ncclCommCuDevice(c1, &v) == R::success);
  CHECK(v == 2);
  CHECK(nccl().ncclCommCount(c0, nullptr) == R::invalid_argument);
  R async = R::internal_error;
  CHECK(nccl().ncclCommGetAsyncError(c0, &async) == R::success);
  CHECK(async == R::success);
  CHECK(nccl().ncclCommDestroy(c0) == R::success);
  CHECK(nccl().ncclCommDestroy(c1) == R::success);
}

TEST_CASE(
    "a rank that joins twice is refused with invalid_usage, and two ranks on one device fail with Duplicate "
    "GPU detected") {
  require_devices();
  {
    abi::UniqueId id = new_id();
    Comm c0 = nullptr, c1 = nullptr, dup = nullptr;
    R r0 = R::internal_error;
    const std::size_t live = tether::sim::nccl_stats().communicators;
    std::thread first([&] {
      make_current(primary(0));
      r0 = nccl().ncclCommInitRank(&c0, 2, id, 0);
    });
    // Wait until rank 0 has joined (it is then waiting for rank 1).
    REQUIRE(eventually([&] { return tether::sim::nccl_stats().communicators > live; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      Current cur(primary(3));
      CHECK(nccl().ncclCommInitRank(&dup, 2, id, 0) == R::invalid_usage);
      CHECK(contains(last_error(), "rank 0 of this ncclUniqueId has already joined"));
      CHECK(nccl().ncclCommInitRank(&dup, 3, id, 1) == R::invalid_argument);  // another rank count
      REQUIRE(nccl().ncclCommInitRank(&c1, 2, id, 1) == R::success);
    }
    first.join();
    REQUIRE(r0 == R::success);
    CHECK(nccl().ncclCommDestroy(c0) == R::success);
    CHECK(nccl().ncclCommDestroy(c1) == R::success);
  }
  {
    const auto before = tether::sim::nccl_stats();
    abi::UniqueId id = new_id();
    std::vector<Comm> comms(2, nullptr);
    std::vector<R> results(2, R::internal_error);
    parallel(2, [&](int r) {
      make_current(primary(1));  // both ranks on device 1
      results[static_cast<std::size_t>(r)] =
          nccl().ncclCommInitRank(&comms[static_cast<std::size_t>(r)], 2, id, r);
    });
    CHECK(results[0] == R::invalid_usage);
    CHECK(results[1] == R::invalid_usage);
    CHECK(comms[0] == nullptr);
    CHECK(comms[1] == nullptr);
    CHECK(contains(last_error(), "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1"));
    const auto after = tether::sim::nccl_stats();
    CHECK(after.communicators == before.communicators);
    CHECK(after.cliques == before.cliques);
  }
}

TEST_CASE(
    "ncclCommInitAll makes a clique without a current context, refuses bad and duplicate devices, and leaves "
    "device 0 current") {
  require_devices();
  std::thread([] {
    std::vector<Comm> comms(3, nullptr);
    const int devs[] = {3, 1, 2};
    REQUIRE(nccl().ncclCommInitAll(comms.data(), 3, devs) == R::success);
    CHECK(current() == primary(0));
    int d = -1;
    CHECK(nccl().ncclCommCuDevice(comms[0], &d) == R::success);
    CHECK(d == 3);
    CHECK(nccl().ncclCommCuDevice(comms[2], &d) == R::success);
    CHECK(d == 2);
    CHECK(tether::sim::nccl_stats().communicators >= 3);
    for (Comm c : comms) CHECK(nccl().ncclCommDestroy(c) == R::success);
    const int bad[] = {0, 9};
    CHECK(nccl().ncclCommInitAll(comms.data(), 2, bad) == R::invalid_argument);
    CHECK(contains(last_error(), "Invalid device 9"));
    const int twice[] = {1, 1};
    CHECK(nccl().ncclCommInitAll(comms.data(), 2, twice) == R::invalid_usage);
    CHECK(nccl().ncclCommInitAll(nullptr, 2, nullptr) == R::invalid_argument);
    CHECK(nccl().ncclCommInitAll(comms.data(), -1, nullptr) == R::invalid_argument);
    make_current(primary(2));
    std::vector<Comm> all(4, nullptr);
    REQUIRE(nccl().ncclCommInitAll(all.data(), 4, nullptr) == R::success);
    CHECK(current() == primary(2));  // NCCL sets the saved device again
    for (int r = 0; r < 4; ++r) {
      CHECK(nccl().ncclCommCuDevice(all[static_cast<std::size_t>(r)], &d) == R::success);
      CHECK(d == r);
    }
    for (Comm c : all) CHECK(nccl().ncclCommDestroy(c) == R::success);
  }).join();
  CHECK(tether::sim::nccl_stats().communicators == 0);
  CHECK(tether::sim::nccl_stats().cliques == 0);
}

TEST_CASE(
    "ncclCommInitAll of more devices than exist without a devlist fails and leaves the thread's group depth "
    "incremented, as NCCL does") {
  require_devices();
  std::thread([] {
    std::vector<Comm> comms(9, nullptr);
    CHECK(nccl().ncclCommInitAll(comms.data(), 9, nullptr) == R::unhandled_cuda_error);
    CHECK(contains(last_error(), "cudaSetDevice(4)"));
    // The leaked depth: one ncclGroupEnd succeeds, the next is "not in a group call".
    CHECK(nccl().ncclGroupEnd() == R::success);
    CHECK(nccl().ncclGroupEnd() == R::invalid_usage);
    CHECK(contains(last_error(), "not in a group call"));
  }).join();
}

TEST_CASE(
    "every collective computes NCCL's result exactly, out of place and in place, for several types on 1, 2 "
    "and 4 ranks") {
  require_devices();
  const DT types[] = {DT::int32, DT::float32, DT::float16, DT::bfloat16, DT::uint8, DT::float64};
  for (int n : {1, 2, 4}) {
    Cluster c(n);
    for (DT type : types)
      for (bool in_place : {false, true}) {
        for (Op op : {Op::sum, Op::prod, Op::max, Op::min, Op::avg})
          check_collective(c, Coll::all_reduce, type, op, in_place);
        check_collective(c, Coll::broadcast, type, Op::sum, in_place);
        check_collective(c, Coll::reduce, type, Op::max, in_place);
        check_collective(c, Coll::reduce, type, Op::sum, in_place);
        check_collective(c, Coll::all_gather, type, Op::sum, in_place);
        check_collective(c, Coll::reduce_scatter, type, Op::sum, in_place);
        check_collective(c, Coll::reduce_scatter, type, Op::min, in_place);
      }
  }
  CHECK(tether::sim::violations().empty());
}

TEST_CASE(
    "the remaining types reduce with NCCL's arithmetic: integers wrap, ncclAvg of integers truncates toward "
    "zero") {
  require_devices();
  Cluster c(4);
  for (DT type : {DT::int8, DT::int64, DT::uint32, DT::uint64})
    check_collective(c, Coll::all_reduce, type, Op::sum, false);
  check_collective(c, Coll::all_reduce, DT::int64, Op::avg, true);
  // Chosen values: int8 100 * 4 = 400 wraps to -112; uint8 4^4 = 256 wraps to 0; int32 avg of
  // -1, -2, -3, -4 is -10 / 4 = -2 (truncated, not -3); float8e4m3 and float8e5m2 sums of exact values.
  struct Case {
    DT type;
    Op op;
    std::vector<double> in;  // one value per rank
    double out;
  };
  const Case cases[] = {
      {DT::int8, Op::sum, {100, 100, 100, 100}, -112}, {DT::uint8, Op::prod, {4, 4, 4, 4}, 0},
      {DT::int32, Op::avg, {-1, -2, -3, -4}, -2},      {DT::uint32, Op::avg, {1, 2, 3, 5}, 2},
      {DT::float8e4m3, Op::sum, {1, 2, 4, 8}, 15},     {DT::float8e4m3, Op::max, {1, 0.5, 3, 2}, 3},
      {DT::float8e5m2, Op::sum, {1, 1, 2, 4}, 8},      {DT::float8e5m2, Op::min, {1, 0.5, 3, 2}, 0.5},
      {DT::float8e4m3, Op::avg, {1, 2, 3, 2}, 2},      {DT::bfloat16, Op::avg, {1, 2, 3, 6}, 3}};
  for (const Case& k : cases) {
    CAPTURE(name_of(k.type));
    CAPTURE(static_cast<int>(k.op));
    std::vector<CUdeviceptr> buf(4);
    for (int r = 0; r < 4; ++r) {
      buf[static_cast<std::size_t>(r)] = alloc(r, 8);
      upload(buf[static_cast<std::size_t>(r)], encode(k.type, {k.in[static_cast<std::size_t>(r)]}));
    }
    parallel(4, [&](int r) {
      void* b = ptr(buf[static_cast<std::size_t>(r)]);
      CHECK(nccl().ncclAllReduce(b, b, 1, k.type, k.op, c.comm(r), c.stream(r)) == R::success);
    });
    c.sync_all();
    for (int r = 0; r < 4; ++r) {
      CHECK(decode(k.type, download(buf[static_cast<std::size_t>(r)], size_of(k.type))) ==
            std::vector<double>{k.out});
      free_mem(buf[static_cast<std::size_t>(r)]);
    }
  }
}

TEST_CASE(
    "floating sums round to nearest even in the type after every step, overflow to infinity in half and "
    "saturate in fp8") {
  require_devices();
  struct Case {
    DT type;
    std::vector<std::uint16_t> in;  // one value's bits per rank
    std::uint16_t out;              // the expected bits
    const char* why;
  };
  const Case cases[] = {
      {DT::float16,
       {0x6800, 0x3C00},
       0x6800,
       "2048 + 1 = 2049 is a tie between 2048 and 2050: even mantissa 2048"},
      {DT::float16,
       {0x6800, 0x4200},
       0x6802,
       "2048 + 3 = 2051 is a tie between 2050 and 2052: even mantissa 2052"},
      {DT::float16, {0x7B53, 0x7B53}, 0x7C00, "60000 + 60000 overflows half to +infinity"},
      {DT::bfloat16, {0x4380, 0x3F80}, 0x4380, "256 + 1 rounds to 256 in bfloat16"},
      {DT::bfloat16, {0x4380, 0x4040}, 0x4382, "256 + 3 = 259 ties to 260"},
      {DT::float8e4m3, {0x78, 0x78}, 0x7E, "256 + 256 saturates to float8e4m3's largest finite value, 448"},
      {DT::float8e5m2,
       {0x78, 0x78},
       0x7B,
       "32768 + 32768 saturates to float8e5m2's largest finite value, 57344"},
      // Four ranks: every partial sum is rounded, so 2048 + 1 + 1 + 0 stays 2048 (the exact 2050
      // is representable: rounding only the total would give it).
      {DT::float16, {0x6800, 0x3C00, 0x3C00, 0x0000}, 0x6800, "2048 + 1 + 1 + 0, rounded after every step"},
      {DT::bfloat16, {0x4380, 0x3F80, 0x3F80, 0x0000}, 0x4380, "256 + 1 + 1 + 0, rounded after every step"},
      {DT::float8e4m3,
       {0x58, 0x38, 0x38, 0x38},
       0x58,
       "16 + 1 + 1 + 1 in float8e4m3 (16 + 1 ties to 16 each step)"},
  };
  for (int n : {2, 4}) {
    Cluster c(n);
    for (const Case& k : cases) {
      if (static_cast<int>(k.in.size()) != n) continue;
      CAPTURE(k.why);
      const std::size_t es = size_of(k.type);
      const auto un = static_cast<std::size_t>(n);
      std::vector<CUdeviceptr> send(un), recv(un);
      for (int r = 0; r < n; ++r) {
        send[static_cast<std::size_t>(r)] = alloc(r, 8);
        recv[static_cast<std::size_t>(r)] = alloc(r, 8);
        std::vector<std::byte> bytes(es);
        std::memcpy(bytes.data(), &k.in[static_cast<std::size_t>(r)], es);
        upload(send[static_cast<std::size_t>(r)], bytes);
      }
      parallel(n, [&](int r) {
        CHECK(nccl().ncclAllReduce(ptr(send[static_cast<std::size_t>(r)]),
                                   ptr(recv[static_cast<std::size_t>(r)]), 1, k.type, Op::sum, c.comm(r),
                                   c.stream(r)) == R::success);
      });
      c.sync_all();
      for (int r = 0; r < n; ++r) {
        std::vector<std::byte> got = download(recv[static_cast<std::size_t>(r)], es);
        std::uint16_t bits = 0;
        std::memcpy(&bits, got.data(), es);
        CHECK(bits == k.out);
        free_mem(send[static_cast<std::size_t>(r)]);
        free_mem(recv[static_cast<std::size_t>(r)]);
      }
    }
  }
}

TEST_CASE(
    "a send/recv ring in one group completes on 1, 2 and 4 ranks, and nested groups launch at the outermost "
    "end") {
  require_devices();
  for (int n : {1, 2, 4}) {
    CAPTURE(n);
    Cluster c(n);
    constexpr std::size_t count = 5;
    std::vector<CUdeviceptr> send(static_cast<std::size_t>(n)), recv(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      send[static_cast<std::size_t>(r)] = alloc(r, count * 4);
      recv[static_cast<std::size_t>(r)] = alloc(r, count * 4);
      put_floats(send[static_cast<std::size_t>(r)],
                 std::vector<float>(count, static_cast<float>(10 * r + 1)));
      put_floats(recv[static_cast<std::size_t>(r)], std::vector<float>(count, -1.0f));
    }
    std::vector<char> idle_inside(static_cast<std::size_t>(n), 0);
    parallel(n, [&](int r) {
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      CHECK(nccl().ncclGroupStart() == R::success);
      CHECK(nccl().ncclGroupStart() == R::success);
      CHECK(nccl().ncclSend(ptr(send[static_cast<std::size_t>(r)]), count, DT::float32, next, c.comm(r),
                            c.stream(r)) == R::success);
      CHECK(nccl().ncclGroupEnd() == R::success);  // inner end: nothing launched yet
      idle_inside[static_cast<std::size_t>(r)] = idle(c.stream(r));
      CHECK(nccl().ncclRecv(ptr(recv[static_cast<std::size_t>(r)]), count, DT::float32, prev, c.comm(r),
                            c.stream(r)) == R::success);
      CHECK(nccl().ncclGroupEnd() == R::success);
    });
    c.sync_all();
    for (int r = 0; r < n; ++r) {
      CHECK(idle_inside[static_cast<std::size_t>(r)] != 0);
      const int prev = (r + n - 1) % n;
      CHECK(floats(recv[static_cast<std::size_t>(r)], count) ==
            std::vector<float>(count, static_cast<float>(10 * prev + 1)));
      free_mem(send[static_cast<std::size_t>(r)]);
      free_mem(recv[static_cast<std::size_t>(r)]);
    }
  }
}

TEST_CASE(
    "one thread drives four communicators of ncclCommInitAll in one group, each launch on its device's "
    "stream") {
  require_devices();
  std::vector<Comm> comms(4, nullptr);
  REQUIRE(nccl().ncclCommInitAll(comms.data(), 4, nullptr) == R::success);
  std::vector<CUstream> streams;
  std::vector<CUdeviceptr> buf;
  for (int r = 0; r < 4; ++r) {
    streams.push_back(new_stream(r));
    buf.push_back(alloc(r, 16));
    put_floats(buf.back(), std::vector<float>(4, static_cast<float>(r + 1)));
  }
  make_current(primary(1));
  REQUIRE(nccl().ncclGroupStart() == R::success);
  for (int r = 0; r < 4; ++r)
    CHECK(nccl().ncclAllReduce(ptr(buf[static_cast<std::size_t>(r)]), ptr(buf[static_cast<std::size_t>(r)]),
                               4, DT::float32, Op::sum, comms[static_cast<std::size_t>(r)],
                               streams[static_cast<std::size_t>(r)]) == R::success);
  REQUIRE(nccl().ncclGroupEnd() == R::success);
  CHECK(current() == primary(1));  // the group set the saved device again
  for (int r = 0; r < 4; ++r) {
    sync(streams[static_cast<std::size_t>(r)]);
    CHECK(floats(buf[static_cast<std::size_t>(r)], 4) == std::vector<float>(4, 10.0f));
    free_mem(buf[static_cast<std::size_t>(r)]);
    CHECK(raw<Entry::cuStreamDestroy>(drv(), streams[static_cast<std::size_t>(r)]) == CUDA_SUCCESS);
  }
  for (Comm c : comms) CHECK(nccl().ncclCommDestroy(c) == R::success);
  make_current(nullptr);
}

TEST_CASE(
    "ungrouped sends in both directions deadlock as on real NCCL, and ncclCommAbort of both ranks ends the "
    "wait") {
  require_devices();
  Cluster c(2);
  std::vector<CUdeviceptr> buf = {alloc(0, 64), alloc(1, 64)};
  parallel(2, [&](int r) {
    CHECK(nccl().ncclSend(ptr(buf[static_cast<std::size_t>(r)]), 4, DT::int32, 1 - r, c.comm(r),
                          c.stream(r)) == R::success);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(idle(c.stream(0)));
  CHECK_FALSE(idle(c.stream(1)));
  CHECK(tether::sim::nccl_stats().launches_in_flight == 2);
  CHECK(nccl().ncclCommAbort(c.comm(0)) == R::success);  // not the last: returns at once
  sync(c.stream(0));
  CHECK_FALSE(idle(c.stream(1)));  // rank 1 still waits: its own communicator was not aborted
  CHECK(nccl().ncclCommAbort(c.comm(1)) == R::success);
  sync(c.stream(1));
  CHECK(tether::sim::nccl_stats().launches_in_flight == 0);
  // An aborted communicator is destroyed: calls on it are refused, without a crash.
  int v = 0;
  CHECK(nccl().ncclCommUserRank(c.comm(1), &v) == R::invalid_argument);
  c.comms = {nullptr, nullptr};
  free_mem(buf[0]);
  free_mem(buf[1]);
}

TEST_CASE(
    "ncclCommAbort wakes a rank stuck in a collective whose peer never came, and the peer's destroy then "
    "frees the clique") {
  require_devices();
  const auto before = tether::sim::nccl_stats();
  std::vector<Comm> comms(2, nullptr);
  {
    Cluster c(2);
    comms = c.comms;
    CUdeviceptr b = alloc(0, 64);
    {
      Current cur(primary(0));
      CHECK(nccl().ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, c.comm(0), c.stream(0)) ==
            R::success);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_FALSE(idle(c.stream(0)));
    std::atomic<bool> aborted{false};
    std::thread t([&] {
      CHECK(nccl().ncclCommAbort(c.comm(0)) == R::success);
      aborted = true;
    });
    t.join();
    CHECK(aborted.load());
    sync(c.stream(0));
    CHECK(tether::sim::nccl_stats().communicators ==
          before.communicators + 2);  // rank 1 lives, rank 0 waits for it
    c.comms[0] = nullptr;
    free_mem(b);
  }  // rank 1's destroy is the last: both go
  CHECK(tether::sim::nccl_stats().communicators == before.communicators);
  int v = 0;
  CHECK(nccl().ncclCommCount(comms[0], &v) == R::invalid_argument);
  CHECK(contains(last_error(), "has already been destroyed"));
  CHECK(nccl().ncclCommDestroy(comms[1]) == R::invalid_argument);
  // The failed destroy left the group depth incremented (NCCL's early return): balance it.
  CHECK(nccl().ncclGroupEnd() == R::success);
  CHECK(nccl().ncclCommAbort(comms[0]) == R::invalid_argument);
  CHECK(nccl().ncclAllReduce(nullptr, nullptr, 0, DT::float32, Op::sum, comms[0], nullptr) ==
        R::invalid_argument);
}

TEST_CASE(
    "a one-rank collective is a copy out of place, nothing in place, and ncclAvg of a float the "
    "oneRankReduce kernel") {
  require_devices();
  Cluster c(1);
  CUstream s = c.stream(0);
  CUdeviceptr a = alloc(0, 64), b = alloc(0, 64);
  put_floats(a, {1, 2, 3, 4});
  put_floats(b, {0, 0, 0, 0});
  make_current(primary(0));
  auto capture = [&](const std::function<void()>& call) {
    begin_capture(s);
    call();
    return end_capture(s);
  };
  {
    CUgraph g = capture([&] {
      CHECK(nccl().ncclAllReduce(ptr(a), ptr(b), 4, DT::float32, Op::sum, c.comm(0), s) == R::success);
    });
    std::vector<CUgraphNode> nodes = nodes_of(g);
    REQUIRE(nodes.size() == 1);
    CHECK(type_of(nodes[0]) == CU_GRAPH_NODE_TYPE_MEMCPY);
    CUgraphExec e = instantiate(g);
    CHECK(raw<Entry::cuGraphLaunch>(drv(), e, s) == CUDA_SUCCESS);
    sync(s);
    CHECK(floats(b, 4) == std::vector<float>{1, 2, 3, 4});
    destroy_exec(e);
    destroy_graph(g);
  }
  {
    CUgraph g = capture([&] {
      CHECK(nccl().ncclAllReduce(ptr(a), ptr(a), 4, DT::float32, Op::max, c.comm(0), s) == R::success);
    });
    CHECK(nodes_of(g).empty());
    destroy_graph(g);
  }
  {
    CUgraph g = capture([&] {
      CHECK(nccl().ncclReduceScatter(ptr(a), ptr(a), 4, DT::float32, Op::avg, c.comm(0), s) == R::success);
    });
    std::vector<CUgraphNode> nodes = nodes_of(g);
    REQUIRE(nodes.size() == 1);
    CHECK(type_of(nodes[0]) == CU_GRAPH_NODE_TYPE_KERNEL);
    destroy_graph(g);
  }
  CHECK(tether::sim::nccl_stats().persistent_refs == 0);  // none of them has a plan
  // Uncaptured, the copies run on the stream.
  put_floats(b, {0, 0, 0, 0});
  CHECK(nccl().ncclBroadcast(ptr(a), ptr(b), 4, DT::float32, 0, c.comm(0), s) == R::success);
  sync(s);
  CHECK(floats(b, 4) == std::vector<float>{1, 2, 3, 4});
  // Empty collectives do nothing at all, even with NULL buffers.
  CHECK(nccl().ncclAllReduce(nullptr, nullptr, 0, DT::float32, Op::sum, c.comm(0), s) == R::success);
  free_mem(a);
  free_mem(b);
  make_current(nullptr);
}

TEST_CASE(
    "a captured collective is wait-external -> kernel -> record-external, and every graph launch computes it "
    "again") {
  require_devices();
  Cluster c(2);
  constexpr std::size_t count = 3;
  std::vector<CUdeviceptr> buf = {alloc(0, count * 4), alloc(1, count * 4)};
  std::vector<CUdeviceptr> scratch = {alloc(0, 4), alloc(1, 4)};
  std::vector<CUgraph> graphs(2);
  parallel(2, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    begin_capture(c.stream(r));
    // Work captured before the collective: NCCL's wait node does not depend on it, the kernel does.
    CHECK(raw<Entry::cuMemsetD32Async>(drv(), scratch[ur], 0u, std::size_t{1}, c.stream(r)) == CUDA_SUCCESS);
    CHECK(nccl().ncclAllReduce(ptr(buf[ur]), ptr(buf[ur]), count, DT::float32, Op::sum, c.comm(r),
                               c.stream(r)) == R::success);
    graphs[ur] = end_capture(c.stream(r));
  });
  for (int r = 0; r < 2; ++r) {
    std::vector<CUgraphNode> nodes = nodes_of(graphs[static_cast<std::size_t>(r)]);
    REQUIRE(nodes.size() == 4);
    CUgraphNode memset = only(nodes, CU_GRAPH_NODE_TYPE_MEMSET);
    CUgraphNode wait = only(nodes, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    CUgraphNode kernel = only(nodes, CU_GRAPH_NODE_TYPE_KERNEL);
    CUgraphNode record = only(nodes, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    CHECK(deps_of(wait).empty());
    std::vector<CUgraphNode> kdeps = deps_of(kernel);
    CHECK(kdeps.size() == 2);
    CHECK(std::find(kdeps.begin(), kdeps.end(), memset) != kdeps.end());
    CHECK(std::find(kdeps.begin(), kdeps.end(), wait) != kdeps.end());
    CHECK(deps_of(record) == std::vector<CUgraphNode>{kernel});
  }
  CHECK(tether::sim::nccl_stats().persistent_refs == 2);
  std::vector<CUgraphExec> execs = {instantiate(graphs[0]), instantiate(graphs[1])};
  for (int launch = 1; launch <= 3; ++launch) {
    CAPTURE(launch);
    put_floats(buf[0], std::vector<float>(count, static_cast<float>(launch)));
    put_floats(buf[1], std::vector<float>(count, 10.0f * static_cast<float>(launch)));
    parallel(2, [&](int r) {
      CHECK(raw<Entry::cuGraphLaunch>(drv(), execs[static_cast<std::size_t>(r)], c.stream(r)) ==
            CUDA_SUCCESS);
    });
    c.sync_all();
    for (int r = 0; r < 2; ++r)
      CHECK(floats(buf[static_cast<std::size_t>(r)], count) ==
            std::vector<float>(count, 11.0f * static_cast<float>(launch)));
  }
  for (int r = 0; r < 2; ++r) {
    destroy_exec(execs[static_cast<std::size_t>(r)]);
    destroy_graph(graphs[static_cast<std::size_t>(r)]);
  }
  // The executables were launched: their references go on the driver's thread, a little later.
  CHECK(eventually([] { return tether::sim::nccl_stats().persistent_refs == 0; }));
  free_mem(buf[0]);
  free_mem(buf[1]);
  free_mem(scratch[0]);
  free_mem(scratch[1]);
}

TEST_CASE(
    "two collectives in one capture share NCCL's one external wait: the second kernel follows the first "
    "record") {
  require_devices();
  Cluster c(2);
  std::vector<CUdeviceptr> buf = {alloc(0, 16), alloc(1, 16)};
  std::vector<CUgraph> graphs(2);
  parallel(2, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    begin_capture(c.stream(r));
    for (int i = 0; i < 2; ++i)
      CHECK(nccl().ncclAllReduce(ptr(buf[ur]), ptr(buf[ur]), 4, DT::float32, Op::sum, c.comm(r),
                                 c.stream(r)) == R::success);
    graphs[ur] = end_capture(c.stream(r));
  });
  std::vector<CUgraphNode> nodes = nodes_of(graphs[0]);
  REQUIRE(nodes.size() == 5);
  int waits = 0, kernels = 0, records = 0;
  std::vector<CUgraphNode> ks, rs;
  for (CUgraphNode n : nodes) switch (type_of(n)) {
      case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        ++waits;
        break;
      case CU_GRAPH_NODE_TYPE_KERNEL:
        ++kernels, ks.push_back(n);
        break;
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        ++records, rs.push_back(n);
        break;
      default:
        break;
    }
  CHECK(waits == 1);
  CHECK(kernels == 2);
  CHECK(records == 2);
  std::vector<CUgraphNode> second = deps_of(ks[1]);
  CHECK(std::find(second.begin(), second.end(), ks[0]) != second.end());
  CHECK(std::find(second.begin(), second.end(), rs[0]) != second.end());
  CHECK(tether::sim::nccl_stats().persistent_refs == 4);
  destroy_graph(graphs[0]);
  destroy_graph(graphs[1]);
  CHECK(tether::sim::nccl_stats().persistent_refs == 0);  // never launched: released at the destroy
  free_mem(buf[0]);
  free_mem(buf[1]);
}

TEST_CASE(
    "the last ncclCommDestroy of a clique waits while a graph holding captured NCCL work lives, and returns "
    "once it is destroyed") {
  require_devices();
  std::vector<CUstream> streams = {new_stream(0), new_stream(1)};
  std::vector<Comm> comms(2, nullptr);
  abi::UniqueId id = new_id();
  parallel(2, [&](int r) {
    CHECK(nccl().ncclCommInitRank(&comms[static_cast<std::size_t>(r)], 2, id, r) == R::success);
  });
  std::vector<CUdeviceptr> buf = {alloc(0, 16), alloc(1, 16)};
  std::vector<CUgraph> graphs(2);
  parallel(2, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    begin_capture(streams[ur]);
    CHECK(nccl().ncclAllReduce(ptr(buf[ur]), ptr(buf[ur]), 4, DT::float32, Op::sum, comms[ur], streams[ur]) ==
          R::success);
    graphs[ur] = end_capture(streams[ur]);
  });
  CUgraphExec exec = instantiate(graphs[1]);
  // The first destroy only counts.
  CHECK(nccl().ncclCommDestroy(comms[0]) == R::success);
  std::atomic<bool> returned{false};
  std::thread last([&] {
    CHECK(nccl().ncclCommDestroy(comms[1]) == R::success);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(returned.load());
  CHECK(tether::sim::nccl_stats().destroys_waiting == 1);
  destroy_graph(graphs[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(returned.load());  // rank 1's graph and executable still hold its plan
  destroy_graph(graphs[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(returned.load());  // the executable holds its own reference
  destroy_exec(exec);
  last.join();
  CHECK(returned.load());
  const auto s = tether::sim::nccl_stats();
  CHECK(s.destroys_waiting == 0);
  CHECK(s.persistent_refs == 0);
  CHECK(s.communicators == 0);
  for (CUstream st : streams) CHECK(raw<Entry::cuStreamDestroy>(drv(), st) == CUDA_SUCCESS);
  free_mem(buf[0]);
  free_mem(buf[1]);
}

TEST_CASE(
    "ncclCommDestroy of a communicator with an asynchronous error returns it, destroys nothing and leaks the "
    "group depth; ncclCommAbort destroys it") {
  require_devices();
  std::thread([] {
    std::vector<Comm> comms(2, nullptr);
    REQUIRE(nccl().ncclCommInitAll(comms.data(), 2, nullptr) == R::success);
    tether::sim::inject_nccl_async_error(comms[0], 6);
    R err = R::success;
    CHECK(nccl().ncclCommGetAsyncError(comms[0], &err) == R::success);
    CHECK(err == R::remote_error);
    int v = 0;
    CHECK(nccl().ncclCommCount(comms[0], &v) == R::remote_error);
    CHECK(nccl().ncclAllReduce(nullptr, nullptr, 0, DT::float32, Op::sum, comms[0], nullptr) ==
          R::remote_error);
    const std::size_t live = tether::sim::nccl_stats().communicators;
    CHECK(nccl().ncclCommDestroy(comms[0]) == R::remote_error);
    CHECK(contains(last_error(), "asynchronous error 6"));
    CHECK(tether::sim::nccl_stats().communicators == live);
    // NCCL's trap: the thread is now inside a group. An abort is queued, not run...
    CHECK(nccl().ncclCommAbort(comms[0]) == R::success);
    CHECK(nccl().ncclCommDestroy(comms[1]) == R::success);
    CHECK(tether::sim::nccl_stats().communicators == live);
    // ...until the leaked group ends.
    CHECK(nccl().ncclGroupEnd() == R::success);
    CHECK(tether::sim::nccl_stats().communicators == live - 2);
    CHECK(current() == primary(0));
    CHECK(nccl().ncclGroupEnd() == R::invalid_usage);
  }).join();
}

TEST_CASE(
    "ncclCommDestroy and ncclCommAbort on a thread without a context leave device 0's primary context "
    "current") {
  require_devices();
  std::vector<Comm> comms(2, nullptr);
  const int devs[] = {2, 3};
  REQUIRE(nccl().ncclCommInitAll(comms.data(), 2, devs) == R::success);
  std::thread([&] {
    CHECK(current() == nullptr);
    CHECK(nccl().ncclCommAbort(comms[0]) == R::success);
    CHECK(current() == primary(0));
    make_current(nullptr);
    CHECK(nccl().ncclCommDestroy(comms[1]) == R::success);
    CHECK(current() == primary(0));
    make_current(nullptr);
    CHECK(nccl().ncclCommDestroy(nullptr) == R::success);
    CHECK(current() == nullptr);
  }).join();
  make_current(nullptr);
}

TEST_CASE("ranks that disagree record nccl_mismatch with a precise detail and move no data") {
  require_devices();
  Cluster c(2);
  std::vector<CUdeviceptr> buf = {alloc(0, 64), alloc(1, 64)};
  auto reset = [&] {
    put_floats(buf[0], std::vector<float>(8, 1.0f));
    put_floats(buf[1], std::vector<float>(8, 2.0f));
  };
  reset();
  {
    tether::sim::ExpectViolations expected;
    parallel(2, [&](int r) {
      const auto ur = static_cast<std::size_t>(r);
      CHECK(nccl().ncclAllReduce(ptr(buf[ur]), ptr(buf[ur]), r == 0 ? 4u : 5u, DT::float32, Op::sum,
                                 c.comm(r), c.stream(r)) == R::success);
    });
    c.sync_all();
    CHECK(expected.absorbed() == 1);
  }
  std::vector<tether::sim::Violation> vs = tether::sim::violations();
  REQUIRE(vs.size() == 1);
  CHECK(vs[0].kind == tether::sim::ViolationKind::nccl_mismatch);
  CHECK(contains(vs[0].detail,
                 "rank 0 issued ncclAllReduce(count 4, ncclFloat32, ncclSum) but rank 1 issued "
                 "ncclAllReduce(count 5, ncclFloat32, ncclSum)"));
  CHECK(floats(buf[0], 8) == std::vector<float>(8, 1.0f));
  CHECK(floats(buf[1], 8) == std::vector<float>(8, 2.0f));
  tether::sim::clear_violations();
  {
    tether::sim::ExpectViolations expected;
    parallel(2, [&](int r) {
      const auto ur = static_cast<std::size_t>(r);
      if (r == 0)
        CHECK(nccl().ncclAllReduce(ptr(buf[ur]), ptr(buf[ur]), 4, DT::float32, Op::sum, c.comm(r),
                                   c.stream(r)) == R::success);
      else
        CHECK(nccl().ncclBroadcast(ptr(buf[ur]), ptr(buf[ur]), 4, DT::float32, 1, c.comm(r), c.stream(r)) ==
              R::success);
    });
    c.sync_all();
    CHECK(expected.absorbed() == 1);
  }
  vs = tether::sim::violations();
  REQUIRE(vs.size() == 1);
  CHECK(contains(vs[0].detail, "but rank 1 issued ncclBroadcast(count 4, ncclFloat32, root 1)"));
  tether::sim::clear_violations();
  {
    tether::sim::ExpectViolations expected;
    parallel(2, [&](int r) {
      const auto ur = static_cast<std::size_t>(r);
      if (r == 0)
        CHECK(nccl().ncclSend(ptr(buf[ur]), 4, DT::float32, 1, c.comm(r), c.stream(r)) == R::success);
      else
        CHECK(nccl().ncclRecv(ptr(buf[ur]), 4, DT::int32, 0, c.comm(r), c.stream(r)) == R::success);
    });
    c.sync_all();
    CHECK(expected.absorbed() == 1);
  }
  vs = tether::sim::violations();
  REQUIRE(vs.size() == 1);
  CHECK(contains(vs[0].detail,
                 "the sender issued ncclSend(count 4, ncclFloat32, peer 1) but the receiver issued "
                 "ncclRecv(count 4, ncclInt32, peer 0)"));
  CHECK(floats(buf[1], 8) == std::vector<float>(8, 2.0f));
  tether::sim::clear_violations();
  // The communicators go on: the next matching collective works.
  parallel(2, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    CHECK(nccl().ncclAllReduce(ptr(buf[ur]), ptr(buf[ur]), 8, DT::float32, Op::sum, c.comm(r), c.stream(r)) ==
          R::success);
  });
  c.sync_all();
  CHECK(floats(buf[0], 8) == std::vector<float>(8, 3.0f));
  free_mem(buf[0]);
  free_mem(buf[1]);
}

TEST_CASE(
    "a graph replayed after a buffer of its collective was freed is a use_after_free at execution, and no "
    "data moves") {
  require_devices();
  Cluster c(2);
  std::vector<CUdeviceptr> send = {alloc(0, 16), alloc(1, 16)}, recv = {alloc(0, 16), alloc(1, 16)};
  put_floats(send[0], std::vector<float>(4, 1.0f));
  put_floats(send[1], std::vector<float>(4, 2.0f));
  put_floats(recv[0], std::vector<float>(4, -1.0f));
  std::vector<CUgraph> graphs(2);
  parallel(2, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    begin_capture(c.stream(r));
    CHECK(nccl().ncclAllReduce(ptr(send[ur]), ptr(recv[ur]), 4, DT::float32, Op::sum, c.comm(r),
                               c.stream(r)) == R::success);
    graphs[ur] = end_capture(c.stream(r));
  });
  std::vector<CUgraphExec> execs = {instantiate(graphs[0]), instantiate(graphs[1])};
  free_mem(recv[1]);
  {
    tether::sim::ExpectViolations expected;
    parallel(2, [&](int r) {
      CHECK(raw<Entry::cuGraphLaunch>(drv(), execs[static_cast<std::size_t>(r)], c.stream(r)) ==
            CUDA_SUCCESS);
    });
    c.sync_all();
    CHECK(expected.absorbed() == 1);
  }
  std::vector<tether::sim::Violation> vs = tether::sim::violations();
  REQUIRE(vs.size() == 1);
  CHECK(vs[0].kind == tether::sim::ViolationKind::use_after_free);
  CHECK(contains(vs[0].detail, "ncclAllReduce's receive buffer on rank 1"));
  CHECK(floats(recv[0], 4) == std::vector<float>(4, -1.0f));
  tether::sim::clear_violations();
  for (int r = 0; r < 2; ++r) {
    destroy_exec(execs[static_cast<std::size_t>(r)]);
    destroy_graph(graphs[static_cast<std::size_t>(r)]);
  }
  free_mem(send[0]);
  free_mem(send[1]);
  free_mem(recv[0]);
  CHECK(eventually([] { return tether::sim::nccl_stats().persistent_refs == 0; }));
}

TEST_CASE(
    "bad arguments are refused at the call with NCCL's results and an explanation in ncclGetLastError") {
  require_devices();
  Cluster c(2);
  CUdeviceptr b = alloc(0, 64);
  Current cur(primary(0));
  const auto& n = nccl();
  CHECK(n.ncclAllReduce(ptr(b), ptr(b), 4, static_cast<DT>(12), Op::sum, c.comm(0), c.stream(0)) ==
        R::invalid_argument);
  CHECK(contains(last_error(), "ncclAllReduce : invalid type 12"));
  CHECK(n.ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, static_cast<Op>(5), c.comm(0), c.stream(0)) ==
        R::invalid_argument);
  CHECK(contains(last_error(), "invalid reduction operation 5"));
  CHECK(n.ncclBroadcast(ptr(b), ptr(b), 4, DT::float32, 2, c.comm(0), c.stream(0)) == R::invalid_argument);
  CHECK(contains(last_error(), "invalid root 2 (root should be in the 0..1 range)"));
  CHECK(n.ncclReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, -1, c.comm(0), c.stream(0)) ==
        R::invalid_argument);
  CHECK(n.ncclSend(ptr(b), 4, DT::float32, 5, c.comm(0), c.stream(0)) == R::invalid_argument);
  CHECK(contains(last_error(), "invalid peer 5"));
  CHECK(n.ncclRecv(nullptr, 4, DT::float32, 1, c.comm(0), c.stream(0)) == R::invalid_argument);
  CHECK(contains(last_error(), "receive buffer is NULL"));
  CHECK(n.ncclAllGather(ptr(b), ptr(b), 16, DT::float32, c.comm(0), c.stream(0)) ==
        R::invalid_argument);  // 128 bytes > 64
  CHECK(contains(last_error(), "is not inside one device or pinned allocation"));
  CHECK(n.ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, c.comm(0), c.stream(1)) == R::invalid_usage);
  CHECK(contains(last_error(), "the stream belongs to device 1 but the communicator (rank 0) to device 0"));
  CHECK(n.ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, nullptr, c.stream(0)) ==
        R::invalid_argument);
  int bogus = 0;
  CHECK(n.ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, reinterpret_cast<Comm>(&bogus),
                        c.stream(0)) == R::invalid_argument);
  CHECK(contains(last_error(), "is not a communicator of the simulator's NCCL"));
  CHECK(n.ncclGroupEnd() == R::invalid_usage);
  // An error inside a group fails the whole group at its end, and nothing of it runs.
  CHECK(n.ncclGroupStart() == R::success);
  CHECK(n.ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, c.comm(0), c.stream(0)) == R::success);
  CHECK(n.ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, c.comm(0), CU_STREAM_PER_THREAD) ==
        R::invalid_usage);
  CHECK(contains(last_error(), "one stream per communicator in a group"));
  CHECK(n.ncclGroupEnd() == R::invalid_usage);
  CHECK(tether::sim::nccl_stats().launches_in_flight == 0);
  CHECK(idle(c.stream(0)));
  free_mem(b);
}

TEST_CASE("injected NCCL faults fail the n-th call without doing anything, and calls are counted per entry") {
  require_devices();
  Cluster c(1);
  CUdeviceptr b = alloc(0, 16);
  Current cur(primary(0));
  tether::sim::reset_call_counts();
  CHECK(tether::sim::nccl_call_count("*") == 0);
  tether::sim::fail_nccl_call("ncclAllReduce", 2, 5);
  CHECK(nccl().ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, c.comm(0), c.stream(0)) == R::success);
  CHECK(nccl().ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, c.comm(0), c.stream(0)) ==
        R::invalid_usage);
  CHECK(contains(last_error(), "ncclAllReduce: fault injected by tether::sim::fail_nccl_call"));
  CHECK(nccl().ncclAllReduce(ptr(b), ptr(b), 4, DT::float32, Op::sum, c.comm(0), c.stream(0)) == R::success);
  CHECK(tether::sim::nccl_call_count("ncclAllReduce") == 3);
  // A fault of ncclGroupEnd leaves the group open.
  tether::sim::fail_nccl_call("ncclGroupEnd", 1);
  CHECK(nccl().ncclGroupStart() == R::success);
  CHECK(nccl().ncclGroupEnd() == R::system_error);
  CHECK(nccl().ncclGroupEnd() == R::success);
  // "*": the n-th call of any entry that returns a result; text entries are counted, never failed.
  tether::sim::fail_nccl_call("*", 2, 3);
  CHECK(std::string(nccl().ncclGetErrorString(R::success)) == "no error");
  int v = 0;
  CHECK(nccl().ncclGetVersion(&v) == R::success);
  CHECK(nccl().ncclCommCount(c.comm(0), &v) == R::internal_error);
  CHECK(tether::sim::nccl_call_count("ncclGetErrorString") == 1);
  // 3 ncclAllReduce, 1 ncclGetLastError, 1 ncclGroupStart, 2 ncclGroupEnd, 1 ncclGetErrorString,
  // 1 ncclGetVersion, 1 ncclCommCount.
  CHECK(tether::sim::nccl_call_count("*") == 10);
  // clear_faults drops pending NCCL faults with the driver's.
  tether::sim::fail_nccl_call("ncclCommCount", 1);
  tether::sim::clear_faults();
  CHECK(nccl().ncclCommCount(c.comm(0), &v) == R::success);
  tether::sim::reset_call_counts();
  CHECK(tether::sim::nccl_call_count("ncclCommCount") == 0);
  CHECK_THROWS_AS(tether::sim::fail_nccl_call("ncclAllToAll", 1), tether::UsageError);
  CHECK_THROWS_AS(tether::sim::fail_nccl_call("ncclSend", 0), tether::UsageError);
  CHECK_THROWS_AS(tether::sim::fail_nccl_call("ncclGetLastError", 1), tether::UsageError);
  CHECK_THROWS_AS(tether::sim::fail_nccl_call("ncclSend", 1, 0), tether::UsageError);
  CHECK_THROWS_AS(tether::sim::nccl_call_count("cuMemAlloc"), tether::UsageError);
  CHECK_THROWS_AS(tether::sim::inject_nccl_async_error(nullptr, 6), tether::UsageError);
  sync(c.stream(0));
  free_mem(b);
}

TEST_CASE(
    "ncclCommRegister records page-rounded ranges with references, and registrations go with the "
    "communicator") {
  require_devices();
  const std::size_t before = tether::sim::nccl_stats().registrations;
  std::vector<Comm> comms(1, nullptr);
  REQUIRE(nccl().ncclCommInitAll(comms.data(), 1, nullptr) == R::success);
  CUdeviceptr b = alloc(0, 8192);
  void* h1 = nullptr;
  void* h2 = nullptr;
  void* h3 = nullptr;
  CHECK(nccl().ncclCommRegister(comms[0], static_cast<char*>(ptr(b)) + 4, 1000, &h1) == R::success);
  CHECK(h1 != nullptr);
  // Inside the first page-rounded range: the same registration, one reference more.
  CHECK(nccl().ncclCommRegister(comms[0], static_cast<char*>(ptr(b)) + 100, 10, &h2) == R::success);
  CHECK(h2 == h1);
  CHECK(nccl().ncclCommRegister(comms[0], ptr(b), 8192, &h3) == R::success);
  CHECK(h3 != h1);
  CHECK(tether::sim::nccl_stats().registrations == before + 2);
  std::thread([&] {
    // Deregistering a handle it does not know: invalid_usage, and the thread is left on the
    // communicator's device (NCCL's early return).
    int other = 0;
    CHECK(nccl().ncclCommDeregister(comms[0], &other) == R::invalid_usage);
    CHECK(contains(last_error(), "Could not find handle"));
    CHECK(current() == primary(0));
  }).join();
  CHECK(nccl().ncclCommDeregister(comms[0], h1) == R::success);
  CHECK(tether::sim::nccl_stats().registrations == before + 2);  // one reference left
  CHECK(nccl().ncclCommDeregister(comms[0], h1) == R::success);
  CHECK(tether::sim::nccl_stats().registrations == before + 1);
  CHECK(nccl().ncclCommDeregister(comms[0], nullptr) == R::success);
  CHECK(nccl().ncclCommRegister(comms[0], ptr(b), 16, nullptr) == R::invalid_argument);
  CHECK(nccl().ncclCommDestroy(comms[0]) == R::success);
  CHECK(tether::sim::nccl_stats().registrations == before);
  CHECK(nccl().ncclCommRegister(comms[0], ptr(b), 16, &h1) == R::invalid_argument);
  free_mem(b);
  make_current(nullptr);
}

TEST_CASE(
    "ncclMemAlloc takes 2 MiB granules on the current device, and ncclMemFree frees only what it allocated") {
  require_devices();
  std::thread([] {
    make_current(primary(2));
    const tether::sim::Stats before = tether::sim::stats();
    std::size_t free0 = 0, total = 0, free1 = 0;
    CHECK(raw<Entry::cuMemGetInfo>(drv(), &free0, &total) == CUDA_SUCCESS);
    void* p = nullptr;
    REQUIRE(nccl().ncclMemAlloc(&p, 1) == R::success);
    CHECK(p != nullptr);
    CHECK(raw<Entry::cuMemGetInfo>(drv(), &free1, &total) == CUDA_SUCCESS);
    CHECK(free0 - free1 == (std::size_t{2} << 20));
    CHECK(tether::sim::stats().device_allocations == before.device_allocations + 1);
    CHECK(tether::sim::nccl_stats().allocations == 1);
    // All 2 MiB are usable.
    std::vector<std::byte> big(std::size_t{2} << 20, std::byte{7});
    CHECK(raw<Entry::cuMemcpyHtoD>(drv(), reinterpret_cast<CUdeviceptr>(p),
                                   static_cast<const void*>(big.data()), big.size()) == CUDA_SUCCESS);
    make_current(nullptr);
    CHECK(nccl().ncclMemFree(p) == R::success);
    CHECK(current() == primary(0));  // NCCL's saved device, 0 when none was current
    CHECK(tether::sim::nccl_stats().allocations == 0);
    CHECK(tether::sim::stats().device_allocations == before.device_allocations);
    {
      tether::sim::ExpectViolations expected;
      CHECK(nccl().ncclMemFree(p) == R::unhandled_cuda_error);
      CHECK(expected.absorbed() == 1);
    }
    CHECK(tether::sim::violations().back().kind == tether::sim::ViolationKind::use_after_free);
    tether::sim::clear_violations();
    CUdeviceptr foreign = alloc(1, 256);
    CHECK(nccl().ncclMemFree(ptr(foreign)) == R::unhandled_cuda_error);
    CHECK(contains(last_error(), "ncclMemAlloc did not allocate"));
    free_mem(foreign);
    CHECK(nccl().ncclMemFree(nullptr) == R::success);
    CHECK(nccl().ncclMemAlloc(nullptr, 16) == R::unhandled_cuda_error);
    void* z = &p;
    CHECK(nccl().ncclMemAlloc(&z, 0) == R::success);
    CHECK(z == nullptr);
  }).join();
}

TEST_CASE(
    "a grouped ncclCommInitRank returns at once and joins at the group's end, so one thread can make every "
    "rank") {
  require_devices();
  abi::UniqueId id = new_id();
  std::vector<Comm> comms(3, nullptr);
  std::thread([&] {
    REQUIRE(nccl().ncclGroupStart() == R::success);
    for (int r = 0; r < 3; ++r) {
      make_current(primary(r + 1));
      CHECK(nccl().ncclCommInitRank(&comms[static_cast<std::size_t>(r)], 3, id, r) == R::success);
    }
    CHECK(comms[0] != nullptr);
    int v = 0;
    CHECK(nccl().ncclCommCount(comms[0], &v) == R::invalid_argument);  // not initialized before the end
    CHECK(contains(last_error(),
                   "Attempt to use communicator before the previous operation returned ncclSuccess"));
    make_current(nullptr);
    REQUIRE(nccl().ncclGroupEnd() == R::success);
    CHECK(current() == primary(0));
    for (int r = 0; r < 3; ++r) {
      CHECK(nccl().ncclCommCuDevice(comms[static_cast<std::size_t>(r)], &v) == R::success);
      CHECK(v == r + 1);
    }
    for (Comm c : comms) CHECK(nccl().ncclCommDestroy(c) == R::success);
  }).join();
  CHECK(tether::sim::nccl_stats().communicators == 0);
}

TEST_CASE(
    "an uncaptured collective on a thread without a context leaves device 0's primary context current, as "
    "NCCL's group does") {
  require_devices();
  Cluster c(2);
  std::vector<CUdeviceptr> buf = {alloc(0, 16), alloc(1, 16)};
  put_floats(buf[0], std::vector<float>(4, 1.0f));
  put_floats(buf[1], std::vector<float>(4, 2.0f));
  std::vector<CUcontext> seen(2, nullptr);
  // Rank 1's thread has no context either: the default stream would then be device 0's, but an
  // explicit stream of the communicator's device is fine.
  parallel(
      2,
      [&](int r) {
        const auto ur = static_cast<std::size_t>(r);
        CHECK(nccl().ncclAllReduce(ptr(buf[ur]), ptr(buf[ur]), 4, DT::float32, Op::sum, c.comm(r),
                                   c.stream(r)) == R::success);
        seen[ur] = current();
      },
      false);
  c.sync_all();
  CHECK(seen[0] == primary(0));
  CHECK(seen[1] == primary(0));
  CHECK(floats(buf[1], 4) == std::vector<float>(4, 3.0f));
  std::thread([&] {
    // The default stream of a thread without a context is device 0's: refused for rank 1.
    CHECK(nccl().ncclAllReduce(ptr(buf[1]), ptr(buf[1]), 4, DT::float32, Op::sum, c.comm(1), nullptr) ==
          R::invalid_usage);
    CHECK(contains(last_error(), "the stream belongs to device 0 but the communicator (rank 1) to device 1"));
  }).join();
  free_mem(buf[0]);
  free_mem(buf[1]);
}

TEST_SUITE_END();
