// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What every node-kind descriptor shares. A descriptor turns the user's arguments into one
// CUgraphNodeParams and the version's owners in a single pass; edit creation, edit update and
// executable update all build the same descriptor and hand its parameters to the driver. Each
// updatable kind also knows how to read back a node's previous parameters (for undo) and how to
// restore them. One kind per file beside this one.
#pragma once

#include "../../config.hpp"
#include "../../prelude.hpp"
#include "../../attach/attachment.hpp"
#include "../../driver/table.hpp"
#include "../args.hpp"
#include "../launch.hpp"

namespace tether::detail {

/// How to undo an update: `restore(drv, node, saved)` sets the previous parameters again. `saved`
/// lives in the transaction's arena until the transaction ends.
struct Undo {
  CUresult (*restore)(const DriverTable&, CUgraphNode, const void*) = nullptr;
  const void* saved = nullptr;
};

/// Memory kept until a transaction ends, for the previous parameters of updated nodes. Chunked,
/// so that earlier allocations never move (the undo records point into it).
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  /// `bytes` bytes aligned to `align` (at most 16). Throws std::bad_alloc.
  void* allocate(std::size_t bytes, std::size_t align) {
    std::size_t at = (used_ + align - 1) & ~(align - 1);
    if (chunks_.empty() || at + bytes > size_) {
      size_ = std::max<std::size_t>(kChunk, bytes);
      chunks_.push_back(std::unique_ptr<std::byte[]>(new std::byte[size_]));
      at = 0;
    }
    used_ = at + bytes;
    return chunks_.back().get() + at;
  }
  /// Frees everything.
  void clear() noexcept {
    chunks_.clear();
    used_ = size_ = 0;
  }

 private:
  static constexpr std::size_t kChunk = 16 << 10;
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  std::size_t used_ = 0, size_ = 0;
};

template <class T>
inline constexpr bool dependent_false = false;

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

/// What every descriptor holds: the driver parameters of its node and the owners of its version.
class DescBase {
 public:
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }

 protected:
  explicit DescBase(CUgraphNodeType type) noexcept { params_.type = type; }
  CUgraphNodeParams params_{};
  ReleaseIfUnused owners_;  // a descriptor's owners until they reach a version (attachment.hpp)
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
