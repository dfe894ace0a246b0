// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

TETHER_EXPORT namespace tether {
class Owners;

/// Memory that owners keep (`inspect`, `owned_memory`): the device and page-locked host bytes of
/// the distinct allocations of tether's buffers among them — an allocation kept by several
/// owners, nodes or versions counts once. Memory an owner holds in a way tether cannot see (a
/// callable's captured `std::vector`, a raw pointer in a custom owner) is not counted. Since 0.6.
struct OwnedMemory {
  std::size_t device_bytes = 0;  ///< device buffers (SharedBuffer, DeviceBuffer, parameter buffers)
  std::size_t pinned_bytes = 0;  ///< page-locked host buffers (PinnedBuffer, SharedPinnedBuffer)
  std::size_t allocations = 0;   ///< distinct allocations counted
};
}  // namespace tether

namespace tether::detail {

struct DriverTable;
struct OwnersAccess;

/// `T` as the compiler spells it, shortened for reading: without the `tether::` prefix, and a
/// lambda's file path cut to its file name ("(lambda at 02_ownership.cpp:31:14)").
template <class T>
std::string owner_type_name() {
  std::string_view f = __PRETTY_FUNCTION__;  // "... owner_type_name() [T = tether::SharedBuffer<float>]"
  std::size_t b = f.find("T = ");
  if (b == std::string_view::npos) return "?";
  b += 4;
  std::size_t e = f.rfind(']');
  std::string s(f.substr(b, e == std::string_view::npos || e < b ? std::string_view::npos : e - b));
  for (std::size_t at; (at = s.find("tether::")) != std::string::npos;) s.erase(at, 8);
  if (std::size_t lam = s.find("(lambda at "); lam != std::string::npos) {
    std::size_t path = lam + 11, slash = s.rfind('/');
    if (slash != std::string::npos && slash > path) s.erase(path, slash + 1 - path);
  }
  return s;
}

/// The label `describe` gives an owner: `tether_owner_label(v)` where argument-dependent lookup
/// finds one (tether's buffers, kernels, events and streams define it), else its type's name.
template <class T>
std::string owner_label(const T& v) {
  if constexpr (requires { { tether_owner_label(v) } -> std::convertible_to<std::string>; })
    return tether_owner_label(v);
  else
    return owner_type_name<T>();
}

class NodeAttachment;  // a group's layout (and an attachment's): node_attachment.hpp, private

/// What a memory measurement has seen: device and page-locked host bytes of the distinct
/// allocations owners keep (an allocation kept by several owners, nodes or versions counts once).
class MemoryTally {
 public:
  /// Counts the allocation at `base` of `bytes`, unless this tally has seen it.
  void add(std::uintptr_t base, std::size_t bytes, bool pinned);
  std::size_t device_bytes = 0;
  std::size_t pinned_bytes = 0;
  std::size_t allocations = 0;
  OwnedMemory value() const noexcept { return {device_bytes, pinned_bytes, allocations}; }

 private:
  std::unordered_set<std::uintptr_t> seen_;
};

/// Adds what owner `v` keeps to `t`: `tether_owner_memory(v, t)` where argument-dependent lookup
/// finds one (tether's buffers define it), else nothing (the owner holds no memory tether knows).
template <class T>
void owner_memory(const T& v, MemoryTally& t) {
  if constexpr (requires { tether_owner_memory(v, t); }) tether_owner_memory(v, t);
}

/// An owner that an executable wants to know about when it is made (what `scan` finds): NCCL's
/// collective notes, which tell the executable which communicators its launches use.
class ScannedOwner {
 public:
  virtual ~ScannedOwner() = default;
};
/// What a scan of owners found: every owner whose type defines `tether_owner_scan(const T&,
/// OwnerScan&)` (found by argument-dependent lookup) and added itself.
struct OwnerScan {
  std::vector<const ScannedOwner*> found;
};
/// Adds `v` to `s` if its type takes part in scans.
template <class T>
void owner_scan(const T& v, OwnerScan& s) {
  if constexpr (requires { tether_owner_scan(v, s); }) tether_owner_scan(v, s);
}

/// What a group's values need from their types, one constant table per list of value types:
/// how to destroy them and how to describe them (`inspect`). Why a table, not virtual functions:
/// the group's layout (the attachment's fields, its link on the reclaimer's queue) stays private.
struct GroupOps {
  void (*destroy)(void* values) noexcept;
  void (*describe)(const void* values, std::vector<std::string>& out);
  void (*measure)(const void* values, MemoryTally& out);
  void (*scan)(const void* values, OwnerScan& out);
  std::uint32_t count;  // values in the group
  std::size_t bytes;    // their size
  std::size_t align;    // their alignment
};

/// One new group with room for the values `ops` describes, in one allocation from
/// the owner-group pool (pool.hpp; over-aligned ones from the general allocator); returns the
/// values' storage and sets `group`. The group is linked to nothing. Throws std::bad_alloc.
void* group_new(const GroupOps* ops, NodeAttachment*& group);
/// Frees a group from group_new whose values were never constructed (their constructor threw).
void group_abandon(NodeAttachment* group) noexcept;
/// Links `group` in front of `rest`; returns `group`.
NodeAttachment* group_link(NodeAttachment* group, NodeAttachment* rest) noexcept;
/// Links the bundle `more` in front of `head`; returns the new head.
NodeAttachment* groups_join(NodeAttachment* more, NodeAttachment* head) noexcept;
/// Number of owners of the bundle `head` heads.
std::size_t groups_owner_count(const NodeAttachment* head) noexcept;
/// Destroys every group of the bundle `head` heads (the most recently added first).
void groups_destroy(NodeAttachment* head) noexcept;
/// Adds the memory every owner of the bundle `head` heads keeps to `t`.
void groups_measure(const NodeAttachment* head, MemoryTally& t);
/// The memory the bundle `head` heads keeps, on its own (a tally of its own).
OwnedMemory groups_memory(const NodeAttachment* head);
/// Adds the owners of the bundle `head` heads that take part in scans to `s`.
void groups_scan(const NodeAttachment* head, OwnerScan& s);

template <class... T>
struct GroupOf {
  using Values = std::tuple<T...>;
  static void destroy(void* v) noexcept { std::destroy_at(static_cast<Values*>(v)); }
  static void describe(const void* v, std::vector<std::string>& out) {
    std::apply([&](const auto&... x) { (out.push_back(owner_label(x)), ...); }, *static_cast<const Values*>(v));
  }
  static void measure(const void* v, MemoryTally& out) {
    std::apply([&](const auto&... x) { (owner_memory(x, out), ...); }, *static_cast<const Values*>(v));
  }
  static void scan(const void* v, OwnerScan& out) {
    std::apply([&](const auto&... x) { (owner_scan(x, out), ...); }, *static_cast<const Values*>(v));
  }
  static constexpr GroupOps ops{&destroy, &describe, &measure, &scan, sizeof...(T), sizeof(Values), alignof(Values)};

