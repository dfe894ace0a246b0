// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// NCCL collectives whose communicators, buffers and registrations the graphs own (docs/multi-gpu.md).
// NCCL is loaded at run time like the driver (library.cpp); with the simulated driver its twin
// serves the same table (sim/nccl.cpp). No tether header needs nccl.h.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../capture/capture.hpp"
#include "../resources/buffer.hpp"
#include "types.hpp"

struct ncclComm;  // nccl.h's opaque communicator (`ncclComm_t` is `ncclComm*`)

namespace tether::detail {
struct CommState;
struct Registration;
struct NcclTable;
struct GroupAccess;
}  // namespace tether::detail

TETHER_EXPORT namespace tether::nccl {

/// The `std::error_category` of NCCL results ("nccl"); `message(ev)` is NCCL's own text for the
/// result (`ncclGetErrorString`'s, built in: no library needed). Thread safety: immutable.
const std::error_category& nccl_category() noexcept;
/// An `std::error_code` in `nccl_category()`; found by ADL, so `Errc` converts implicitly.
std::error_code make_error_code(Errc e) noexcept;
/// NCCL's name of a result: "ncclInvalidUsage", or "ncclResult <value>" for one NCCL 2.28 does
/// not define.
std::string_view result_name(int result) noexcept;

/// An NCCL call failed. Carries the entry point ("ncclAllReduce"), the result in
/// `nccl_category()`, NCCL's last error text (`ncclGetLastError`, often the actual reason) and what
/// tether was doing. `what()` reads "ncclAllReduce failed with ncclInvalidUsage (5: invalid usage
/// (run with NCCL_DEBUG=WARN for details)) while all_reduce of 1024 float32 (sum) on rank 0 of 2
/// (device 0); NCCL: <last error>". Thread safety: immutable after construction.
class Error : public std::system_error {
 public:
  Error(std::string_view entry_point, int result, std::string last_error, std::string context);
  /// The NCCL entry point that failed, e.g. "ncclCommInitRank".
  std::string_view entry_point() const noexcept { return entry_point_; }
  /// The numeric `ncclResult_t`.
  int result() const noexcept { return code().value(); }
  /// "ncclInvalidUsage".
  std::string_view result_name() const noexcept { return nccl::result_name(result()); }
  /// NCCL's text about the failure (`ncclGetLastError` right after it; empty if it said nothing).
  std::string_view last_error() const noexcept { return last_error_; }
  /// What tether was doing.
  std::string_view context() const noexcept { return context_; }
  /// The whole message (see the class comment).
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string entry_point_;
  std::string last_error_;
  std::string context_;
  std::string message_;
};

/// NCCL cannot be used: the library is missing (`reason() == Unavailable::missing_library`), lacks
/// an entry point tether needs (`missing_entry`), or is older than tether or a feature needs
/// (`too_old`). The message says what was tried and what to do.
class Unavailable : public std::runtime_error {
 public:
  Unavailable(tether::Unavailable reason, const std::string& message);
  tether::Unavailable reason() const noexcept { return reason_; }

 private:
  tether::Unavailable reason_;
};

/// The NCCL a runtime uses, loaded on first use: with the real driver `dlopen("libnccl.so.2")` (or
/// the path in `TETHER_NCCL_LIBRARY`) and every entry point through `dlsym`; with the simulator its
/// NCCL twin. Loaded once per process and never unloaded. Throws Unavailable. Thread safety: safe.
/// "NCCL 2.28.9 from libnccl.so.2" or "NCCL 2.28.9 (tether simulator)".
std::string describe(const Runtime& rt);
/// `ncclGetVersion`'s code of that NCCL (22809 for 2.28.9). Throws Unavailable.
int version(const Runtime& rt);

/// "float32", ...
std::string_view to_string(DataType t) noexcept;

/// Storage types for NCCL's 16- and 8-bit floating-point elements (the bits only: use them to
/// type buffers whose kernels use `__half`, `__nv_bfloat16`, `__nv_fp8_e4m3`, `__nv_fp8_e5m2`).
struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};
struct Float8E4M3 {
  std::uint8_t bits;
};
struct Float8E5M2 {
  std::uint8_t bits;
};

