// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The simulator's NCCL twin: the NcclTable that serves tether's NCCL calls when the driver is
// simulated. It models NCCL 2.28.9 the way the rest of the simulator models the driver
// (docs/simulator.md, "NCCL"): communicators of one process ("cliques"), groups, collectives and
// point-to-point operations computed on simulated device memory, launches that are real kernel
// launches of a built-in kernel (so that a capture records them as NCCL's would be recorded),
// persistent plans owned by the capturing graph through a user object, and NCCL's destroy, abort
// and asynchronous-error rules, traps included.
#include <unistd.h>

#include <cmath>

#include "nccl_sim.hpp"
#include "state.hpp"
#include "table.hpp"
#include "../nccl/table.hpp"

namespace tether::sim::detail {

namespace {

namespace abi = tether::detail::nccl_abi;
using tether::detail::NcclEntry;
using Result = abi::Result;
using DataType = abi::DataType;
using RedOp = abi::RedOp;

constexpr int kVersion = abi::version_code(2, 28, 9);
constexpr std::size_t kMemGranularity = std::size_t{2} << 20;  // ncclMemAlloc's granularity on the H200
constexpr auto kInitTimeout = std::chrono::seconds(120);
constexpr auto kWaitNote = std::chrono::seconds(30);
constexpr auto kDestroyNote = std::chrono::seconds(10);

// ----------------------------------------------------------------------------- the driver it runs on

// The twin calls the simulated driver through a table of its own (the same functions and state as
// the runtime's), so that its launches, copies, events and user objects are counted, faulted and
// captured like anyone else's.
const tether::detail::DriverTable& drv() {
  static const tether::detail::DriverTable* t = tether::sim::make_table().release();
  return *t;
}
template <Entry E, class... A>
CUresult cu(A&&... a) {
  return tether::detail::raw<E>(drv(), std::forward<A>(a)...);
}

// NCCL_GRAPH_MIXING_SUPPORT, read once like every NCCL parameter (default 1).
bool graph_mixing() {
  static const bool on = [] {
    const char* v = std::getenv("NCCL_GRAPH_MIXING_SUPPORT");
    return v == nullptr || *v == '\0' || std::strtoll(v, nullptr, 0) != 0;
  }();
  return on;
}

// ----------------------------------------------------------------------------- calls, faults, last error

struct Calls {
  std::array<std::atomic<std::uint64_t>, tether::detail::nccl_entry_count> count{};
};
struct Fault {
  int entry;  // -1: any entry that returns an ncclResult_t
  std::uint64_t remaining;
  Result result;
};
struct Faults {
  std::atomic<int> pending{0};
  std::mutex mu;
  std::vector<Fault> list;
};
// ncclGetLastError's process-global text (NCCL's `char ncclLastError[1024]`).
struct LastError {
  std::mutex mu;
  std::string text;
};

Calls& calls() {
  return immortal<Calls>();
}
Faults& faults() {
  return immortal<Faults>();
}
LastError& last_error() {
  return immortal<LastError>();
}

std::size_t index(NcclEntry e) {
  return static_cast<std::size_t>(e);
}
bool returns_text(NcclEntry e) {
  return e == NcclEntry::ncclGetErrorString || e == NcclEntry::ncclGetLastError;
}

// Records the explanation of a failure as NCCL's WARN does (whatever NCCL_DEBUG says) and returns `r`.
Result failure(Result r, std::string text) {
  if (text.size() > 1023) text.resize(1023);  // NCCL's buffer is 1024 bytes
  LastError& l = last_error();
  std::lock_guard lock(l.mu);
  l.text = std::move(text);
  return r;
}

// A CUDA call NCCL made failed: ncclUnhandledCudaError, with what CUDACHECK prints.
Result cuda_failure(CUresult r, std::string_view what) {
  std::string why = ts().explain;
  return failure(
      Result::unhandled_cuda_error,
      fmt::format("Cuda failure {} '{}' in {}{}{}", static_cast<int>(r), result_name(static_cast<int>(r)),
                  what, why.empty() ? "" : "; simulator: ", why));
}

// Prologue of every entry point: counts the call, then applies an injected fault (the call then
// does nothing else). Entries that return text are counted only.
std::optional<Result> nccl_enter(NcclEntry e) {
  calls().count[index(e)].fetch_add(1, std::memory_order_relaxed);
  if (returns_text(e)) return std::nullopt;
  Faults& f = faults();
  if (f.pending.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard lock(f.mu);
  const int idx = static_cast<int>(index(e));
  for (auto it = f.list.begin(); it != f.list.end(); ++it) {
    if (it->entry != -1 && it->entry != idx) continue;
    if (--it->remaining == 0) {
      Result r = it->result;
      f.list.erase(it);
      f.pending.fetch_sub(1, std::memory_order_release);
      return failure(r, fmt::format("{}: fault injected by tether::sim::fail_nccl_call", nccl_entry_name(e)));
    }
  }
  return std::nullopt;
}
#define TETHER_NCCL_ENTER(name)                                                                       \
  do {                                                                                                \
    if (std::optional<Result> fault_ = nccl_enter(::tether::detail::NcclEntry::name)) return *fault_; \
  } while (0)

// ----------------------------------------------------------------------------- data types and reductions

std::size_t type_size(DataType t) {
  switch (t) {
    case DataType::int8:
    case DataType::uint8:
    case DataType::float8e4m3:
    case DataType::float8e5m2:
      return 1;
    case DataType::float16:
    case DataType::bfloat16:
      return 2;
    case DataType::int32:
    case DataType::uint32:
    case DataType::float32:
      return 4;
    case DataType::int64:
    case DataType::uint64:
    case DataType::float64:
      return 8;
  }
  return 0;
}
bool valid_type(DataType t) {
  return static_cast<int>(t) >= 0 && static_cast<int>(t) <= 11;
}
bool valid_op(RedOp o) {
  return static_cast<int>(o) >= 0 && static_cast<int>(o) <= 4;
}
bool floating(DataType t) {
  switch (t) {
    case DataType::float16:
    case DataType::float32:
    case DataType::float64:
    case DataType::bfloat16:
    case DataType::float8e4m3:
    case DataType::float8e5m2:
      return true;
    default:
      return false;
  }
}

std::string_view type_name(DataType t) {
  static constexpr std::array<std::string_view, 12> names = {
      "ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",   "ncclInt64",      "ncclUint64",
      "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return valid_type(t) ? names[static_cast<std::size_t>(t)] : std::string_view("an invalid data type");
}
std::string_view op_name(RedOp o) {
  static constexpr std::array<std::string_view, 5> names = {"ncclSum", "ncclProd", "ncclMax", "ncclMin",
                                                            "ncclAvg"};
  return valid_op(o) ? names[static_cast<std::size_t>(o)] : std::string_view("an invalid operation");
}

// A small binary floating-point format (half and the two fp8 formats), converted through double
// with round-to-nearest-even, as the device's conversions from float do.
struct MiniFormat {
  int ebits;
  int mbits;
  double max_finite;
  bool has_inf;   // the all-ones exponent is infinity/NaN (half, e5m2); e4m3 has no infinity
  bool saturate;  // out-of-range values become the largest finite one (the fp8 __NV_SATFINITE conversions)
  std::uint32_t nan;
  std::uint32_t inf;
};
constexpr MiniFormat kHalf{5, 10, 65504.0, true, false, 0x7FFF, 0x7C00};
constexpr MiniFormat kE4M3{4, 3, 448.0, false, true, 0x7F, 0};
constexpr MiniFormat kE5M2{5, 2, 57344.0, true, true, 0x7F, 0x7C};

std::uint32_t mini_encode(const MiniFormat& f, float x) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  const int emin = 1 - bias;
  const std::uint32_t sign = std::signbit(x) ? 1u << (f.ebits + f.mbits) : 0u;
  if (std::isnan(x)) return f.nan;
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0) return sign;
  double r = a;
  if (!std::isinf(a)) {
    int e = 0;
    std::frexp(a, &e);
    e = std::max(e - 1, emin);  // a in [2^e, 2^(e+1)); subnormals share the smallest exponent
    const double quantum = std::ldexp(1.0, e - f.mbits);
    r = std::nearbyint(a / quantum) * quantum;  // exact scaling, then ties to even
  }
  if (r > f.max_finite) {
    if (f.saturate || !f.has_inf)
      r = f.max_finite;
    else
      return sign | f.inf;
  }
  if (r == 0) return sign;
  int e = 0;
  std::frexp(r, &e);
  e -= 1;
  if (e < emin) return sign | static_cast<std::uint32_t>(std::ldexp(r, f.mbits - emin));
  const auto mant = static_cast<std::uint32_t>(std::ldexp(r, f.mbits - e)) - (1u << f.mbits);
  return sign | (static_cast<std::uint32_t>(e + bias) << f.mbits) | mant;
}

float mini_decode(const MiniFormat& f, std::uint32_t bits) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  const std::uint32_t mmask = (1u << f.mbits) - 1, emask = (1u << f.ebits) - 1;
  const bool negative = ((bits >> (f.ebits + f.mbits)) & 1u) != 0;
  const std::uint32_t ef = (bits >> f.mbits) & emask, m = bits & mmask;
  double v = 0;
  if (f.has_inf && ef == emask)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (!f.has_inf && ef == emask && m == mmask)
    v = std::numeric_limits<double>::quiet_NaN();
  else if (ef == 0)
    v = std::ldexp(static_cast<double>(m), 1 - bias - f.mbits);
  else
    v = std::ldexp(static_cast<double>(m | (1u << f.mbits)), static_cast<int>(ef) - bias - f.mbits);
  return static_cast<float>(negative ? -v : v);
}

std::uint16_t bf16_encode(float x) {
  auto u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even (overflow carries into infinity)
  return static_cast<std::uint16_t>(u >> 16);
}
float bf16_decode(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// One element type: how to load, store and combine its values. Integers wrap; the floating types
// compute in float (double for float64) and round to the type after every step, as the device's
// half, bfloat16 and fp8 arithmetic does.
// Types the host computes in as they are stored: loaded, stored and rounded as themselves.
template <class T>
struct PlainCodec {
  static T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(std::byte* p, T v) { std::memcpy(p, &v, sizeof v); }
  static T round(T v) { return v; }
};

template <class T>
struct IntCodec : PlainCodec<T> {
  using Acc = T;
  static constexpr bool is_float = false;
  static Acc apply(RedOp op, Acc a, Acc b) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case RedOp::prod:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case RedOp::max:
        return std::max(a, b);
      case RedOp::min:
        return std::min(a, b);
      case RedOp::sum:
      case RedOp::avg:
        break;
    }
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
  // NCCL's ncclAvg of integers: the wrapped sum divided by the rank count, truncated toward zero.
  static Acc divide(Acc sum, int n) {
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(static_cast<std::int64_t>(sum) / n);
    else
      return static_cast<T>(static_cast<std::uint64_t>(sum) / static_cast<std::uint64_t>(n));
  }
};

template <class T>
struct WideFloat : PlainCodec<T> {  // float, double
  using Acc = T;
  static constexpr bool is_float = true;
  static Acc apply(RedOp op, Acc a, Acc b) {
    switch (op) {
      case RedOp::prod:
        return a * b;
      case RedOp::max:
        return std::fmax(a, b);
      case RedOp::min:
        return std::fmin(a, b);
      case RedOp::sum:
      case RedOp::avg:
        break;
    }
    return a + b;
  }
  static Acc divide(Acc sum, int) { return sum; }
};

template <class Bits, std::uint32_t (*Enc)(float), float (*Dec)(std::uint32_t)>
struct SmallFloat {  // half, bfloat16, fp8
  using Acc = float;
  static constexpr bool is_float = true;
  static Acc load(const std::byte* p) {
    Bits b;
    std::memcpy(&b, p, sizeof b);
    return Dec(b);
  }
  static void store(std::byte* p, Acc v) {
    auto b = static_cast<Bits>(Enc(v));
    std::memcpy(p, &b, sizeof b);
  }
  static Acc round(Acc v) { return Dec(Enc(v)); }
  static Acc apply(RedOp op, Acc a, Acc b) { return round(WideFloat<float>::apply(op, a, b)); }
  static Acc divide(Acc sum, int) { return sum; }
};

std::uint32_t enc_half(float v) {
  return mini_encode(kHalf, v);
}
float dec_half(std::uint32_t b) {
  return mini_decode(kHalf, b);
}
std::uint32_t enc_bf16(float v) {
  return bf16_encode(v);
}
float dec_bf16(std::uint32_t b) {
  return bf16_decode(static_cast<std::uint16_t>(b));
}
std::uint32_t enc_e4m3(float v) {
  return mini_encode(kE4M3, v);
}
float dec_e4m3(std::uint32_t b) {
  return mini_decode(kE4M3, b);
}
std::uint32_t enc_e5m2(float v) {
  return mini_encode(kE5M2, v);
}
float dec_e5m2(std::uint32_t b) {
  return mini_decode(kE5M2, b);
}

using Half = SmallFloat<std::uint16_t, &enc_half, &dec_half>;
using Bf16 = SmallFloat<std::uint16_t, &enc_bf16, &dec_bf16>;
using E4M3 = SmallFloat<std::uint8_t, &enc_e4m3, &dec_e4m3>;
using E5M2 = SmallFloat<std::uint8_t, &enc_e5m2, &dec_e5m2>;

// out[k] = in[0][k] op in[1][k] op ... for k < count, in rank order. ncclAvg of a floating type is
// NCCL's PreMulSum: every input multiplied by the type's 1/n first, then summed.
template <class C>
void reduce_typed(RedOp op, std::span<const std::byte* const> in, std::byte* out, std::size_t count,
                  std::size_t size) {
  const int n = static_cast<int>(in.size());
  using Acc = typename C::Acc;
  // NCCL takes 1/n as float (as double for float64), then converts it to the type.
  const Acc scale = C::round(static_cast<Acc>(
      std::is_same_v<Acc, double> ? 1.0 / n : static_cast<double>(static_cast<float>(1.0 / n))));
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t at = k * size;
    Acc acc{};
    if (op == RedOp::avg && C::is_float) {
      if constexpr (C::is_float) {
        acc = C::round(C::load(in[0] + at) * scale);
        for (int j = 1; j < n; ++j) acc = C::apply(RedOp::sum, acc, C::round(C::load(in[j] + at) * scale));
      }
    } else {
      acc = C::load(in[0] + at);
      for (int j = 1; j < n; ++j) acc = C::apply(op, acc, C::load(in[j] + at));
      if (op == RedOp::avg) acc = C::divide(acc, n);
    }
    C::store(out + at, acc);
  }
}