  /// A new group holding `a...` moved or copied into its values; nothing is moved from `a` if it
  /// throws.
  template <class... A>
  static Values& make(NodeAttachment*& group, A&&... a) {
    NodeAttachment* g = nullptr;
    void* storage = group_new(&ops, g);
    Values* values;
    try {
      values = ::new (storage) Values(std::forward<A>(a)...);
    } catch (...) {
      group_abandon(g);
      throw;
    }
    group = g;
    return *values;
  }
};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A value tether can keep alive for a graph node: any movable, destructible object — a buffer,
/// a module or kernel, an event, a stream, a callable with its captured state, another `Owners`
/// bundle is excluded (merge bundles with `+=`).
template <class T>
concept Ownable = !std::is_same_v<std::remove_cvref_t<T>, Owners> && std::move_constructible<std::remove_cvref_t<T>> &&
                  std::destructible<std::remove_cvref_t<T>>;

/// A move-only, type-erased bundle of any number of owners, stored in one allocation per group
/// added (the first group of a bundle given to a node also serves as the version's attachment, so
/// a node version costs one allocation).
/// `tether::Owners{std::move(buffer), kernel, [state = std::move(s)] {}}` moves (or copies,
/// for copyable owners such as `SharedBuffer`) each value into the bundle; destroying the bundle
/// destroys them, the last added first. Attach a bundle to a node with
/// `e.after(...).keeping(std::move(bundle))`.
///
/// Throws `std::bad_alloc` if the allocation fails, in which case nothing was moved from the
/// arguments. Thread safety: a bundle is a value; distinct bundles may be used concurrently.
class Owners {
 public:
  /// An empty bundle (no allocation).
  Owners() noexcept = default;

  /// A bundle of the given owners, in one allocation.
  template <Ownable... T>
    requires(sizeof...(T) > 0)
  Owners(T&&... owners) {  // NOLINT(google-explicit-constructor): `Owners{a, b}` is the intended spelling
    detail::GroupOf<std::remove_cvref_t<T>...>::make(head_, std::forward<T>(owners)...);
  }

  Owners(Owners&& other) noexcept : head_(std::exchange(other.head_, nullptr)) {}
  Owners& operator=(Owners&& other) noexcept {
    if (this != &other) {
      reset();
      head_ = std::exchange(other.head_, nullptr);
    }
    return *this;
  }
  Owners(const Owners&) = delete;
  Owners& operator=(const Owners&) = delete;
  ~Owners() { reset(); }

  /// Number of owners held.
  std::size_t size() const noexcept { return head_ ? detail::groups_owner_count(head_) : 0; }
  /// Adds the memory the owners keep to `t` (each distinct allocation once per tally).
  void measure(detail::MemoryTally& t) const { detail::groups_measure(head_, t); }
  /// Whether the bundle holds no owner.
  bool empty() const noexcept { return head_ == nullptr; }

  /// Moves every owner of `more` into this bundle (no allocation: the groups are linked).
  Owners& operator+=(Owners&& more) noexcept {
    if (more.head_) head_ = detail::groups_join(std::exchange(more.head_, nullptr), head_);
    return *this;
  }

  /// Moves `value` into the bundle (one allocation) and returns a reference to it, stable until the
  /// bundle releases it: how a host node's trampoline finds the callable it runs.
  template <Ownable T>
  std::remove_cvref_t<T>& adopt(T&& value) {
    detail::NodeAttachment* g = nullptr;
    auto& values = detail::GroupOf<std::remove_cvref_t<T>>::make(g, std::forward<T>(value));
    head_ = detail::group_link(g, head_);
    return std::get<0>(values);
  }

  /// Destroys every owner now (the most recently added group first).
  void reset() noexcept {
    if (head_) detail::groups_destroy(std::exchange(head_, nullptr));
  }

 private:
  friend struct detail::OwnersAccess;
  detail::NodeAttachment* head_ = nullptr;  // the most recently added group; opaque here
};

}  // namespace tether

namespace tether::detail {

/// Hands a bundle's groups over (to become an attachment, or to the reclaimer) and back.
struct OwnersAccess {
  static NodeAttachment* release(Owners& o) noexcept { return std::exchange(o.head_, nullptr); }
  /// Gives `o` (which must be empty) the groups from `head` back.
  static void restore(Owners& o, NodeAttachment* head) noexcept { o.head_ = head; }
  /// The first group of `o` (null when empty), to describe it.
  static const NodeAttachment* head(const Owners& o) noexcept { return o.head_; }
};

}  // namespace tether::detail