/// The NCCL element type of `T`, as `value`: defined for the fixed-width integers, `float`,
/// `double`, `std::byte` (uint8) and the storage types above. Specialize it for a type of your own
/// of the same representation (a `__half` in a .cu file: `DataType::float16`).
template <class T>
struct ElementType {};
template <>
struct ElementType<std::int8_t> : std::integral_constant<DataType, DataType::int8> {};
template <>
struct ElementType<std::uint8_t> : std::integral_constant<DataType, DataType::uint8> {};
template <>
struct ElementType<std::byte> : std::integral_constant<DataType, DataType::uint8> {};
template <>
struct ElementType<std::int32_t> : std::integral_constant<DataType, DataType::int32> {};
template <>
struct ElementType<std::uint32_t> : std::integral_constant<DataType, DataType::uint32> {};
template <>
struct ElementType<std::int64_t> : std::integral_constant<DataType, DataType::int64> {};
template <>
struct ElementType<std::uint64_t> : std::integral_constant<DataType, DataType::uint64> {};
template <>
struct ElementType<float> : std::integral_constant<DataType, DataType::float32> {};
template <>
struct ElementType<double> : std::integral_constant<DataType, DataType::float64> {};
template <>
struct ElementType<Half> : std::integral_constant<DataType, DataType::float16> {};
template <>
struct ElementType<BFloat16> : std::integral_constant<DataType, DataType::bfloat16> {};
template <>
struct ElementType<Float8E4M3> : std::integral_constant<DataType, DataType::float8e4m3> {};
template <>
struct ElementType<Float8E5M2> : std::integral_constant<DataType, DataType::float8e5m2> {};

/// A type NCCL can move and reduce: one with an `ElementType`.
template <class T>
concept Element = requires { ElementType<std::remove_cv_t<T>>::value; };

/// "sum", ...
std::string_view to_string(ReduceOp op) noexcept;

/// "All the elements": the default `count` of a collective (what its buffer holds; for
/// all_gather the send buffer's size, for reduce_scatter the receive buffer's).
inline constexpr std::size_t whole = std::numeric_limits<std::size_t>::max();

/// The identity of one communicator, shared by its ranks before they join (`ncclUniqueId`, 128
/// bytes). One process makes it (`generate`) and hands it to every rank however it likes: as bytes
/// or as hex text, over a socket, a file, MPI, an environment variable. A default-constructed id
/// is the empty one (all zero; `operator bool` false), which no communicator accepts.
class UniqueId {
 public:
  static constexpr std::size_t size = 128;  ///< NCCL_UNIQUE_ID_BYTES
  /// The empty id.
  UniqueId() noexcept = default;
  /// A new id (`ncclGetUniqueId`: it opens NCCL's bootstrap listener in this process, which
  /// needs no GPU). Throws Unavailable, Error.
  static UniqueId generate(const Runtime& rt);
  /// An id from its 128 bytes. Throws UsageError if `bytes` holds another number of bytes.
  static UniqueId from_bytes(std::span<const std::byte> bytes);
  /// An id from `to_hex`'s 256 hexadecimal digits (either case). Throws UsageError naming the first
  /// character that is not a hex digit, or the length.
  static UniqueId from_hex(std::string_view hex);
  /// The 128 bytes.
  std::span<const std::byte, size> bytes() const noexcept { return bytes_; }
  /// The bytes as 256 lowercase hexadecimal digits.
  std::string to_hex() const;
  /// Whether the id is not the empty one.
  explicit operator bool() const noexcept;
  friend bool operator==(const UniqueId& a, const UniqueId& b) noexcept { return a.bytes_ == b.bytes_; }

 private:
  std::array<std::byte, size> bytes_{};
};

