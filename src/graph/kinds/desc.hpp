// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What every node spec shares (`Spec<Kind>`, docs/dsl.md "Node specs"). A spec turns the user's
// arguments into one CUgraphNodeParams and the version's owners in a single pass, checking them as
// it goes; every consumer (edit creation, edit update, executable update, stream work) takes the
// same spec and hands its parameters to the driver. Each updatable kind also knows how to read
// back a node's previous parameters (for undo) and how to restore them, and each kind that stream
// work issues knows its stream call. One kind per file beside this one.
#pragma once

#include "../../config.hpp"
#include "../../prelude.hpp"
#include "../../attach/attachment.hpp"
#include "../../driver/table.hpp"
#include "../args.hpp"
#include "../launch.hpp"
#include "../node.hpp"

TETHER_EXPORT namespace tether {

/// The parameters of one node of kind `Kind` and the owners of that node version, as a value: made
/// by `tether::kernel`, `memset`, `memcpy`, `host`, `record`, `wait` and `empty` (each checks its
/// arguments as it is made: UsageError before any driver call), and given to exactly one consumer:
/// `Edit::add` (a new node), `Edit::update` / `GraphExec::update` (a node's next version), or
/// `tether::enqueue` (stream work). `keeping(owners)` adds extra owners to the version. Move-only;
/// a spec that was moved from or given to a consumer is empty (`operator bool` is false) and every
/// consumer refuses it with UsageError. Dropped unused, its owners are released on tether's
/// reclaimer. Thread safety: a spec is a value; distinct specs may be used concurrently. Since 0.5.
template <class Kind>
class Spec;

}  // namespace tether

namespace tether::detail {

/// How to undo an update: `restore(drv, node, saved)` sets the previous parameters again. `saved`
/// lives in the transaction's arena until the transaction ends.
struct Undo {
  CUresult (*restore)(const DriverTable&, CUgraphNode, const void*) = nullptr;
  const void* saved = nullptr;
};

/// Memory kept until a transaction ends, for the previous parameters of updated nodes. Chunked,
/// so that earlier allocations never move (the undo records point into it). `clear` keeps the
/// first chunks for the next transaction (edits reuse pooled transactions): an edit that updates
/// nodes then allocates and frees nothing for its undo records (measured: the allocator's
/// consolidation of the freed chunks cost about 40 instructions per updated node).
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  /// `bytes` bytes aligned to `align` (at most 16). Throws std::bad_alloc.
  void* allocate(std::size_t bytes, std::size_t align) {
    if (bytes > kChunk) [[unlikely]]
      return big(bytes);
    std::size_t at = (used_ + align - 1) & ~(align - 1);
    if (chunks_.empty() || at + bytes > kChunk) [[unlikely]] {
      next_chunk();
      at = 0;
    }
    used_ = at + bytes;
    return chunks_[cur_].get() + at;
  }
  /// Ends every allocation; keeps at most two chunks for later use.
  void clear() noexcept {
    if (chunks_.size() > kKept) chunks_.resize(kKept);
    big_.clear();
    cur_ = used_ = 0;
  }

 private:
  static constexpr std::size_t kChunk = 16 << 10;
  static constexpr std::size_t kKept = 2;
  void next_chunk() {
    if (!chunks_.empty() && cur_ + 1 < chunks_.size()) {
      ++cur_;
      return;
    }
    chunks_.push_back(std::unique_ptr<std::byte[]>(new std::byte[kChunk]));
    cur_ = chunks_.size() - 1;
  }
  void* big(std::size_t bytes) {
    big_.push_back(std::unique_ptr<std::byte[]>(new std::byte[bytes]));
    return big_.back().get();
  }
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  std::vector<std::unique_ptr<std::byte[]>> big_;  // allocations larger than a chunk, freed by clear
  std::size_t cur_ = 0, used_ = 0;
};

template <class T>
inline constexpr bool dependent_false = false;

/// Zeroed driver parameters of a node of type `type` (the header says every unused byte must be
/// zero). Why a builtin: value-initialising the 256-byte struct became a call to the C library's
/// memset on every spec, about twice the instructions of the inline stores.
inline CUgraphNodeParams zeroed_params(CUgraphNodeType type) noexcept {
  CUgraphNodeParams p;
#if defined(__clang__) && __has_builtin(__builtin_memset_inline)
  __builtin_memset_inline(&p, 0, sizeof p);
  // Why the empty asm: without it the optimiser merges these stores with the zeroing of the
  // neighbouring members into one larger memset, which it then emits as a library call again.
  __asm__ volatile("" : : "r"(&p) : "memory");
#else
  std::memset(&p, 0, sizeof p);
#endif
  p.type = type;
  return p;
}

/// The call a spec's checks name in their messages ("Edit::memset: ..."): the public factories
/// pass their own name, the one-line spellings (`e.memset(...)`) theirs.
struct What {
  std::string_view text;
};