void reduce(DataType t, RedOp op, std::span<const std::byte* const> in, std::byte* out, std::size_t count) {
  const std::size_t s = type_size(t);
  switch (t) {
    case DataType::int8:
      return reduce_typed<IntCodec<std::int8_t>>(op, in, out, count, s);
    case DataType::uint8:
      return reduce_typed<IntCodec<std::uint8_t>>(op, in, out, count, s);
    case DataType::int32:
      return reduce_typed<IntCodec<std::int32_t>>(op, in, out, count, s);
    case DataType::uint32:
      return reduce_typed<IntCodec<std::uint32_t>>(op, in, out, count, s);
    case DataType::int64:
      return reduce_typed<IntCodec<std::int64_t>>(op, in, out, count, s);
    case DataType::uint64:
      return reduce_typed<IntCodec<std::uint64_t>>(op, in, out, count, s);
    case DataType::float16:
      return reduce_typed<Half>(op, in, out, count, s);
    case DataType::float32:
      return reduce_typed<WideFloat<float>>(op, in, out, count, s);
    case DataType::float64:
      return reduce_typed<WideFloat<double>>(op, in, out, count, s);
    case DataType::bfloat16:
      return reduce_typed<Bf16>(op, in, out, count, s);
    case DataType::float8e4m3:
      return reduce_typed<E4M3>(op, in, out, count, s);
    case DataType::float8e5m2:
      return reduce_typed<E5M2>(op, in, out, count, s);
  }
}

// ----------------------------------------------------------------------------- operations and plans

enum class Kind : std::uint8_t { all_reduce, broadcast, reduce, all_gather, reduce_scatter, send, recv };

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce:
      return "ncclAllReduce";
    case Kind::broadcast:
      return "ncclBroadcast";
    case Kind::reduce:
      return "ncclReduce";
    case Kind::all_gather:
      return "ncclAllGather";
    case Kind::reduce_scatter:
      return "ncclReduceScatter";
    case Kind::send:
      return "ncclSend";
    case Kind::recv:
      return "ncclRecv";
  }
  return "?";
}
bool p2p(Kind k) {
  return k == Kind::send || k == Kind::recv;
}
bool reducing(Kind k) {
  return k == Kind::all_reduce || k == Kind::reduce || k == Kind::reduce_scatter;
}
bool rooted(Kind k) {
  return k == Kind::broadcast || k == Kind::reduce;
}

// One NCCL operation of one rank, as the call gave it. `peer` is the root of a rooted collective
// and the peer of a send or receive.
struct Task {
  Kind kind = Kind::all_reduce;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // AllGather: per-rank send count; ReduceScatter: per-rank receive count
  DataType type = DataType::int8;
  RedOp red = RedOp::sum;
  int peer = 0;
};

std::string describe(const Task& t) {
  switch (t.kind) {
    case Kind::all_reduce:
    case Kind::reduce_scatter:
      return fmt::format("{}({}count {}, {}, {})", kind_name(t.kind),
                         t.kind == Kind::reduce_scatter ? "recv" : "", t.count, type_name(t.type),
                         op_name(t.red));
    case Kind::reduce:
      return fmt::format("ncclReduce(count {}, {}, {}, root {})", t.count, type_name(t.type), op_name(t.red),
                         t.peer);
    case Kind::broadcast:
      return fmt::format("ncclBroadcast(count {}, {}, root {})", t.count, type_name(t.type), t.peer);
    case Kind::all_gather:
      return fmt::format("ncclAllGather(sendcount {}, {})", t.count, type_name(t.type));
    case Kind::send:
      return fmt::format("ncclSend(count {}, {}, peer {})", t.count, type_name(t.type), t.peer);
    case Kind::recv:
      return fmt::format("ncclRecv(count {}, {}, peer {})", t.count, type_name(t.type), t.peer);
  }
  return "?";
}

// The buffers a task of rank `rank` in a communicator of `nranks` touches: which, and how many bytes.
struct Use {
  std::uintptr_t at;
  std::size_t bytes;
  const char* what;
};
std::vector<Use> uses(const Task& t, int rank, int nranks) {
  const std::size_t b = t.count * type_size(t.type);
  const auto n = static_cast<std::size_t>(nranks);
  auto s = reinterpret_cast<std::uintptr_t>(t.send);
  auto r = reinterpret_cast<std::uintptr_t>(t.recv);
  switch (t.kind) {
    case Kind::all_reduce:
      return {{s, b, "send buffer"}, {r, b, "receive buffer"}};
    case Kind::broadcast:
      if (rank == t.peer) return {{s, b, "send buffer"}, {r, b, "receive buffer"}};
      return {{r, b, "receive buffer"}};
    case Kind::reduce:
      if (rank == t.peer) return {{s, b, "send buffer"}, {r, b, "receive buffer"}};
      return {{s, b, "send buffer"}};
    case Kind::all_gather:
      return {{s, b, "send buffer"}, {r, b * n, "receive buffer"}};
    case Kind::reduce_scatter:
      return {{s, b * n, "send buffer"}, {r, b, "receive buffer"}};
    case Kind::send:
      return {{s, b, "send buffer"}};
    case Kind::recv:
      return {{r, b, "receive buffer"}};
  }
  return {};
}

struct Comm;

// What one launch of a communicator executes: its operations of one group, in call order. An
// uncaptured plan is freed after it ran; a captured (persistent) one by its user object, when the
// last graph or executable holding it goes.
struct Plan {
  Comm* comm = nullptr;
  std::vector<Task> tasks;
  bool persistent = false;
};

// A rendezvous: the operations of the ranks that meet at one position. A collective has one part
// per rank; a send/receive pair has two (the sender first). The last to arrive moves the data for
// everyone (`moving`, with no lock held: the parts are frozen then), then all of them return.
enum class SlotState : std::uint8_t { open, moving, done };
struct Part {
  Comm* comm = nullptr;
  Task task;
  bool present = false;
};
struct Slot {
  bool pair = false;
  std::uint64_t position = 0;
  std::vector<Part> parts;
  int arrived = 0;
  int holders = 0;  // participants that will still look at the slot; it is erased at 0
  SlotState state = SlotState::open;
};
// (0, 0, 0, position) for a collective, (1, sender, receiver, sequence) for a send/receive pair.
using SlotKey = std::tuple<int, int, int, std::uint64_t>;

enum class Phase : std::uint8_t { forming, formed, failed };

// The communicators made together (one unique id, or one ncclCommInitAll): NCCL's "intra-process
// clique", every rank of which lives in this process.
struct Clique {
  std::uint64_t id = 0;
  int nranks = 0;
  std::vector<Comm*> members;  // by rank: reserved by the call, null until then
  int arrived = 0;             // members past the call, waiting for the others (InitRank)
  int left = 0;                // members that gave up or saw the failure
  Phase phase = Phase::forming;
  Result fail_result = Result::success;
  std::string fail_text;
  int destroys = 0;
  std::map<SlotKey, Slot> slots;
};

enum class CommState : std::uint8_t {
  initializing,  // made by a grouped ncclCommInitRank, joined at the group's end
  ready,
  reclaimed,  // ncclCommDestroy/Abort counted it; its resources live until the clique's last destroy
  freed,
  failed,  // its initialization failed
};

struct Registration {
  std::uintptr_t begin = 0, end = 0;
  int refs = 0;
};

// Where a communicator's launches in one capture continue from (NCCL's per-graph capture stream of
// its strong stream): the external event wait node first, then the last event record node.
struct CaptureMark {
  std::uint64_t id = 0;
  CUgraph graph = nullptr;
  CUgraphNode node = nullptr;
};