/// How a communicator watches its work (docs/multi-gpu.md, "Failing fast").
struct CommunicatorOptions {
  /// The watchdog: when non-zero, every collective issued on a stream outside capture, and every
  /// launch of an executable whose graph holds a collective on this communicator, must finish
  /// within this time after it was queued; if it has not (a rank died or never came), tether
  /// aborts the communicator (`ncclCommAbort`, which makes NCCL's kernels return), reports what it
  /// did through the error hook, and every later use throws saying why. Zero (the default): no
  /// watchdog, as NCCL itself.
  std::chrono::milliseconds watchdog{0};
  /// Before an executable's first launch, the ranks compare the collectives on this communicator
  /// that their executables hold (NCCL requires every rank to capture the same sequence): a
  /// mismatch throws UsageError on every rank, naming the first difference, instead of a hang.
  /// The comparison is itself a collective (an all-gather on the communicator), so every rank must
  /// launch an executable holding collectives on it. Off by default.
  bool check_sequences = false;
};

template <class T>
class RegisteredBuffer;
class Group;

/// One rank of an NCCL communicator on one device (`ncclComm_t`), owned by every graph node,
/// executable and stream operation that uses it: the communicator lives as long as any graph,
/// executable or launch that captured or queued work on it may still run, and is then destroyed
/// on a thread of its own (`ncclCommDestroy`, or `ncclCommAbort` for one that failed), never on
/// the caller's: dropping the last handle never blocks and never hangs, in any order of drops.
///
/// Collectives (`all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `reduce`, `send`,
/// `recv`) take tether buffers typed by their element type (no `ncclDataType_t` by hand): a
/// `SharedBuffer<T>` or a `RegisteredBuffer<T>` of the communicator's device. They are stream
/// work: outside capture they keep the communicator and their buffers until the stream has run
/// them; inside a stream capture the captured node keeps them (the handle is returned; anonymously
/// on the graph where the node cannot be identified). Every argument is checked before NCCL is
/// called (UsageError naming it), and a communicator that reported an asynchronous error, or was
/// aborted, is refused with an Error or UsageError saying so.
///
/// Empty state: default-constructed or moved from: `operator bool` is false and every member but
/// the queries of emptiness throws UsageError. Thread safety: the handle is a shared reference (a
/// copy is the same communicator); its members may be called from any thread, and tether
/// serialises its NCCL calls on one communicator (NCCL does not allow concurrent calls on one).
/// Inside a host callback the members that call NCCL or the driver (creation, collectives,
/// `async_error`, `register_buffer`) throw UsageError; the queries and `abort` (whose NCCL call
/// runs on a thread of its own) answer there too.
class Communicator {
 public:
  /// What `inspect` shows for a communicator a node owns: "Communicator rank 0 of 2 (device 0)".
  friend std::string tether_owner_label(const Communicator& c);

  /// An empty communicator.
  Communicator() noexcept = default;

  /// Joins rank `rank` of the `size`-rank communicator `id` on `ctx`'s device
  /// (`ncclCommInitRank`, with the context current and the caller's restored after; blocks until
  /// every rank has joined, as NCCL does). One GPU per process is NCCL's recommendation and the
  /// way past one machine. Throws UsageError (an empty id, `size` < 1, `rank` out of
  /// range), Unavailable, Error (NCCL's reason: two ranks on one device, a bootstrap failure).
  static Communicator create(const Context& ctx, const UniqueId& id, int size, int rank,
                             const CommunicatorOptions& options = {});
  /// One communicator over several devices of this process, rank i on `contexts[i]`
  /// (`ncclCommInitAll`). A thread that issues collectives on several of them must group them
  /// (`nccl::group`). Throws UsageError (no context, two of one device, contexts of
  /// two runtimes), Unavailable, Error.
  static std::vector<Communicator> create_all(std::span<const Context> contexts,
                                              const CommunicatorOptions& options = {});