[[noreturn]] void throw_empty_argument(std::string_view what, std::size_t index, std::string_view type);
[[noreturn]] void throw_zero_dimension(std::string_view what, const char* which, unsigned x, unsigned y, unsigned z);
[[noreturn]] void throw_empty_endpoint(std::string_view what, const char* end, std::string_view kind);
// Why out of line: header mode under nvcc has no {fmt}, and the messages are built only on failure.
enum class SizeError { memset_unknown, memset_multiple, memcpy_overflow, memcpy_unknown, memcpy_source,
                       memcpy_destination, alloc_empty, alloc_overflow, shared_memory };
[[noreturn]] void throw_size_error(std::string_view what, SizeError e, std::size_t a, std::size_t b);

/// Throws UsageError if a grid or block dimension is 0 (the driver would refuse it later) or the
/// dynamic shared memory does not fit the driver's 32-bit field.
inline void check_dims(std::string_view what, const Launch& l) {
  const Grid g = l.grid();
  const Block b = l.block();
  if (g.x == 0 || g.y == 0 || g.z == 0) throw_zero_dimension(what, "grid", g.x, g.y, g.z);
  if (b.x == 0 || b.y == 0 || b.z == 0) throw_zero_dimension(what, "block", b.x, b.y, b.z);
  if (l.shared_memory_bytes() > std::numeric_limits<unsigned>::max())
    throw_size_error(what, SizeError::shared_memory, l.shared_memory_bytes(), 0);
}

/// Throws UsageError if a memset/memcpy end that tether would retain is empty.
template <class A>
void check_endpoint(std::string_view what, const char* end, const A& a) {
  if constexpr (!IsUnowned<Bare<A>>::value)
    if (!a) throw_empty_endpoint(what, end, endpoint_kind<A>());
}

/// The bytes an end point is known to span (0: unknown, an `unowned(p)` without a count).
template <class A>
std::size_t endpoint_bytes(A& a) {
  return endpoint_count(a) * sizeof(EndpointElem<A>);
}

/// A one-element tuple of a reference to `a` if tether keeps it (an owned end point), else empty:
/// concatenated and applied, these build a version's owners with one copy per owned argument and
/// no temporaries.
template <class A>
auto endpoint_ref(A&& a) {
  if constexpr (Endpoint<A&&>::owned)
    return std::forward_as_tuple(std::forward<A>(a));
  else
    return std::tuple<>();
}

/// Owners from a tuple of references (from endpoint_ref / kernel_ref), plus `first` in front.
template <class Refs, class... First>
Owners owners_of(Refs&& refs, First&&... first) {
  if constexpr (std::tuple_size_v<std::remove_reference_t<Refs>> == 0 && sizeof...(First) == 0)
    return Owners{};
  else
    return std::apply([&](auto&&... o) { return Owners{std::forward<First>(first)..., std::forward<decltype(o)>(o)...}; },
                      std::move(refs));
}

/// What every spec holds: the driver parameters of its node and the owners of its version, and
/// whether it is still usable (a spec is consumed by the operation it is given to, and empty when
/// moved from).
class SpecCore {
 public:
  /// Whether the spec can still be used: false once moved from, or given to an operation.
  explicit operator bool() const noexcept { return live_; }

 protected:
  friend struct SpecAccess;
  explicit SpecCore(CUgraphNodeType type) noexcept : params_(zeroed_params(type)) {}
  // The guard stays with each object; only its bundle moves.
  SpecCore(SpecCore&& other) noexcept : params_(other.params_), live_(std::exchange(other.live_, false)) {
    owners_.owners = std::move(other.owners_.owners);
  }
  SpecCore& operator=(SpecCore&& other) noexcept {
    if (this != &other) {
      params_ = other.params_;
      if (!owners_.owners.empty()) defer(std::move(owners_.owners));  // on the reclaimer, as every owner
      owners_.owners = std::move(other.owners_.owners);
      live_ = std::exchange(other.live_, false);
    }
    return *this;
  }
  ~SpecCore() = default;
  void keep(Owners&& more) {
    if (!live_) throw_empty_spec("keeping");
    owners_.owners += std::move(more);
  }
  [[noreturn]] static void throw_empty_spec(std::string_view what);

  CUgraphNodeParams params_;
  ReleaseIfUnused owners_;
  bool live_ = true;
};

/// Throws DriverError for a failed cuGraphNodeSetParams of an edit update ("updating <noun>").
[[noreturn]] void throw_update_error(const DriverTable& drv, CUresult r, const char* noun);

/// The `keeping` of every spec (CRTP: it returns the spec itself, so that
/// `e.add(tether::memset(b, 0.0f).keeping(o))` keeps its type).
template <class Derived>
class SpecKeeping : public SpecCore {
 public:
  /// Adds `owners` to the version this spec makes. Throws UsageError for an empty spec.
  Derived&& keeping(Owners&& owners) && {
    keep(std::move(owners));
    return static_cast<Derived&&>(*this);
  }
  /// Adds `owners` to the version this spec makes. Throws UsageError for an empty spec.
  Derived& keeping(Owners&& owners) & {
    keep(std::move(owners));
    return static_cast<Derived&>(*this);
  }

 protected:
  using SpecCore::SpecCore;
};