// A communicator. Guarded by the world's mutex, except what is fixed once it is initialized (rank,
// nranks, device, ctx, serial). Never freed: a stale handle must be recognised, not crash (like the
// simulator's user objects).
struct Comm {
  Clique* clique = nullptr;
  std::uint64_t id = 0;
  int rank = 0, nranks = 0, device = 0;
  CUcontext ctx = nullptr;   // the device's primary context, retained from init to free
  CUevent serial = nullptr;  // graph mixing's serial event
  CommState state = CommState::initializing;
  bool aborted = false;
  Result async_error = Result::success;
  bool ever_captured = false;
  bool connected = false;  // whether its first multi-rank launch made NCCL's connections
  int persistent_refs = 0;
  int in_flight = 0;
  std::uint64_t coll_seq = 0;
  std::vector<std::uint64_t> send_seq, recv_seq;  // by peer
  std::vector<CaptureMark> captures;
  std::vector<std::unique_ptr<Registration>> regs;
};

struct IdState {
  Clique* clique = nullptr;
  bool spent = false;  // its clique formed or failed: NCCL's bootstrap root is gone
};

struct World {
  std::mutex mu;
  std::condition_variable cv;  // any change a waiter may wait for
  std::unordered_set<Comm*> comms;
  std::map<std::uint64_t, IdState> ids;
  std::unordered_set<Clique*> cliques;
  std::map<std::uintptr_t, std::size_t> allocations;  // ncclMemAlloc blocks
  std::uint64_t next_id = 0;
  int destroys_waiting = 0;
};
World& world() {
  return immortal<World>();
}

Comm* comm_of(::ncclComm* h) {
  return reinterpret_cast<Comm*>(h);
}
::ncclComm* comm_handle(Comm* c) {
  return reinterpret_cast<::ncclComm*>(c);
}

// ----------------------------------------------------------------------------- the CUDA runtime's device

// The primary contexts of the devices, as the twin learnt them (NCCL's cudaSetDevice makes one
// current); immortal like the contexts themselves.
std::array<std::atomic<CUcontext>, 64>& primaries() {
  return immortal<std::array<std::atomic<CUcontext>, 64>>();
}

CUcontext primary(int device) {
  if (device < 0 || device >= 64) return nullptr;
  CUcontext c = primaries()[static_cast<std::size_t>(device)].load();
  if (c) return c;
  // Not learnt yet: retain and release at once, which changes nothing but the call counts.
  if (cu<Entry::cuDevicePrimaryCtxRetain>(&c, device) != CUDA_SUCCESS) return nullptr;
  (void)cu<Entry::cuDevicePrimaryCtxRelease>(device);
  primaries()[static_cast<std::size_t>(device)].store(c);
  return c;
}
// cudaGetDevice: the current context's device, 0 when none is current.
int runtime_device() {
  Ctx* c = ts().current;
  return c ? c->device : 0;
}
// cudaSetDevice: the device's primary context becomes the thread's current context. Set directly,
// as the CUDA runtime inside NCCL switches contexts in the driver: a cuCtxSetCurrent through the
// table would show in the call counts of tether's own context handling.
void set_device(int device) {
  if (CUcontext c = primary(device)) ts().current = ctx_of(c);
}

// ----------------------------------------------------------------------------- groups

struct Queued {
  Comm* comm;
  CUstream stream;
  Task task;
};
struct Reclaim {
  Comm* comm;
};
// NCCL's thread-local group state: the depth (ncclGroupStart nests), the first error of the
// group, and what its outermost ncclGroupEnd runs.
struct GroupState {
  int depth = 0;
  Result error = Result::success;
  std::vector<Queued> ops;
  std::vector<Comm*> inits;
  std::vector<Reclaim> reclaims;
};
thread_local GroupState t_group;

// ncclGroupErrCheck: an error inside a group fails the whole group at its end.
Result group_err_check(Result r) {
  if (t_group.depth > 0 && r != Result::success && r != Result::in_progress) t_group.error = r;
  return r;
}

// ----------------------------------------------------------------------------- lookups

bool gone(CommState s) {
  return s == CommState::reclaimed || s == CommState::freed || s == CommState::failed;
}

// NCCL's CommCheck, plus what the simulator can say about a communicator that is gone (real NCCL
// reads freed memory there). World mutex held.
Result check_comm(::ncclComm* h, std::string_view entry, Comm*& out) {
  if (!h) return failure(Result::invalid_argument, fmt::format("{} : comm argument is NULL", entry));
  Comm* c = comm_of(h);
  if (!world().comms.count(c))
    return failure(
        Result::invalid_argument,
        fmt::format("{} : comm {} is not a communicator of the simulator's NCCL (real NCCL: corrupted "
                    "comm object detected)",
                    entry, fmt::ptr(h)));
  if (c->state == CommState::failed)
    return failure(Result::invalid_argument,
                   fmt::format("{} : comm {} failed to initialize; it cannot be used", entry, fmt::ptr(h)));
  if (gone(c->state))
    return failure(Result::invalid_argument,
                   fmt::format("{} : comm {} (rank {} of {}) has already been destroyed (ncclCommDestroy or "
                               "ncclCommAbort); real NCCL would use freed memory",
                               entry, fmt::ptr(h), c->rank, c->nranks));
  out = c;
  return Result::success;
}