  /// Whether this handle names a communicator.
  explicit operator bool() const noexcept { return s_ != nullptr; }
  /// This rank (`ncclCommUserRank`, read at creation). Throws UsageError when empty.
  int rank() const;
  /// The number of ranks (`ncclCommCount`, read at creation). Throws UsageError when empty.
  int size() const;
  /// The context of its device. Throws UsageError when empty.
  Context context() const;
  /// The NCCL handle (`ncclComm_t`; null when empty), for raw NCCL calls through the same library:
  /// tether does not see them (they are not owned, and NCCL's own rules apply).
  ::ncclComm* get() const noexcept;
  /// The options it was made with. Throws UsageError when empty.
  const CommunicatorOptions& options() const;

  /// NCCL's asynchronous error of the communicator (`ncclCommGetAsyncError`): Errc::success while
  /// it works; a network failure or a dead peer shows here. Throws UsageError when empty, Error.
  Errc async_error() const;
  /// Aborts the communicator now (`ncclCommAbort`, on a thread of its own: NCCL's kernels in flight
  /// return and the call itself may wait for graphs): every later collective, and every launch of
  /// an executable holding a collective on it, throws UsageError quoting `why`. The handle and the
  /// graphs stay valid (nothing is freed under them). Idempotent. Throws UsageError when empty.
  void abort(std::string_view why = "Communicator::abort") const;
  /// Whether it was aborted (by `abort` or the watchdog), and why ("" if not).
  bool aborted() const;
  std::string abort_reason() const;

  /// Sums (or `op`s) `count` elements of every rank's `send` into every rank's `recv`
  /// (`ncclAllReduce`); `send` and `recv` may be the same buffer (in place). Default `count`: the
  /// send buffer's size.
  template <class S, class R>
  Node<> all_reduce(const Stream& stream, const S& send, const R& recv, ReduceOp op = ReduceOp::sum,
                    std::size_t count = whole) const;
  /// Every rank's `count` elements of `send` side by side, in rank order, into every rank's
  /// `recv` (`ncclAllGather`; `recv` holds `count * size()`). Default `count`: the send buffer's size.
  template <class S, class R>
  Node<> all_gather(const Stream& stream, const S& send, const R& recv, std::size_t count = whole) const;
  /// The reduction of every rank's `send` (`count * size()` elements), rank r receiving the r-th
  /// block of `count` (`ncclReduceScatter`). Default `count`: the receive buffer's size.
  template <class S, class R>
  Node<> reduce_scatter(const Stream& stream, const S& send, const R& recv, ReduceOp op = ReduceOp::sum,
                        std::size_t count = whole) const;
  /// Rank `root`'s `send` into every rank's `recv` (`ncclBroadcast`; `send` is read on the root
  /// only). Default `count`: the receive buffer's size.
  template <class S, class R>
  Node<> broadcast(const Stream& stream, const S& send, const R& recv, int root, std::size_t count = whole) const;
  /// The reduction of every rank's `send` into rank `root`'s `recv` (`ncclReduce`; `recv` is
  /// written on the root only). Default `count`: the send buffer's size.
  template <class S, class R>
  Node<> reduce(const Stream& stream, const S& send, const R& recv, int root, ReduceOp op = ReduceOp::sum,
                std::size_t count = whole) const;
  /// Sends `count` elements of `send` to rank `peer` (`ncclSend`), which receives them with `recv`.
  /// A send and the receive it pairs with on the same thread must be grouped (`nccl::group`).
  template <class S>
  Node<> send(const Stream& stream, const S& send, int peer, std::size_t count = whole) const;
  /// Receives `count` elements from rank `peer` into `recv` (`ncclRecv`).
  template <class R>
  Node<> recv(const Stream& stream, const R& recv, int peer, std::size_t count = whole) const;

  /// Registers `buffer` with the communicator (`ncclCommRegister`: NCCL may then use it without
  /// copies). The registration is an owner like the buffer: it is deregistered
  /// (`ncclCommDeregister`, off the caller's thread) once the last RegisteredBuffer copy and every
  /// graph, executable and operation that used it are gone — never under a consumer. Throws
  /// UsageError (empty, a buffer of another device), Unavailable (NCCL older than 2.19), Error.
  template <class T>
  RegisteredBuffer<T> register_buffer(const SharedBuffer<T>& buffer) const;