/// What the descriptors of the structural kinds hold (allocation, free, child graph and
/// conditional nodes: made by their own creators, never given as specs): the driver parameters
/// and the owners of the node's version.
class DescBase {
 public:
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }

 protected:
  explicit DescBase(CUgraphNodeType type) noexcept : params_(zeroed_params(type)) {}
  CUgraphNodeParams params_;
  ReleaseIfUnused owners_;  // a descriptor's owners until they reach a version (attachment.hpp)
};

/// The consumers' access to a spec (edits, executables, streams): the kind's hooks, each with a
/// default for the kinds that do not need it.
struct SpecAccess {
  /// The node's driver parameters, ready for the driver (a kernel's argument pointers point into
  /// the spec).
  template <class S>
  static CUgraphNodeParams& params(S& s) noexcept {
    if constexpr (requires { s.fix_pointers(); }) s.fix_pointers();
    return s.params_;
  }
  /// The version's owners (moved out by the consumer).
  template <class S>
  static Owners& owners(S& s) noexcept {
    return s.owners_.owners;
  }
  /// Throws UsageError if `s` was already used (or moved from).
  template <class S>
  static void check_live(const S& s, std::string_view what) {
    if (!s.live_) SpecCore::throw_empty_spec(what);
  }
  /// Marks `s` used by `what`; throws UsageError if it was already (or moved from).
  template <class S>
  static void consume(S& s, std::string_view what) {
    check_live(s, what);
    s.live_ = false;
  }
  /// What every consumer does before the driver call: the context of memset and memcpy nodes, a
  /// kernel's dynamic shared memory limit.
  template <class S>
  static void prepare(S& s, const DriverTable& drv, CUcontext ctx, std::string_view what) {
    if constexpr (requires { s.prepare(drv, ctx, what); }) s.prepare(drv, ctx, what);
  }
  /// Whether the node needs driver calls after it is added (a kernel's launch attributes).
  template <class S>
  static bool has_after_add(const S& s) noexcept {
    if constexpr (requires { s.has_attributes(); })
      return s.has_attributes();
    else
      return false;
  }
  template <class S>
  static void after_add(S& s, const DriverTable& drv, CUgraphNode node, std::string_view what) {
    if constexpr (requires { s.after_add(drv, node, what); }) s.after_add(drv, node, what);
  }
  /// Throws UsageError if an executable cannot take this version (a kernel Launch with attributes).
  template <class S>
  static void check_exec(const S& s, std::string_view what) {
    if constexpr (requires { s.check_exec(what); }) s.check_exec(what);
  }
  /// The previous parameters of `node`, for the undo of an edit update.
  template <class S>
  static Undo save(const S& s, const DriverTable& drv, CUgraphNode node, Arena& arena) {
    return s.save(drv, node, arena);
  }
  /// The edit update's driver calls: cuGraphNodeSetParams (and a kernel's attributes).
  template <class S>
  static void apply(S& s, const DriverTable& drv, CUgraphNode node, const Undo& undo, std::string_view what,
                    const char* noun) {
    if constexpr (requires { s.apply(drv, node, undo, what); })
      s.apply(drv, node, undo, what);
    else if (CUresult r = raw<Entry::cuGraphNodeSetParams>(drv, node, &params(s)); r != CUDA_SUCCESS)
      throw_update_error(drv, r, noun);
  }
  /// The stream call of stream work (`captured`: the stream captures).
  template <class S>
  static CUresult enqueue(S& s, const DriverTable& t, CUstream stream, bool captured, Entry* entry) {
    return s.enqueue(t, stream, captured, entry);
  }
  /// What the node handle carries (a kernel node's kernel).
  template <class K, class S>
  static NodeExtra<K> extra(const S& s) noexcept {
    if constexpr (requires { s.info(); })
      return NodeExtra<K>{s.info()};
    else
      return {};
  }
  /// The kernel a kernel spec launches (null for other kinds).
  template <class S>
  static const KernelInfo* kernel(const S& s) noexcept {
    if constexpr (requires { s.info(); })
      return s.info();
    else
      return nullptr;
  }
};

/// Saves and restores the parameters of a node kind whose parameters are one struct read by `Get`
/// and written by `Set` (memset, memcpy, host nodes), for the undo of an edit update.
template <class Params, Entry Get, Entry Set>
struct ParamsSaved {
  Params params;
  static CUresult restore(const DriverTable& drv, CUgraphNode node, const void* self) noexcept {
    return raw<Set>(drv, node, &static_cast<const ParamsSaved*>(self)->params);
  }
  static Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena, const char* reading);
};

/// Stores a copy of `value` in `arena` and returns it.
template <class T>
T* keep_in(Arena& arena, const T& value) {
  static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 16);
  void* p = arena.allocate(sizeof(T), alignof(T));
  std::memcpy(p, &value, sizeof(T));
  return static_cast<T*>(p);
}

template <class Params, Entry Get, Entry Set>
Undo ParamsSaved<Params, Get, Set>::save(const DriverTable& drv, CUgraphNode node, Arena& arena, const char* reading) {
  ParamsSaved s{};
  call<Get>(drv, reading, node, &s.params);
  return {&restore, keep_in(arena, s)};
}

}  // namespace tether::detail