// ncclGetErrorString's fixed strings.
const char* error_string(Result r) {
  switch (r) {
    case Result::success:
      return "no error";
    case Result::unhandled_cuda_error:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case Result::system_error:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case Result::internal_error:
      return "internal error - please report this issue to the NCCL developers";
    case Result::invalid_argument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case Result::invalid_usage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case Result::remote_error:
      return "remote process exited or there was a network error";
    case Result::in_progress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

// ncclCommEnsureReady: a communicator still initializing, or one with an asynchronous error, is
// not ready. An aborted one is (its work just quits). World mutex held.
Result ensure_ready(Comm* c, std::string_view entry) {
  if (c->aborted) return Result::success;
  if (c->state == CommState::initializing)
    return failure(
        Result::invalid_argument,
        fmt::format("{} : Attempt to use communicator before the previous operation returned ncclSuccess "
                    "(its ncclCommInitRank waits for the group's ncclGroupEnd)",
                    entry));
  if (c->async_error != Result::success)
    return failure(
        c->async_error,
        fmt::format("{} : communicator (rank {} of {}) has an asynchronous error {} ('{}'); abort it with "
                    "ncclCommAbort",
                    entry, c->rank, c->nranks, static_cast<int>(c->async_error),
                    error_string(c->async_error)));
  return Result::success;
}

// ----------------------------------------------------------------------------- execution

void note_wait(const Comm* c, std::string_view detail) {
  std::string line = fmt::format(
      "tether simulator: NCCL rank {} of a {}-rank communicator has waited {} s for {} (real NCCL hangs here "
      "too; "
      "ncclCommAbort ends the wait)\n",
      c->rank, c->nranks, std::chrono::duration_cast<std::chrono::seconds>(kWaitNote).count(), detail);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

std::string waiting_for(const Comm* c, const Slot& s) {
  if (s.pair) {
    const bool sender = s.parts[0].present && s.parts[0].comm == c;
    const Task& t = sender ? s.parts[0].task : s.parts[1].task;
    return fmt::format("the {} of rank {} matching its {} #{} ({})", sender ? "ncclRecv" : "ncclSend", t.peer,
                       sender ? "ncclSend" : "ncclRecv", s.position, describe(t));
  }
  std::string missing;
  for (std::size_t r = 0; r < s.parts.size(); ++r)
    if (!s.parts[r].present) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
  const Task* mine = nullptr;
  for (const Part& p : s.parts)
    if (p.present && p.comm == c) mine = &p.task;
  return fmt::format("rank(s) {} to join collective #{} ({})", missing, s.position,
                     mine ? describe(*mine) : "?");
}

// Checks every buffer of every part at execution, as the simulator checks a kernel's pointers:
// memory freed since the call is a use after free, and the data is not moved.
bool operands_live(const Slot& s) {
  bool ok = true;
  const int nranks = s.pair ? 0 : static_cast<int>(s.parts.size());
  for (std::size_t i = 0; i < s.parts.size(); ++i) {
    const Part& p = s.parts[i];
    const int rank = s.pair ? p.comm->rank : static_cast<int>(i);
    for (const Use& u : uses(p.task, rank, s.pair ? 1 : nranks)) {
      if (u.bytes == 0) continue;
      std::string what = fmt::format("{}'s {} on rank {}", kind_name(p.task.kind), u.what, rank);
      ok = check_operand(u.at, u.bytes, false, "", what.c_str()) && ok;
    }
  }
  return ok;
}

void move_pair(const Slot& s) {
  const Task& snd = s.parts[0].task;
  const Task& rcv = s.parts[1].task;
  if (snd.count != rcv.count || snd.type != rcv.type) {
    record_violation(
        ViolationKind::nccl_mismatch, "",
        fmt::format("send #{} from rank {} to rank {} does not match its receive: the sender issued {} but "
                    "the receiver issued {}; no data was moved",
                    s.position, s.parts[0].comm->rank, s.parts[1].comm->rank, describe(snd), describe(rcv)));
    return;
  }
  if (!operands_live(s)) return;
  const std::size_t bytes = snd.count * type_size(snd.type);
  if (bytes) std::memmove(rcv.recv, snd.send, bytes);
}

void move_collective(const Slot& s) {
  const Task& a = s.parts[0].task;
  for (std::size_t r = 1; r < s.parts.size(); ++r) {
    const Task& b = s.parts[r].task;
    if (b.kind != a.kind || b.count != a.count || b.type != a.type || (reducing(a.kind) && b.red != a.red) ||
        (rooted(a.kind) && b.peer != a.peer)) {
      record_violation(
          ViolationKind::nccl_mismatch, "",
          fmt::format("collective #{} of a {}-rank communicator: rank 0 issued {} but rank {} issued {}; "
                      "no data was moved",
                      s.position, s.parts.size(), describe(a), r, describe(b)));
      return;
    }
  }
  if (!operands_live(s)) return;
  const std::size_t n = s.parts.size();
  const std::size_t esize = type_size(a.type);
  const std::size_t bytes = a.count * esize;
  auto send_of = [&](std::size_t r) { return static_cast<const std::byte*>(s.parts[r].task.send); };
  auto recv_of = [&](std::size_t r) { return static_cast<std::byte*>(s.parts[r].task.recv); };
  // Every result is computed before any is written, so that in-place forms read their inputs intact.
  std::vector<std::byte> tmp;
  std::vector<const std::byte*> in(n);
  switch (a.kind) {
    case Kind::all_reduce:
    case Kind::reduce: {
      tmp.resize(bytes);
      for (std::size_t r = 0; r < n; ++r) in[r] = send_of(r);
      reduce(a.type, a.red, in, tmp.data(), a.count);
      if (a.kind == Kind::reduce) {
        std::memcpy(recv_of(static_cast<std::size_t>(a.peer)), tmp.data(), bytes);
      } else {
        for (std::size_t r = 0; r < n; ++r) std::memcpy(recv_of(r), tmp.data(), bytes);
      }
      break;
    }
    case Kind::broadcast:
      tmp.assign(send_of(static_cast<std::size_t>(a.peer)),
                 send_of(static_cast<std::size_t>(a.peer)) + bytes);
      for (std::size_t r = 0; r < n; ++r) std::memcpy(recv_of(r), tmp.data(), bytes);
      break;
    case Kind::all_gather:
      tmp.resize(bytes * n);
      for (std::size_t r = 0; r < n; ++r) std::memcpy(tmp.data() + r * bytes, send_of(r), bytes);
      for (std::size_t r = 0; r < n; ++r) std::memcpy(recv_of(r), tmp.data(), bytes * n);
      break;
    case Kind::reduce_scatter:
      tmp.resize(bytes * n);
      for (std::size_t d = 0; d < n; ++d) {
        for (std::size_t r = 0; r < n; ++r) in[r] = send_of(r) + d * bytes;
        reduce(a.type, a.red, in, tmp.data() + d * bytes, a.count);
      }
      for (std::size_t d = 0; d < n; ++d) std::memcpy(recv_of(d), tmp.data() + d * bytes, bytes);
      break;
    case Kind::send:
    case Kind::recv:
      break;
  }
}

struct Posted {
  SlotKey key;
  Slot* slot;
  int index;
};

// Places a task of `c` at its position (world mutex held). Positions are taken when the plan
// executes, in execution order: that is how NCCL's kernels pair through their connections, so a
// graph replays its collectives at new positions each launch.
Posted post(Comm* c, const Task& t) {
  SlotKey key;
  int index = 0, needed = 2;
  std::uint64_t position = 0;
  if (t.kind == Kind::send) {
    position = c->send_seq[static_cast<std::size_t>(t.peer)]++;
    key = SlotKey{1, c->rank, t.peer, position};
  } else if (t.kind == Kind::recv) {
    position = c->recv_seq[static_cast<std::size_t>(t.peer)]++;
    key = SlotKey{1, t.peer, c->rank, position};
    index = 1;
  } else {
    position = c->coll_seq++;
    key = SlotKey{0, 0, 0, position};
    index = c->rank;
    needed = c->nranks;
  }
  auto [it, fresh] = c->clique->slots.try_emplace(key);
  Slot& s = it->second;
  if (fresh) {
    s.pair = p2p(t.kind);
    s.position = position;
    s.parts.resize(static_cast<std::size_t>(needed));
  }
  s.parts[static_cast<std::size_t>(index)] = Part{c, t, true};
  ++s.arrived;
  ++s.holders;
  return Posted{key, &s, index};
}

void release_slot(Clique* q, const Posted& p) {
  if (--p.slot->holders == 0) q->slots.erase(p.key);
}

// The body of NCCL's kernel, on the stream's worker: post every operation of the plan, move the
// data of those this rank completes, then wait for all of them. An abort of the communicator ends
// the waits (the rank withdraws from rendezvous not yet complete) and skips what is left.
void run_plan(Plan* plan) {
  World& t = world();
  Comm* c = plan->comm;
  Clique* q = nullptr;
  std::vector<Posted> posted;
  std::vector<Slot*> closing;
  {
    std::lock_guard lk(t.mu);
    q = c->clique;
    if (plan->persistent) ++c->in_flight;
    if (!c->aborted && q)
      for (const Task& task : plan->tasks) {
        posted.push_back(post(c, task));
        Slot* s = posted.back().slot;
        if (s->arrived == static_cast<int>(s->parts.size())) {
          s->state = SlotState::moving;
          closing.push_back(s);
        }
      }
  }
  for (Slot* s : closing) {
    if (s->pair)
      move_pair(*s);
    else
      move_collective(*s);
  }
  std::unique_lock lk(t.mu);
  for (Slot* s : closing) s->state = SlotState::done;
  if (!closing.empty()) t.cv.notify_all();
  for (const Posted& p : posted) {
    Slot& s = *p.slot;
    const auto start = Clock::now();
    bool noted = false;
    for (;;) {
      if (s.state == SlotState::done) break;
      if (c->aborted && s.state == SlotState::open) {
        s.parts[static_cast<std::size_t>(p.index)].present = false;
        --s.arrived;
        break;
      }
      if (noted) {
        t.cv.wait(lk);
      } else if (t.cv.wait_until(lk, start + kWaitNote) == std::cv_status::timeout &&
                 s.state == SlotState::open && !c->aborted) {
        noted = true;
        note_wait(c, waiting_for(c, s));
      }
    }
    release_slot(q, p);
  }
  --c->in_flight;
  t.cv.notify_all();
  lk.unlock();
  if (!plan->persistent) delete plan;
}

CUfunction plan_kernel() {
  static const CUfunction f = builtin_function(
      "ncclDevKernel_Generic", {ParamInfo{sizeof(std::uint64_t), false, alignof(std::uint64_t)}},
      [](const LaunchInfo&, const void* const* args) {
        std::uint64_t v = 0;
        std::memcpy(&v, args[0], sizeof v);
        run_plan(reinterpret_cast<Plan*>(static_cast<std::uintptr_t>(v)));
      });
  return f;
}

// NCCL's oneRankReduce<FuncPreMulSum<T>> (ncclAvg of a floating type on one rank): dst = src * 1/1.
template <class C>
void one_rank_body(const void* const* args, std::size_t size) {
  void* dst = nullptr;
  const void* src = nullptr;
  std::uint64_t n = 0, scalar = 0;
  std::memcpy(&dst, args[0], sizeof dst);
  std::memcpy(&src, args[1], sizeof src);
  std::memcpy(&n, args[2], sizeof n);
  std::memcpy(&scalar, args[3], sizeof scalar);
  if (!check_operand(reinterpret_cast<std::uintptr_t>(src), n * size, false, "", "oneRankReduce's source") ||
      !check_operand(reinterpret_cast<std::uintptr_t>(dst), n * size, false, "",
                     "oneRankReduce's destination"))
    return;
  const auto s = C::load(reinterpret_cast<const std::byte*>(&scalar));
  for (std::uint64_t k = 0; k < n; ++k) {
    const auto x = C::load(static_cast<const std::byte*>(src) + k * size);
    C::store(static_cast<std::byte*>(dst) + k * size, C::round(x * s));
  }
}

CUfunction one_rank_kernel(DataType t) {
  static std::mutex mu;
  static std::array<CUfunction, 12> made{};
  std::lock_guard lock(mu);
  CUfunction& f = made[static_cast<std::size_t>(t)];
  if (f) return f;
  const std::size_t size = type_size(t);
  TwinBody body;
  switch (t) {
    case DataType::float16:
      body = [size](const LaunchInfo&, const void* const* a) { one_rank_body<Half>(a, size); };
      break;
    case DataType::bfloat16:
      body = [size](const LaunchInfo&, const void* const* a) { one_rank_body<Bf16>(a, size); };
      break;
    case DataType::float8e4m3:
      body = [size](const LaunchInfo&, const void* const* a) { one_rank_body<E4M3>(a, size); };
      break;
    case DataType::float8e5m2:
      body = [size](const LaunchInfo&, const void* const* a) { one_rank_body<E5M2>(a, size); };
      break;
    case DataType::float64:
      body = [size](const LaunchInfo&, const void* const* a) { one_rank_body<WideFloat<double>>(a, size); };
      break;
    default:
      body = [size](const LaunchInfo&, const void* const* a) { one_rank_body<WideFloat<float>>(a, size); };
      break;
  }
  f = builtin_function(fmt::format("oneRankReduce<FuncPreMulSum<{}>>", type_name(t)),
                       {ParamInfo{8, true, 8}, ParamInfo{8, true, 8}, ParamInfo{8, false, 8},
                        ParamInfo{8, false, 8}, ParamInfo{1, false, 1}},
                       std::move(body));
  return f;
}

// The scalar 1/1 of NCCL's PreMulSum in the type's bits (ncclAvg on one rank).
std::uint64_t unit_scalar(DataType t) {
  std::uint64_t v = 0;
  std::byte* p = reinterpret_cast<std::byte*>(&v);
  switch (t) {
    case DataType::float16:
      Half::store(p, 1.0f);
      break;
    case DataType::bfloat16:
      Bf16::store(p, 1.0f);
      break;
    case DataType::float8e4m3:
      E4M3::store(p, 1.0f);
      break;
    case DataType::float8e5m2:
      E5M2::store(p, 1.0f);
      break;
    case DataType::float64:
      WideFloat<double>::store(p, 1.0);
      break;
    default:
      WideFloat<float>::store(p, 1.0f);
      break;
  }
  return v;
}

// ----------------------------------------------------------------------------- launches

void CUDA_CB persistent_destructor(void* p) {
  // A user-object destructor may not call CUDA: it only frees the plan and counts the reference.
  auto* plan = static_cast<Plan*>(p);
  Comm* c = plan->comm;
  delete plan;
  World& t = world();
  std::lock_guard lock(t.mu);
  --c->persistent_refs;
  t.cv.notify_all();
}

// The node a captured launch of `c` must follow in the capture (id, graph), or null for the first
// launch of `c` in it. Marks of captures that are over are forgotten.
CUgraphNode capture_mark(Comm* c, std::uint64_t id, CUgraph graph) {
  World& t = world();
  std::vector<CaptureMark> marks;
  {
    std::lock_guard lock(t.mu);
    marks = c->captures;
  }
  std::vector<CaptureMark> live;
  CUgraphNode found = nullptr;
  {
    std::lock_guard<std::recursive_mutex> lock(graph_mutex());
    for (const CaptureMark& m : marks) {
      Node* n = node_of(m.node);
      if (!n || n->destroyed || !graph_in_capture(n->graph)) continue;
      live.push_back(m);
      if (m.id == id && m.graph == graph) found = m.node;
    }
  }
  std::lock_guard lock(t.mu);
  c->captures = std::move(live);
  return found;
}
void set_capture_mark(Comm* c, std::uint64_t id, CUgraph graph, CUgraphNode node) {
  std::lock_guard lock(world().mu);
  for (CaptureMark& m : c->captures)
    if (m.id == id && m.graph == graph) {
      m.node = node;
      return;
    }
  c->captures.push_back(CaptureMark{id, graph, node});
}

// One launch of a communicator's operations on `stream`, as NCCL's ncclLaunchPrepare,
// ncclLaunchKernel and ncclLaunchFinish make it, with the communicator's device current (NCCL's
// cudaSetDevice). Captured, with graph mixing: an external wait on the serial event (without
// dependencies, once per capture), the kernel after it and after the stream's work, an event record
// node after the kernel; the stream continues from the kernel. The plan is then owned by a user
// object on the capturing graph.
Result launch(Comm* c, CUstream stream, std::vector<Task> tasks) {
  World& t = world();
  ts().current = ctx_of(c->ctx);
  auto* plan = new Plan{c, std::move(tasks), false};
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph graph = nullptr;
  if (CUresult r = cu<Entry::cuStreamGetCaptureInfo>(
          stream, &status, &id, &graph, static_cast<const CUgraphNode**>(nullptr),
          static_cast<const CUgraphEdgeData**>(nullptr), static_cast<std::size_t*>(nullptr))) {
    delete plan;
    return cuda_failure(r, "cudaStreamGetCaptureInfo");
  }
  const bool captured = status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  const bool mixing = graph_mixing();
  bool serialize = false;
  if (captured) {
    plan->persistent = true;
    {
      std::lock_guard lock(t.mu);
      c->ever_captured = true;
    }
    if (mixing) {
      CUgraphNode mark = capture_mark(c, id, graph);
      if (!mark) {
        if (CUresult r = cu<Entry::cuGraphAddEventWaitNode>(
                &mark, graph, static_cast<const CUgraphNode*>(nullptr), std::size_t{0}, c->serial)) {
          delete plan;
          return cuda_failure(r, "cudaStreamWaitEvent(serialEvent, cudaEventWaitExternal)");
        }
        set_capture_mark(c, id, graph, mark);
      }
      if (CUresult r = cu<Entry::cuStreamUpdateCaptureDependencies>(
              stream, &mark, static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{1},
              unsigned{CU_STREAM_ADD_CAPTURE_DEPENDENCIES})) {
        delete plan;
        return cuda_failure(r, "cudaStreamWaitEvent (joining the communicator's capture stream)");
      }
    }
    {
      std::lock_guard lock(t.mu);
      ++c->persistent_refs;  // the destructor's decrement balances it from here on
    }
    CUuserObject object = nullptr;
    if (CUresult r = cu<Entry::cuUserObjectCreate>(&object, static_cast<void*>(plan), &persistent_destructor,
                                                   1u, unsigned{CU_USER_OBJECT_NO_DESTRUCTOR_SYNC})) {
      {
        std::lock_guard lock(t.mu);
        --c->persistent_refs;
        t.cv.notify_all();
      }
      delete plan;
      return cuda_failure(r, "cudaUserObjectCreate");
    }
    if (CUresult r =
            cu<Entry::cuGraphRetainUserObject>(graph, object, 1u, unsigned{CU_GRAPH_USER_OBJECT_MOVE})) {
      (void)cu<Entry::cuUserObjectRelease>(object, 1u);  // runs the destructor: the plan and the reference go
      return cuda_failure(r, "cudaGraphRetainUserObject");
    }
  } else {
    std::lock_guard lock(t.mu);
    ++c->in_flight;
    serialize = mixing && c->ever_captured;
  }
  // Uncaptured after a capture: NCCL orders the launch after the communicator's last graph launch
  // (its strong stream waits for the serial event, and records it after).
  if (serialize)
    if (CUresult r = cu<Entry::cuStreamWaitEvent>(stream, c->serial, 0u)) {
      std::lock_guard lock(t.mu);
      --c->in_flight;
      t.cv.notify_all();
      delete plan;
      return cuda_failure(r, "cudaStreamWaitEvent(serialEvent)");
    }
  std::uint64_t arg = reinterpret_cast<std::uintptr_t>(plan);
  void* params[] = {&arg};
  if (CUresult r = cu<Entry::cuLaunchKernel>(plan_kernel(), 1u, 1u, 1u, 512u, 1u, 1u, 0u, stream, params,
                                             static_cast<void**>(nullptr))) {
    if (!captured) {  // a captured plan belongs to its user object now
      {
        std::lock_guard lock(t.mu);
        --c->in_flight;
        t.cv.notify_all();
      }
      delete plan;
    }
    return cuda_failure(r, "cuLaunchKernelEx");
  }
  if (captured && mixing) {
    const CUgraphNode* deps = nullptr;
    std::size_t n = 0;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CUresult r = cu<Entry::cuStreamGetCaptureInfo>(stream, &st, static_cast<cuuint64_t*>(nullptr),
                                                       static_cast<CUgraph*>(nullptr), &deps,
                                                       static_cast<const CUgraphEdgeData**>(nullptr), &n))
      return cuda_failure(r, "cudaStreamGetCaptureInfo");
    CUgraphNode record = nullptr;
    if (CUresult r = cu<Entry::cuGraphAddEventRecordNode>(&record, graph, deps, n, c->serial))
      return cuda_failure(r, "cudaGraphAddEventRecordNode(serialEvent)");
    set_capture_mark(c, id, graph, record);
  }
  if (serialize)
    if (CUresult r = cu<Entry::cuEventRecord>(c->serial, stream))
      return cuda_failure(r, "cudaEventRecord(serialEvent)");
  return Result::success;
}

// NCCL's ncclLaunchOneRank, at the call: a one-rank collective is a copy (nothing in place), or the
// oneRankReduce kernel for ncclAvg of a floating type (its PreMulSum by 1/1). It runs with the
// thread's own device, as NCCL's cudaMemcpyAsync does (the CUDA runtime makes device 0's primary
// context current first when none is).
Result one_rank(const Task& task, CUstream stream) {
  if (!ts().current) set_device(0);
  const std::size_t bytes = task.count * type_size(task.type);
  if (reducing(task.kind) && task.red == RedOp::avg && floating(task.type)) {
    void* dst = task.recv;
    const void* src = task.send;
    std::uint64_t n = task.count;
    std::uint64_t scalar = unit_scalar(task.type);
    bool is_ptr = false;
    void* args[] = {&dst, &src, &n, &scalar, &is_ptr};
    const auto grid =
        static_cast<unsigned>(std::min<std::size_t>(32, (bytes + (16u << 10) - 1) / (16u << 10)));
    if (CUresult r = cu<Entry::cuLaunchKernel>(one_rank_kernel(task.type), grid, 1u, 1u, 512u, 1u, 1u, 0u,
                                               stream, args, static_cast<void**>(nullptr)))
      return cuda_failure(r, "cudaLaunchKernel(oneRankReduce)");
    return Result::success;
  }
  if (task.send == task.recv) return Result::success;
  if (CUresult r = cu<Entry::cuMemcpyAsync>(reinterpret_cast<CUdeviceptr>(task.recv),
                                            reinterpret_cast<CUdeviceptr>(task.send), bytes, stream))
    return cuda_failure(r, "cudaMemcpyAsync");
  return Result::success;
}

// ----------------------------------------------------------------------------- init

void release_resources(CUcontext ctx, CUevent serial, int device) {
  if (serial) (void)cu<Entry::cuEventDestroy>(serial);
  if (ctx) (void)cu<Entry::cuDevicePrimaryCtxRelease>(device);
}

Comm* new_comm(Clique* q, int rank, int device) {
  auto* c = new Comm;
  c->clique = q;
  c->id = q->id;
  c->rank = rank;
  c->nranks = q->nranks;
  c->device = device;
  c->send_seq.assign(static_cast<std::size_t>(q->nranks), 0);
  c->recv_seq.assign(static_cast<std::size_t>(q->nranks), 0);
  world().comms.insert(c);
  q->members[static_cast<std::size_t>(rank)] = c;
  return c;
}

// The resources NCCL's init job makes on the thread that runs it: the device's primary context
// (current from then on, NCCL's cudaSetDevice) and the serial event.
Result make_resources(Comm* c, CUcontext& ctx, CUevent& ev) {
  if (CUresult r = cu<Entry::cuDevicePrimaryCtxRetain>(&ctx, c->device)) {
    ctx = nullptr;
    return cuda_failure(r, fmt::format("cudaSetDevice({})", c->device));
  }
  primaries()[static_cast<std::size_t>(c->device)].store(ctx);
  ts().current = ctx_of(ctx);
  if (CUresult r = cu<Entry::cuEventCreate>(&ev, unsigned{CU_EVENT_DISABLE_TIMING})) {
    (void)cu<Entry::cuDevicePrimaryCtxRelease>(c->device);
    ctx = nullptr;
    ev = nullptr;
    return cuda_failure(r, "cudaEventCreateWithFlags");
  }
  return Result::success;
}

// Called when the last member arrives (world mutex held): NCCL's AllGather of the peers' info,
// which refuses two ranks on one device.
void form(Clique* q) {
  World& t = world();
  for (std::size_t i = 0; i < q->members.size() && q->phase == Phase::forming; ++i)
    for (std::size_t j = i + 1; j < q->members.size(); ++j)
      if (q->members[i]->device == q->members[j]->device) {
        q->phase = Phase::failed;
        q->fail_result = Result::invalid_usage;
        q->fail_text = fmt::format("Duplicate GPU detected : rank {} and rank {} both on CUDA device {}", i,
                                   j, q->members[i]->device);
        break;
      }
  if (q->phase == Phase::forming) {
    q->phase = Phase::formed;
    for (Comm* m : q->members) m->state = CommState::ready;
  }
  t.ids[q->id].spent = true;
  t.cv.notify_all();
}

// Drops a member that will never be part of the clique (world mutex held).
void leave_clique(Comm* c) {
  World& t = world();
  Clique* q = c->clique;
  c->state = CommState::failed;
  c->clique = nullptr;
  if (!q) return;
  if (q->phase == Phase::forming) {
    q->members[static_cast<std::size_t>(c->rank)] = nullptr;
    bool empty = true;
    for (Comm* m : q->members) empty = empty && m == nullptr;
    if (empty) {  // nobody left: the id can be used again
      t.ids[q->id].clique = nullptr;
      t.cliques.erase(q);
      delete q;
    }
    return;
  }
  // A failed clique goes with its last member.
  if (++q->left == q->nranks) {
    t.ids[q->id].clique = nullptr;
    t.cliques.erase(q);
    delete q;
  }
}

// The blocking part of ncclCommInitRank: resources, then the wait for every rank of the id.
Result join(Comm* c) {
  World& t = world();
  CUcontext ctx = nullptr;
  CUevent ev = nullptr;
  Result r = make_resources(c, ctx, ev);
  std::unique_lock lk(t.mu);
  Clique* q = c->clique;
  if (r != Result::success) {
    leave_clique(c);
    return r;
  }
  c->ctx = ctx;
  c->serial = ev;
  ++q->arrived;
  if (q->arrived == q->nranks) form(q);
  const auto deadline = Clock::now() + kInitTimeout;
  while (q->phase == Phase::forming)
    if (t.cv.wait_until(lk, deadline) == std::cv_status::timeout && q->phase == Phase::forming) break;
  if (q->phase == Phase::formed) return Result::success;
  Result result = Result::system_error;
  std::string text;
  if (q->phase == Phase::forming) {
    --q->arrived;
    text = fmt::format(
        "ncclCommInitRank: rank {} of {} waited {} s for the other ranks of its ncclUniqueId and gave "
        "up ({} had joined with it; the simulator's NCCL has every rank in this process: call "
        "ncclCommInitRank for each rank, from threads of their own or in one ncclGroupStart/ncclGroupEnd)",
        c->rank, c->nranks, std::chrono::duration_cast<std::chrono::seconds>(kInitTimeout).count(),
        q->arrived + 1);
  } else {
    result = q->fail_result;
    text = q->fail_text;
  }
  c->ctx = nullptr;
  c->serial = nullptr;
  leave_clique(c);
  lk.unlock();
  release_resources(ctx, ev, c->device);
  return failure(result, std::move(text));
}

std::uint64_t read_id(const abi::UniqueId& id, bool& ours);

// The part of ncclCommInitRank before its init job: validation and the reservation of the rank.
Result reserve_rank(abi::Comm* out, int nranks, const abi::UniqueId& id, int rank, Comm*& made) {
  if (!out) return failure(Result::invalid_argument, "CommInitRank : newcomm argument is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return failure(Result::invalid_argument, fmt::format("Invalid rank requested : {}/{}", rank, nranks));
  bool ours = false;
  const std::uint64_t number = read_id(id, ours);
  const int device = runtime_device();
  World& t = world();
  std::lock_guard lock(t.mu);
  auto it = ours ? t.ids.find(number) : t.ids.end();
  if (it == t.ids.end())
    return failure(Result::invalid_argument,
                   "ncclCommInitRank: the ncclUniqueId was not made by ncclGetUniqueId in this process (the "
                   "simulator's NCCL has no network: every rank of a communicator lives in this process)");
  IdState& st = it->second;
  if (st.spent && !st.clique)
    return failure(Result::invalid_usage,
                   "ncclCommInitRank: this ncclUniqueId already made a communicator; make a new one with "
                   "ncclGetUniqueId for every communicator");
  if (!st.clique) {
    auto* q = new Clique;
    q->id = number;
    q->nranks = nranks;
    q->members.assign(static_cast<std::size_t>(nranks), nullptr);
    st.clique = q;
    t.cliques.insert(q);
  }
  Clique* q = st.clique;
  if (q->phase != Phase::forming)
    return failure(Result::invalid_usage,
                   "ncclCommInitRank: this ncclUniqueId already made a communicator; make a new one with "
                   "ncclGetUniqueId for every communicator");
  if (q->nranks != nranks)
    return failure(Result::invalid_argument,
                   fmt::format("ncclCommInitRank: rank {} asks for {} ranks but the ranks that joined this "
                               "ncclUniqueId first asked for {}",
                               rank, nranks, q->nranks));
  if (q->members[static_cast<std::size_t>(rank)])
    return failure(Result::invalid_usage,
                   fmt::format("ncclCommInitRank: rank {} of this ncclUniqueId has already joined", rank));
  made = new_comm(q, rank, device);
  *out = comm_handle(made);
  return Result::success;
}

// ----------------------------------------------------------------------------- destroy

// NCCL's commReclaim: counts the destroy in the clique; the last one waits until no graph holds
// work of any of its communicators and no launch of them runs (NCCL 2.28.9's commDestroySync loops
// on localPersistentRefs without a timeout), then frees them all.
Result reclaim(Comm* c) {
  World& t = world();
  std::vector<Comm*> members;
  {
    std::unique_lock lk(t.mu);
    c->state = CommState::reclaimed;
    Clique* q = c->clique;
    if (!q || ++q->destroys < q->nranks) return Result::success;
    auto busy = [&] {
      for (Comm* m : q->members)
        if (m->persistent_refs > 0 || m->in_flight > 0) return true;
      return false;
    };
    ++t.destroys_waiting;
    const auto start = Clock::now();
    bool noted = false;
    while (busy()) {
      if (noted) {
        t.cv.wait(lk);
      } else if (t.cv.wait_until(lk, start + kDestroyNote) == std::cv_status::timeout && busy()) {
        noted = true;
        int refs = 0, running = 0;
        for (Comm* m : q->members) refs += m->persistent_refs, running += m->in_flight;
        std::string line = fmt::format(
            "tether simulator: the last ncclCommDestroy/ncclCommAbort of a {}-rank clique has waited {} s "
            "for {} "
            "CUDA graph reference(s) to NCCL work captured on its communicators and {} NCCL launch(es) still "
            "running (real NCCL 2.28.9 waits forever here: destroy every graph and executable that captured "
            "NCCL "
            "work before the last destroy)\n",
            q->nranks, std::chrono::duration_cast<std::chrono::seconds>(kDestroyNote).count(), refs, running);
        std::fwrite(line.data(), 1, line.size(), stderr);
        std::fflush(stderr);
      }
    }
    --t.destroys_waiting;
    members = q->members;
    for (Comm* m : members) {
      m->state = CommState::freed;
      m->clique = nullptr;
      m->regs.clear();
      m->captures.clear();
    }
    t.ids[q->id].clique = nullptr;
    t.cliques.erase(q);
    delete q;
  }
  for (Comm* m : members) release_resources(m->ctx, m->serial, m->device);
  return Result::success;
}

// ----------------------------------------------------------------------------- the group's end

Result run_jobs(std::vector<Comm*>& inits, std::vector<Reclaim>& reclaims) {
  // NCCL runs a group's asynchronous jobs (inits, destroys) on threads of their own, in parallel.
  std::vector<std::function<Result()>> jobs;
  for (Comm* c : inits) jobs.emplace_back([c] { return join(c); });
  for (const Reclaim& r : reclaims) jobs.emplace_back([c = r.comm] { return reclaim(c); });
  if (jobs.empty()) return Result::success;
  std::vector<Result> results(jobs.size(), Result::success);
  if (jobs.size() == 1) {
    results[0] = jobs[0]();
  } else {
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < jobs.size(); ++i) threads.emplace_back([&, i] { results[i] = jobs[i](); });
    for (std::thread& th : threads) th.join();
  }
  for (Result r : results)
    if (r != Result::success) return r;
  return Result::success;
}

Result launch_all(std::vector<Queued>& ops) {
  // One launch per communicator, in the order the communicators first appear in the group.
  std::vector<Comm*> order;
  for (const Queued& q : ops)
    if (std::find(order.begin(), order.end(), q.comm) == order.end()) order.push_back(q.comm);
  for (Comm* c : order) {
    CUstream stream = nullptr;
    std::vector<Task> tasks;
    for (const Queued& q : ops)
      if (q.comm == c) {
        stream = q.stream;
        tasks.push_back(q.task);
      }
    {
      std::lock_guard lock(world().mu);
      if (c->state != CommState::ready)
        return failure(Result::invalid_argument,
                       fmt::format("ncclGroupEnd: comm {} was destroyed or failed before the group's end",
                                   fmt::ptr(comm_handle(c))));
    }
    if (Result r = launch(c, stream, std::move(tasks)); r != Result::success) return r;
  }
  return Result::success;
}

// Drops what a failed group queued: grouped inits fail (their ranks are released).
void discard(std::vector<Comm*>& inits) {
  std::lock_guard lock(world().mu);
  for (Comm* c : inits) leave_clique(c);
}

// ncclGroupEndInternal: the outermost end runs the group; a blocking group saves the thread's
// device and sets it again afterwards (NCCL's cudaGetDevice/cudaSetDevice), except on failure.
// NCCL connects a communicator's ranks at their first launch (NCCL_RUNTIME_CONNECT, the default
// since 2.22): it enables peer access and allocates its buffers on the launching thread, which is
// an unsafe call in a capture. On two H200s a first all_reduce captured in GLOBAL mode failed so:
// "failed to peer with device 1: operation not permitted when stream is capturing" (ncclInternalError).
Result connect(const std::vector<Queued>& ops) {
  World& t = world();
  for (const Queued& q : ops) {
    {
      std::lock_guard lock(t.mu);
      if (q.comm->nranks < 2 || q.comm->connected) continue;
    }
    if (unsafe_call_guard("cuCtxEnablePeerAccess") != CUDA_SUCCESS)
      return failure(Result::internal_error,
                     fmt::format("failed to peer with device {}: operation not permitted when stream is capturing "
                                 "(rank {} connects to its peers at its first collective, NCCL_RUNTIME_CONNECT)",
                                 (q.comm->device + 1) % device_count(), q.comm->rank));
    std::lock_guard lock(t.mu);
    q.comm->connected = true;
  }
  return Result::success;
}

Result group_end_internal() {
  GroupState& g = t_group;
  if (g.depth == 0) return failure(Result::invalid_usage, "ncclGroupEnd: not in a group call.");
  if (--g.depth > 0) return Result::success;
  Result err = g.error;
  std::vector<Queued> ops = std::move(g.ops);
  std::vector<Comm*> inits = std::move(g.inits);
  std::vector<Reclaim> reclaims = std::move(g.reclaims);
  g.ops.clear();
  g.inits.clear();
  g.reclaims.clear();
  g.error = Result::success;
  if (err != Result::success) {
    discard(inits);
    return err;
  }
  if (ops.empty() && inits.empty() && reclaims.empty()) return Result::success;
  const int saved = runtime_device();
  if (Result r = run_jobs(inits, reclaims); r != Result::success) return r;
  if (Result r = connect(ops); r != Result::success) return r;
  if (Result r = launch_all(ops); r != Result::success) return r;
  set_device(saved);
  return Result::success;
}

// ----------------------------------------------------------------------------- entry points

Result nccl_get_version(int* version) {
  TETHER_NCCL_ENTER(ncclGetVersion);
  if (!version) return failure(Result::invalid_argument, "ncclGetVersion : version argument is NULL");
  *version = kVersion;
  return Result::success;
}

// An id: a magic prefix, then the id's number; the rest is zero.
constexpr char kIdMagic[16] = "tether-sim-nccl";

std::uint64_t read_id(const abi::UniqueId& id, bool& ours) {
  ours = std::memcmp(id.internal, kIdMagic, sizeof kIdMagic) == 0;
  std::uint64_t v = 0;
  std::memcpy(&v, id.internal + sizeof kIdMagic, sizeof v);
  return v;
}

Result nccl_get_unique_id(abi::UniqueId* id) {
  TETHER_NCCL_ENTER(ncclGetUniqueId);
  if (!id) return failure(Result::invalid_argument, "ncclGetUniqueId : uniqueId argument is NULL");
  World& t = world();
  std::uint64_t number = 0;
  {
    std::lock_guard lock(t.mu);
    number = ++t.next_id;
    t.ids[number] = IdState{};
  }
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdMagic, sizeof kIdMagic);
  std::memcpy(id->internal + sizeof kIdMagic, &number, sizeof number);
  return Result::success;
}

Result nccl_comm_init_rank(abi::Comm* out, int nranks, abi::UniqueId id, int rank) {
  TETHER_NCCL_ENTER(ncclCommInitRank);
  Comm* c = nullptr;
  if (Result r = reserve_rank(out, nranks, id, rank, c); r != Result::success) return group_err_check(r);
  // NCCL's ncclAsyncLaunch: inside a group the init job runs at the group's end; otherwise now, on
  // this thread (which keeps the communicator's device current afterwards).
  if (t_group.depth > 0) {
    t_group.inits.push_back(c);
    return Result::success;
  }
  Result r = join(c);
  if (r != Result::success) *out = nullptr;
  return r;
}

Result nccl_comm_init_all(abi::Comm* comms, int ndev, const int* devlist) {
  TETHER_NCCL_ENTER(ncclCommInitAll);
  const int old_device = runtime_device();
  // NCCL sets the saved device again on every way out.
  struct Restore {
    int device;
    ~Restore() { set_device(device); }
  } restore{old_device};
  if (!comms) return failure(Result::invalid_argument, "CommInitAll : comms argument is NULL");
  if (ndev < 1)
    return failure(Result::invalid_argument,
                   ndev < 0
                       ? fmt::format("Invalid device count requested : {}", ndev)
                       : std::string("ncclCommInitAll : ndev is 0 (real NCCL then reads comms[0], which it "
                                     "never wrote)"));
  const int total = device_count();
  if (devlist) {
    std::vector<bool> seen(static_cast<std::size_t>(total), false);
    for (int i = 0; i < ndev; ++i) {
      if (devlist[i] < 0 || devlist[i] >= total)
        return failure(Result::invalid_argument,
                       fmt::format("Invalid device {} (totalnDev={})", devlist[i], total));
      if (seen[static_cast<std::size_t>(devlist[i])])
        return failure(Result::invalid_usage,
                       fmt::format("ncclCommInitAll : duplicate device {} in devlist", devlist[i]));
      seen[static_cast<std::size_t>(devlist[i])] = true;
    }
  } else if (ndev > total) {
    // NCCL's cudaSetDevice(ndev-th device) fails inside its own group, whose end it then skips:
    // the thread's group depth stays incremented, as on real NCCL.
    ++t_group.depth;
    return failure(
        Result::unhandled_cuda_error,
        fmt::format("Cuda failure 101 'invalid device ordinal' in cudaSetDevice({}): ncclCommInitAll of {} "
                    "devices without a devlist, on {} device(s)",
                    total, ndev, total));
  }
  World& t = world();
  Clique* q = new Clique;
  std::vector<Comm*> made;
  {
    std::lock_guard lock(t.mu);
    q->id = ++t.next_id;
    q->nranks = ndev;
    q->members.assign(static_cast<std::size_t>(ndev), nullptr);
    t.ids[q->id] = IdState{q, true};
    t.cliques.insert(q);
    for (int i = 0; i < ndev; ++i) made.push_back(new_comm(q, i, devlist ? devlist[i] : i));
  }
  Result result = Result::success;
  for (Comm* c : made) {
    CUcontext ctx = nullptr;
    CUevent ev = nullptr;
    result = make_resources(c, ctx, ev);
    std::lock_guard lock(t.mu);
    c->ctx = ctx;
    c->serial = ev;
    if (result != Result::success) break;
  }
  std::vector<std::pair<CUcontext, std::pair<CUevent, int>>> undo;
  {
    std::lock_guard lock(t.mu);
    if (result == Result::success) {
      q->arrived = ndev;
      form(q);
      for (int i = 0; i < ndev; ++i) comms[i] = comm_handle(made[static_cast<std::size_t>(i)]);
      return Result::success;
    }
    q->phase = Phase::failed;
    t.ids[q->id].spent = true;
    for (Comm* c : made) {
      undo.push_back({c->ctx, {c->serial, c->device}});
      c->ctx = nullptr;
      c->serial = nullptr;
      leave_clique(c);
    }
  }
  for (auto& [ctx, rest] : undo) release_resources(ctx, rest.first, rest.second);
  return result;
}

// ncclCommDestroy and ncclCommAbort.
Result destroy(abi::Comm h, bool abort) {
  if (!h) return Result::success;
  const std::string_view entry = abort ? "ncclCommAbort" : "ncclCommDestroy";
  World& t = world();
  {
    std::lock_guard lock(t.mu);
    Comm* c = comm_of(h);
    if (!t.comms.count(c))
      return failure(
          Result::invalid_argument,
          fmt::format("{} : comm {} is not a communicator of the simulator's NCCL", entry, fmt::ptr(h)));
    if (abort) {
      if (gone(c->state) || c->state == CommState::initializing)
        return failure(Result::invalid_argument,
                       fmt::format("ncclCommAbort : comm {} has already been destroyed or is not initialized",
                                   fmt::ptr(h)));
      // Ask anything still running to quit: waiting plans of this communicator return.
      c->aborted = true;
      t.cv.notify_all();
    }
    ++t_group.depth;  // ncclGroupStartInternal
    if (!abort) {
      // NCCL returns from these two checks without its ncclGroupEndInternal: the thread's group
      // depth stays incremented, and later NCCL calls on this thread are queued as in a group.
      if (gone(c->state) || c->state == CommState::initializing)
        return failure(Result::invalid_argument,
                       fmt::format("comm {} has already been destroyed", fmt::ptr(h)));
      if (Result r = ensure_ready(c, entry); r != Result::success) return r;
    }
    t_group.reclaims.push_back(Reclaim{c});
  }
  return group_end_internal();
}

Result nccl_comm_destroy(abi::Comm h) {
  TETHER_NCCL_ENTER(ncclCommDestroy);
  return destroy(h, false);
}
Result nccl_comm_abort(abi::Comm h) {
  TETHER_NCCL_ENTER(ncclCommAbort);
  return destroy(h, true);
}

Result nccl_comm_get_async_error(abi::Comm h, Result* error) {
  TETHER_NCCL_ENTER(ncclCommGetAsyncError);
  std::lock_guard lock(world().mu);
  Comm* c = nullptr;
  if (Result r = check_comm(h, "ncclCommGetAsyncError", c); r != Result::success) return r;
  if (!error) return failure(Result::invalid_argument, "ncclCommGetAsyncError : asyncError argument is NULL");
  *error = c->state == CommState::initializing ? Result::in_progress : c->async_error;
  return Result::success;
}

template <class F>
Result comm_query(abi::Comm h, void* out, std::string_view entry, F&& read) {
  std::lock_guard lock(world().mu);
  Comm* c = nullptr;
  if (Result r = check_comm(h, entry, c); r != Result::success) return r;
  if (!out) return failure(Result::invalid_argument, fmt::format("{} : output argument is NULL", entry));
  if (Result r = ensure_ready(c, entry); r != Result::success) return r;
  read(*c);
  return Result::success;
}
Result nccl_comm_count(abi::Comm h, int* count) {
  TETHER_NCCL_ENTER(ncclCommCount);
  return comm_query(h, count, "ncclCommCount", [&](const Comm& c) { *count = c.nranks; });
}
Result nccl_comm_cu_device(abi::Comm h, int* device) {
  TETHER_NCCL_ENTER(ncclCommCuDevice);
  return comm_query(h, device, "ncclCommCuDevice", [&](const Comm& c) { *device = c.device; });
}
Result nccl_comm_user_rank(abi::Comm h, int* rank) {
  TETHER_NCCL_ENTER(ncclCommUserRank);
  return comm_query(h, rank, "ncclCommUserRank", [&](const Comm& c) { *rank = c.rank; });
}

const char* nccl_get_error_string(Result r) {
  (void)nccl_enter(NcclEntry::ncclGetErrorString);
  return error_string(r);
}
const char* nccl_get_last_error(abi::Comm) {
  (void)nccl_enter(NcclEntry::ncclGetLastError);
  // The text is process-global (the communicator is unused, as in NCCL); why a per-thread copy:
  // NCCL returns its global buffer, which a failure on another thread rewrites while it is read.
  thread_local std::string copy;
  LastError& l = last_error();
  std::lock_guard lock(l.mu);
  copy = l.text;
  return copy.c_str();
}

// Validates a collective or point-to-point call and queues it (or runs a one-rank collective),
// as NCCL's ncclEnqueueCheck does, inside an implicit group.
Result enqueue(std::string_view entry, Task task, abi::Comm h, CUstream stream) {
  World& t = world();
  Comm* c = nullptr;
  {
    std::lock_guard lock(t.mu);
    if (Result r = check_comm(h, entry, c); r != Result::success) return group_err_check(r);
  }
  ++t_group.depth;  // ncclGroupStartInternal
  Result ret = Result::success;
  int nranks = 0, rank = 0, device = 0;
  {
    std::lock_guard lock(t.mu);
    ret = ensure_ready(c, entry);
    nranks = c->nranks;
    rank = c->rank;
    device = c->device;
  }
  if (ret == Result::success && (task.peer < 0 || task.peer >= nranks))
    ret =
        failure(Result::invalid_argument, fmt::format("{} : invalid {} {} ({} should be in the 0..{} range)",
                                                      entry, p2p(task.kind) ? "peer" : "root", task.peer,
                                                      p2p(task.kind) ? "peer" : "root", nranks - 1));
  if (ret == Result::success && !valid_type(task.type))
    ret = failure(Result::invalid_argument,
                  fmt::format("{} : invalid type {}", entry, static_cast<int>(task.type)));
  if (ret == Result::success && !valid_op(task.red))
    ret = failure(
        Result::invalid_argument,
        fmt::format(
            "{} : invalid reduction operation {} (the simulator's NCCL has no ncclRedOpCreatePreMulSum "
            "operations)",
            entry, static_cast<int>(task.red)));
  // The buffers: real NCCL checks them only with NCCL_CHECK_POINTERS=1 and otherwise faults at
  // execution; the simulator refuses what could only fault (NULL, or no allocation at all) here.
  // Memory freed since is caught when the operation executes, as for kernels.
  if (ret == Result::success && task.count > 0)
    for (const Use& u : uses(task, rank, nranks)) {
      if (u.at == 0) {
        ret =
            failure(Result::invalid_argument,
                    fmt::format("{} : {} is NULL (real NCCL faults with an illegal address)", entry, u.what));
        break;
      }
      if (classify(u.at, u.bytes, false) == Range::unknown) {
        ret = failure(
            Result::invalid_argument,
            fmt::format("{} : {} {:#x} ({} bytes) is not inside one device or pinned allocation (real NCCL "
                        "faults with an illegal address)",
                        entry, u.what, u.at, u.bytes));
        break;
      }
    }
  if (ret == Result::success) {
    // The stream must be one of the communicator's device (the default streams: of the thread's).
    int stream_device = -1;
    if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
      stream_device = runtime_device();
    } else if (Stream* s = stream_of(stream)) {
      stream_device = s->ctx ? s->ctx->device : -1;
    } else {
      ret = failure(Result::invalid_usage,
                    fmt::format("{} : stream {} is not a live stream", entry, fmt::ptr(stream)));
    }
    if (ret == Result::success && stream_device != device)
      ret = failure(
          Result::invalid_usage,
          fmt::format("{} : the stream belongs to device {} but the communicator (rank {}) to device {}",
                      entry, stream_device, rank, device));
  }
  if (ret == Result::success) {
    for (const Queued& q : t_group.ops)
      if (q.comm == c && q.stream != stream) {
        ret = failure(
            Result::invalid_usage,
            fmt::format("{} : the simulator's NCCL takes one stream per communicator in a group (this group "
                        "already gave rank {} stream {}); real NCCL joins several",
                        entry, rank, fmt::ptr(q.stream)));
        break;
      }
  }
  if (ret == Result::success) {
    if (!p2p(task.kind) && task.count == 0) {
      // Empty collectives are discarded.
    } else if (!p2p(task.kind) && nranks == 1) {
      ret = one_rank(task, stream);
    } else {
      t_group.ops.push_back(Queued{c, stream, task});
    }
  }
  group_err_check(ret);
  if (Result end = group_end_internal(); end != Result::success) return end;
  return ret;
}