 private:
  friend struct detail::CommState;
  friend class Group;
  template <class T>
  friend class RegisteredBuffer;
  friend struct CommunicatorAccess;
  explicit Communicator(std::shared_ptr<detail::CommState> s) noexcept : s_(std::move(s)) {}
  std::shared_ptr<detail::CommState> s_;
};

/// A buffer registered with a communicator (`Communicator::register_buffer`): the buffer, the
/// registration and the communicator, kept together by every copy and every consumer. Passed to
/// collectives of that communicator where a SharedBuffer goes. Empty when default-constructed or
/// moved from. Thread safety: as SharedBuffer (a copyable handle).
template <class T>
class RegisteredBuffer {
 public:
  /// "RegisteredBuffer<float>[1024] on Communicator rank 0 of 2 (device 0)".
  friend std::string tether_owner_label(const RegisteredBuffer& b) {
    return "Registered" + tether_owner_label(b.buffer_).substr(std::string_view("Shared").size()) + " on " +
           tether_owner_label(b.communicator());
  }
  /// Its buffer's memory, once.
  friend void tether_owner_memory(const RegisteredBuffer& b, detail::MemoryTally& t) {
    tether_owner_memory(b.buffer_, t);
  }
  using value_type = T;
  RegisteredBuffer() noexcept = default;
  /// The buffer.
  const SharedBuffer<T>& buffer() const noexcept { return buffer_; }
  /// The communicator it is registered with (empty when this is).
  Communicator communicator() const noexcept;
  /// The device address (null when empty) and size, as the buffer's.
  T* data() const noexcept { return buffer_.data(); }
  std::size_t size() const noexcept { return buffer_.size(); }
  explicit operator bool() const noexcept { return reg_ != nullptr; }

 private:
  friend class Communicator;
  RegisteredBuffer(SharedBuffer<T> b, std::shared_ptr<const detail::Registration> r) noexcept
      : buffer_(std::move(b)), reg_(std::move(r)) {}
  SharedBuffer<T> buffer_;
  std::shared_ptr<const detail::Registration> reg_;
};

/// NCCL group semantics as a scope (`ncclGroupStart` at the first collective inside it,
/// `ncclGroupEnd` in `end`): the collectives issued on this thread while it lives are launched
/// together at `end` — what a send paired with a receive on the same thread, and collectives of
/// several communicators of one thread (`create_all`), need. Groups nest (the outermost end
/// launches). Their operations keep their owners as ungrouped ones do, attached at `end` (inside a
/// capture: to each stream's captured node where one is identified, else to the graph). Not
/// movable: it belongs to the scope and thread that made it.
///
/// Dropping a Group that was not ended ends it (NCCL then launches what was queued; an error is
/// reported through the error hook, since a destructor cannot throw). Thread safety: one thread.
class Group {
 public:
  Group() noexcept;
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  /// Launches what the group queued (the outermost group's end: `ncclGroupEnd`) and attaches its
  /// owners. Throws UsageError if already ended or if an inner group is still open, Error (the
  /// owners are kept all the same: NCCL may have launched part of the group).
  void end();

 private:
  friend struct detail::GroupAccess;
  Group* outer_ = nullptr;
  bool ended_ = false;
  struct Pending;
  std::unique_ptr<Pending> pending_;
};

/// `Group g; fn(); g.end();`: the collectives `fn` issues on this thread, launched together.
template <class F>
void group(F&& fn) {
  Group g;
  std::forward<F>(fn)();
  g.end();
}

/// `count` elements of `T` from NCCL's allocator (`ncclMemAlloc`, with `ctx` current: memory NCCL
/// can register for copy-free transfers; the allocation is rounded up to the device's granularity,
/// 2 MiB on an H200), as a DeviceBuffer usable everywhere one is. When its last owner goes — after
/// every graph, executable and operation that used it — it is freed with `ncclMemFree` on tether's
/// NCCL thread (never on the caller's). Throws UsageError (0 or an overflowing count, inside a host
/// callback), Unavailable (NCCL older than 2.19), Error. Thread safety: safe.
template <class T>
DeviceBuffer<T> alloc(const Context& ctx, std::size_t count);