Result nccl_all_reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op,
                       abi::Comm comm, CUstream stream) {
  TETHER_NCCL_ENTER(ncclAllReduce);
  return enqueue("ncclAllReduce", Task{Kind::all_reduce, send, recv, count, type, op, 0}, comm, stream);
}
Result nccl_broadcast(const void* send, void* recv, std::size_t count, DataType type, int root,
                      abi::Comm comm, CUstream stream) {
  TETHER_NCCL_ENTER(ncclBroadcast);
  return enqueue("ncclBroadcast", Task{Kind::broadcast, send, recv, count, type, RedOp::sum, root}, comm,
                 stream);
}
Result nccl_reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op, int root,
                   abi::Comm comm, CUstream stream) {
  TETHER_NCCL_ENTER(ncclReduce);
  return enqueue("ncclReduce", Task{Kind::reduce, send, recv, count, type, op, root}, comm, stream);
}
Result nccl_all_gather(const void* send, void* recv, std::size_t send_count, DataType type, abi::Comm comm,
                       CUstream stream) {
  TETHER_NCCL_ENTER(ncclAllGather);
  return enqueue("ncclAllGather", Task{Kind::all_gather, send, recv, send_count, type, RedOp::sum, 0}, comm,
                 stream);
}
Result nccl_reduce_scatter(const void* send, void* recv, std::size_t recv_count, DataType type, RedOp op,
                           abi::Comm comm, CUstream stream) {
  TETHER_NCCL_ENTER(ncclReduceScatter);
  return enqueue("ncclReduceScatter", Task{Kind::reduce_scatter, send, recv, recv_count, type, op, 0}, comm,
                 stream);
}
Result nccl_send(const void* send, std::size_t count, DataType type, int peer, abi::Comm comm,
                 CUstream stream) {
  TETHER_NCCL_ENTER(ncclSend);
  return enqueue("ncclSend", Task{Kind::send, send, nullptr, count, type, RedOp::sum, peer}, comm, stream);
}
Result nccl_recv(void* recv, std::size_t count, DataType type, int peer, abi::Comm comm, CUstream stream) {
  TETHER_NCCL_ENTER(ncclRecv);
  return enqueue("ncclRecv", Task{Kind::recv, nullptr, recv, count, type, RedOp::sum, peer}, comm, stream);
}

Result nccl_group_start() {
  TETHER_NCCL_ENTER(ncclGroupStart);
  ++t_group.depth;
  return Result::success;
}
Result nccl_group_end() {
  TETHER_NCCL_ENTER(ncclGroupEnd);
  return group_end_internal();
}

Result nccl_comm_register(abi::Comm h, void* buffer, std::size_t size, void** out) {
  TETHER_NCCL_ENTER(ncclCommRegister);
  std::lock_guard lock(world().mu);
  Comm* c = nullptr;
  if (Result r = check_comm(h, "ncclCommRegister", c); r != Result::success) return r;
  if (!out)
    return failure(Result::invalid_argument,
                   "ncclCommRegister : handle argument is NULL (real NCCL writes through it)");
  // NCCL's registration cache: page-rounded ranges; a range already covered gets a reference more.
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto at = reinterpret_cast<std::uintptr_t>(buffer);
  const std::uintptr_t begin = at & ~(page - 1), end = (at + size + page - 1) & ~(page - 1);
  for (const auto& reg : c->regs)
    if (reg->begin <= begin && reg->end >= end) {
      ++reg->refs;
      *out = reg.get();
      return Result::success;
    }
  c->regs.push_back(std::make_unique<Registration>(Registration{begin, end, 1}));
  *out = c->regs.back().get();
  return Result::success;
}