/// Waits until every communicator whose last owner is gone has been destroyed by NCCL (its
/// closing threads are done), or until `timeout`; returns whether none is left. For tests and
/// shutdown: run `tether::reclaim()` first, so that owners queued on the reclaimer are released.
bool wait_closed(std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// Communicators alive (with an owner) and closing (being destroyed by NCCL) now.
struct CommunicatorCounts {
  std::size_t alive = 0;
  std::size_t closing = 0;
};
CommunicatorCounts communicator_counts() noexcept;

}  // namespace tether::nccl

namespace tether::detail {

/// What a collective is, for checks, labels and sequence checks.
enum class CollectiveKind : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, reduce, send, recv };

/// One operand: a device buffer's address and element count, and its context (null for none).
struct NcclOperand {
  CUdeviceptr address = 0;
  std::size_t elements = 0;
  const ContextState* ctx = nullptr;
};

/// A collective as the templates describe it to nccl.cpp.
struct CollectiveCall {
  CollectiveKind kind;
  nccl::DataType type;
  std::size_t element_size;
  nccl::ReduceOp op;
  int root_or_peer;  // broadcast, reduce: the root; send, recv: the peer; else -1
  std::size_t count;
  NcclOperand send;
  NcclOperand recv;
};

/// Checks `c`, then issues it on `stream` keeping `owners` (and the communicator) as stream work
/// keeps its owners; inside a Group, queues it there. `what` is the member's name.
NodeRef nccl_collective(const std::shared_ptr<CommState>& comm, const Stream& stream, CollectiveCall c, Owners&& owners,
                        const char* what);

/// Registers [address, address + bytes) (`ncclCommRegister`); the registration deregisters when
/// it dies.
std::shared_ptr<const Registration> nccl_register(const std::shared_ptr<CommState>& comm, const ContextState* buffer_ctx,
                                                  CUdeviceptr address, std::size_t bytes, const char* what);
/// `bytes` of NCCL memory (ncclMemAlloc) on `ctx`'s device, freed with ncclMemFree. `type` names
/// the element type in errors.
DeviceMemory nccl_mem_alloc(const Context& ctx, std::size_t count, std::size_t elem_size, std::string_view type);
struct BufferMaker {
  template <class T>
  static DeviceBuffer<T> make(DeviceMemory m) noexcept {
    return DeviceBuffer<T>(std::move(m));
  }
};
/// The communicator of a registration.
std::shared_ptr<CommState> registration_comm(const Registration& r) noexcept;
/// Throws UsageError for an empty communicator handle (`what` names the member).
void check_comm(const CommState* comm, const char* what);
/// Throws UsageError "`what`: the `role` buffer is empty".
[[noreturn]] void throw_empty_operand(const char* what, const char* role);
/// The context state of a buffer's memory (null when empty).
const ContextState* buffer_context(const Context& c) noexcept;

/// How a collective takes its buffers: SharedBuffer<T> and RegisteredBuffer<T>.
template <class B>
struct NcclBuffer;
template <class T>
struct NcclBuffer<SharedBuffer<T>> {
  using element = T;
  static NcclOperand view(const SharedBuffer<T>& b, const char* what, const char* role) {
    if (!b) throw_empty_operand(what, role);
    return {b.address(), b.size(), buffer_context(b.context())};
  }
  static const SharedBuffer<T>& keep(const SharedBuffer<T>& b) noexcept { return b; }
};
template <class T>
struct NcclBuffer<nccl::RegisteredBuffer<T>> {
  using element = T;
  static NcclOperand view(const nccl::RegisteredBuffer<T>& b, const char* what, const char* role) {
    if (!b) throw_empty_operand(what, role);
    return {reinterpret_cast<CUdeviceptr>(b.data()), b.size(), buffer_context(b.buffer().context())};
  }
  static const nccl::RegisteredBuffer<T>& keep(const nccl::RegisteredBuffer<T>& b) noexcept { return b; }
};