Result nccl_comm_deregister(abi::Comm h, void* registration) {
  TETHER_NCCL_ENTER(ncclCommDeregister);
  int device = 0;
  {
    std::lock_guard lock(world().mu);
    Comm* c = nullptr;
    if (Result r = check_comm(h, "ncclCommDeregister", c); r != Result::success) return r;
    if (!registration) return Result::success;
    device = c->device;
  }
  // NCCL's commDeregister switches to the communicator's device and switches back only at the end
  // of a full deregistration (its early returns leave the thread on the communicator's device).
  const int saved = runtime_device();
  set_device(device);
  std::lock_guard lock(world().mu);
  Comm* c = comm_of(h);
  if (gone(c->state))
    return failure(Result::invalid_argument, "ncclCommDeregister : comm was destroyed meanwhile");
  auto it =
      std::find_if(c->regs.begin(), c->regs.end(), [&](const auto& r) { return r.get() == registration; });
  if (it == c->regs.end()) return failure(Result::invalid_usage, "Deregister: Could not find handle");
  if (--(*it)->refs > 0) return Result::success;
  c->regs.erase(it);
  set_device(saved);
  return Result::success;
}

Result nccl_mem_alloc(void** ptr, std::size_t size) {
  TETHER_NCCL_ENTER(ncclMemAlloc);
  // NCCL falls back to cudaMalloc for these: cudaMalloc(NULL) fails, cudaMalloc of 0 bytes gives NULL.
  if (!ptr)
    return failure(Result::unhandled_cuda_error,
                   "Cuda failure 1 'invalid argument' in cudaMalloc(NULL, size)");
  if (size == 0) {
    *ptr = nullptr;
    return Result::success;
  }
  const int device = runtime_device();
  const std::size_t bytes = (size + kMemGranularity - 1) / kMemGranularity * kMemGranularity;
  { std::lock_guard gate(memory_gate()); }  // as cuMemAlloc: waits behind a cuMemFree blocked by a callback
  CUresult err = CUDA_SUCCESS;
  std::uintptr_t p = device_alloc(bytes, device, err);
  if (err != CUDA_SUCCESS)
    return failure(Result::unhandled_cuda_error,
                   fmt::format("Cuda failure {} '{}' in cuMemCreate of {} bytes on device {}",
                               static_cast<int>(err), result_name(static_cast<int>(err)), bytes, device));
  {
    std::lock_guard lock(world().mu);
    world().allocations[p] = bytes;
  }
  *ptr = reinterpret_cast<void*>(p);
  return Result::success;
}

Result nccl_mem_free(void* ptr) {
  TETHER_NCCL_ENTER(ncclMemFree);
  // NCCL saves the thread's device and sets it again on every way out.
  struct Restore {
    int device;
    ~Restore() { set_device(device); }
  } restore{runtime_device()};
  if (!ptr) return Result::success;  // cudaFree(NULL)
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  {
    std::lock_guard lock(world().mu);
    auto it = world().allocations.find(p);
    if (it != world().allocations.end()) {
      world().allocations.erase(it);
      device_free_block(p);
      return Result::success;
    }
  }
  if (classify(p, 1, true) == Range::freed) {
    record_violation(ViolationKind::use_after_free, "ncclMemFree",
                     fmt::format("ncclMemFree of device memory {:#x} that was already freed", p));
    return failure(
        Result::unhandled_cuda_error,
        fmt::format("Cuda failure 1 'invalid argument' in cuPointerGetAttribute({:#x}): freed already", p));
  }
  return failure(
      Result::unhandled_cuda_error,
      fmt::format("Cuda failure 1 'invalid argument' in cuMemRetainAllocationHandle({:#x}): ncclMemFree of "
                  "memory that ncclMemAlloc did not allocate",
                  p));
}

}  // namespace

void nccl_clear_faults() noexcept {
  Faults& f = faults();
  std::lock_guard lock(f.mu);
  f.pending.fetch_sub(static_cast<int>(f.list.size()));
  f.list.clear();
}

void nccl_reset_call_counts() noexcept {
  for (auto& c : calls().count) c.store(0, std::memory_order_relaxed);
}

}  // namespace tether::sim::detail

// ============================================================================= public API

namespace tether::sim {

using namespace detail;

namespace {
std::optional<std::size_t> find_nccl_entry(std::string_view name) {
  for (std::size_t i = 0; i < tether::detail::nccl_entry_count; ++i)
    if (tether::detail::nccl_entry_names[i] == name) return i;
  return std::nullopt;
}
}  // namespace

void fail_nccl_call(std::string_view entry, std::uint64_t nth, int nccl_result) {
  if (nth == 0) throw UsageError("tether::sim::fail_nccl_call: nth counts from 1");
  if (nccl_result < 1 || nccl_result > 7)
    throw UsageError(
        fmt::format("tether::sim::fail_nccl_call: {} is not a failing ncclResult_t (1..7)", nccl_result));
  int idx = -1;
  if (entry != "*") {
    auto e = find_nccl_entry(entry);
    if (!e)
      throw UsageError(
          fmt::format("tether::sim::fail_nccl_call: '{}' is not an NCCL entry point tether uses", entry));
    if (returns_text(static_cast<NcclEntry>(*e)))
      throw UsageError(fmt::format("tether::sim::fail_nccl_call: {} returns text and cannot fail", entry));
    idx = static_cast<int>(*e);
  }
  Faults& f = faults();
  std::lock_guard lock(f.mu);
  f.list.push_back(Fault{idx, nth, static_cast<Result>(nccl_result)});
  f.pending.fetch_add(1, std::memory_order_release);
}

std::uint64_t nccl_call_count(std::string_view entry) {
  if (entry == "*") {
    std::uint64_t n = 0;
    for (auto& c : calls().count) n += c.load(std::memory_order_relaxed);
    return n;
  }
  auto e = find_nccl_entry(entry);
  if (!e)
    throw UsageError(
        fmt::format("tether::sim::nccl_call_count: '{}' is not an NCCL entry point tether uses", entry));
  return calls().count[*e].load(std::memory_order_relaxed);
}

void inject_nccl_async_error(::ncclComm* comm, int nccl_result) {
  if (nccl_result < 0 || nccl_result > 7)
    throw UsageError(
        fmt::format("tether::sim::inject_nccl_async_error: {} is not an ncclResult_t (0..7)", nccl_result));
  World& t = world();
  std::lock_guard lock(t.mu);
  Comm* c = comm_of(comm);
  if (!c || !t.comms.count(c) || gone(c->state))
    throw UsageError("tether::sim::inject_nccl_async_error: not a live communicator of the simulator's NCCL");
  c->async_error = static_cast<Result>(nccl_result);
}

NcclStats nccl_stats() {
  World& t = world();
  std::lock_guard lock(t.mu);
  NcclStats s;
  for (const Comm* c : t.comms) {
    if (c->state == CommState::freed || c->state == CommState::failed) continue;
    ++s.communicators;
    s.persistent_refs += static_cast<std::size_t>(c->persistent_refs);
    s.launches_in_flight += static_cast<std::size_t>(c->in_flight);
    s.registrations += c->regs.size();
  }
  s.cliques = t.cliques.size();
  s.destroys_waiting = static_cast<std::size_t>(t.destroys_waiting);
  s.allocations = t.allocations.size();
  return s;
}

}  // namespace tether::sim

namespace tether::detail {

const NcclTable& simulated_nccl_table() {
  static const NcclTable* table = [] {
    auto* t = new NcclTable{};
    t->ncclGetVersion = &sim::detail::nccl_get_version;
    t->ncclGetUniqueId = &sim::detail::nccl_get_unique_id;
    t->ncclCommInitRank = &sim::detail::nccl_comm_init_rank;
    t->ncclCommInitAll = &sim::detail::nccl_comm_init_all;
    t->ncclCommDestroy = &sim::detail::nccl_comm_destroy;
    t->ncclCommAbort = &sim::detail::nccl_comm_abort;
    t->ncclCommGetAsyncError = &sim::detail::nccl_comm_get_async_error;
    t->ncclCommCount = &sim::detail::nccl_comm_count;
    t->ncclCommCuDevice = &sim::detail::nccl_comm_cu_device;
    t->ncclCommUserRank = &sim::detail::nccl_comm_user_rank;
    t->ncclGetErrorString = &sim::detail::nccl_get_error_string;
    t->ncclGetLastError = &sim::detail::nccl_get_last_error;
    t->ncclAllReduce = &sim::detail::nccl_all_reduce;
    t->ncclBroadcast = &sim::detail::nccl_broadcast;
    t->ncclReduce = &sim::detail::nccl_reduce;
    t->ncclAllGather = &sim::detail::nccl_all_gather;
    t->ncclReduceScatter = &sim::detail::nccl_reduce_scatter;
    t->ncclSend = &sim::detail::nccl_send;
    t->ncclRecv = &sim::detail::nccl_recv;
    t->ncclGroupStart = &sim::detail::nccl_group_start;
    t->ncclGroupEnd = &sim::detail::nccl_group_end;
    t->ncclCommRegister = &sim::detail::nccl_comm_register;
    t->ncclCommDeregister = &sim::detail::nccl_comm_deregister;
    t->ncclMemAlloc = &sim::detail::nccl_mem_alloc;
    t->ncclMemFree = &sim::detail::nccl_mem_free;
    t->provided.fill(true);
    t->simulated = true;
    t->origin = "tether simulator";
    t->version = sim::detail::kVersion;
    return t;
  }();
  return *table;
}

}  // namespace tether::detail