template <class B>
concept NcclBufferType = requires { typename NcclBuffer<std::remove_cvref_t<B>>::element; };

template <class B>
using NcclElement = typename NcclBuffer<std::remove_cvref_t<B>>::element;

template <class S, class R>
consteval void check_collective_buffers() {
  static_assert(NcclBufferType<S> && NcclBufferType<R>,
                "nccl collectives take tether buffers: a SharedBuffer<T> or a RegisteredBuffer<T> (share a "
                "DeviceBuffer first: std::move(buffer).share())");
  if constexpr (NcclBufferType<S> && NcclBufferType<R>) {
    static_assert(std::is_same_v<NcclElement<S>, NcclElement<R>>,
                  "nccl collectives: the send and receive buffers must have the same element type");
    static_assert(nccl::Element<NcclElement<S>>,
                  "nccl collectives: NCCL has no data type for this element type (specialize "
                  "tether::nccl::ElementType for a type of the same representation as one of NCCL's)");
  }
}

template <class S, class R>
CollectiveCall make_call(CollectiveKind kind, const S& send, const R& recv, nccl::ReduceOp op, int root,
                         std::size_t count, const char* what) {
  using T = NcclElement<S>;
  return CollectiveCall{kind,
                        nccl::ElementType<std::remove_cv_t<T>>::value,
                        sizeof(T),
                        op,
                        root,
                        count,
                        NcclBuffer<std::remove_cvref_t<S>>::view(send, what, "send"),
                        NcclBuffer<std::remove_cvref_t<R>>::view(recv, what, "receive")};
}

}  // namespace tether::detail

TETHER_EXPORT namespace tether::nccl {

template <class S, class R>
Node<> Communicator::all_reduce(const Stream& stream, const S& send, const R& recv, ReduceOp op, std::size_t count) const {
  detail::check_collective_buffers<S, R>();
  constexpr const char* what = "Communicator::all_reduce";
  detail::check_comm(s_.get(), what);
  detail::CollectiveCall c = detail::make_call(detail::CollectiveKind::all_reduce, send, recv, op, -1, count, what);
  using SB = detail::NcclBuffer<std::remove_cvref_t<S>>;
  using RB = detail::NcclBuffer<std::remove_cvref_t<R>>;
  return detail::NodeAccess::make<AnyKind>(
      detail::nccl_collective(s_, stream, c, Owners{SB::keep(send), RB::keep(recv)}, what));
}

template <class S, class R>
Node<> Communicator::all_gather(const Stream& stream, const S& send, const R& recv, std::size_t count) const {
  detail::check_collective_buffers<S, R>();
  constexpr const char* what = "Communicator::all_gather";
  detail::check_comm(s_.get(), what);
  detail::CollectiveCall c =
      detail::make_call(detail::CollectiveKind::all_gather, send, recv, ReduceOp::sum, -1, count, what);
  using SB = detail::NcclBuffer<std::remove_cvref_t<S>>;
  using RB = detail::NcclBuffer<std::remove_cvref_t<R>>;
  return detail::NodeAccess::make<AnyKind>(
      detail::nccl_collective(s_, stream, c, Owners{SB::keep(send), RB::keep(recv)}, what));
}

template <class S, class R>
Node<> Communicator::reduce_scatter(const Stream& stream, const S& send, const R& recv, ReduceOp op,
                                    std::size_t count) const {
  detail::check_collective_buffers<S, R>();
  constexpr const char* what = "Communicator::reduce_scatter";
  detail::check_comm(s_.get(), what);
  detail::CollectiveCall c = detail::make_call(detail::CollectiveKind::reduce_scatter, send, recv, op, -1, count, what);
  using SB = detail::NcclBuffer<std::remove_cvref_t<S>>;
  using RB = detail::NcclBuffer<std::remove_cvref_t<R>>;
  return detail::NodeAccess::make<AnyKind>(
      detail::nccl_collective(s_, stream, c, Owners{SB::keep(send), RB::keep(recv)}, what));
}

template <class S, class R>
Node<> Communicator::broadcast(const Stream& stream, const S& send, const R& recv, int root, std::size_t count) const {
  detail::check_collective_buffers<S, R>();
  constexpr const char* what = "Communicator::broadcast";
  detail::check_comm(s_.get(), what);
  detail::CollectiveCall c =
      detail::make_call(detail::CollectiveKind::broadcast, send, recv, ReduceOp::sum, root, count, what);
  using SB = detail::NcclBuffer<std::remove_cvref_t<S>>;
  using RB = detail::NcclBuffer<std::remove_cvref_t<R>>;
  return detail::NodeAccess::make<AnyKind>(
      detail::nccl_collective(s_, stream, c, Owners{SB::keep(send), RB::keep(recv)}, what));
}

template <class S, class R>
Node<> Communicator::reduce(const Stream& stream, const S& send, const R& recv, int root, ReduceOp op,
                            std::size_t count) const {
  detail::check_collective_buffers<S, R>();
  constexpr const char* what = "Communicator::reduce";
  detail::check_comm(s_.get(), what);
  detail::CollectiveCall c = detail::make_call(detail::CollectiveKind::reduce, send, recv, op, root, count, what);
  using SB = detail::NcclBuffer<std::remove_cvref_t<S>>;
  using RB = detail::NcclBuffer<std::remove_cvref_t<R>>;
  return detail::NodeAccess::make<AnyKind>(
      detail::nccl_collective(s_, stream, c, Owners{SB::keep(send), RB::keep(recv)}, what));
}

template <class S>
Node<> Communicator::send(const Stream& stream, const S& buffer, int peer, std::size_t count) const {
  detail::check_collective_buffers<S, S>();
  constexpr const char* what = "Communicator::send";
  detail::check_comm(s_.get(), what);
  detail::CollectiveCall c = detail::make_call(detail::CollectiveKind::send, buffer, buffer, ReduceOp::sum, peer, count, what);
  c.recv = {};
  using SB = detail::NcclBuffer<std::remove_cvref_t<S>>;
  return detail::NodeAccess::make<AnyKind>(detail::nccl_collective(s_, stream, c, Owners{SB::keep(buffer)}, what));
}

template <class R>
Node<> Communicator::recv(const Stream& stream, const R& buffer, int peer, std::size_t count) const {
  detail::check_collective_buffers<R, R>();
  constexpr const char* what = "Communicator::recv";
  detail::check_comm(s_.get(), what);
  detail::CollectiveCall c = detail::make_call(detail::CollectiveKind::recv, buffer, buffer, ReduceOp::sum, peer, count, what);
  c.send = {};
  using RB = detail::NcclBuffer<std::remove_cvref_t<R>>;
  return detail::NodeAccess::make<AnyKind>(detail::nccl_collective(s_, stream, c, Owners{RB::keep(buffer)}, what));
}

template <class T>
RegisteredBuffer<T> Communicator::register_buffer(const SharedBuffer<T>& buffer) const {
  constexpr const char* what = "Communicator::register_buffer";
  detail::check_comm(s_.get(), what);
  if (!buffer) detail::throw_empty_operand(what, "registered");
  return RegisteredBuffer<T>(buffer, detail::nccl_register(s_, detail::buffer_context(buffer.context()), buffer.address(),
                                                           buffer.bytes(), what));
}

template <class T>
DeviceBuffer<T> alloc(const Context& ctx, std::size_t count) {
  return detail::BufferMaker::make<T>(detail::nccl_mem_alloc(ctx, count, sizeof(T), detail::type_name<T>()));
}

template <class T>
Communicator RegisteredBuffer<T>::communicator() const noexcept {
  return reg_ ? Communicator(detail::registration_comm(*reg_)) : Communicator();
}

}  // namespace tether::nccl
