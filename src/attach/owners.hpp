// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "pool.hpp"
#include "reclaimer.hpp"

TETHER_EXPORT namespace tether {
class Owners;
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

/// One group of owners of a bundle (`tether::Owners`), in one allocation, and — when it is the
/// first group of a bundle handed to a node version — that version's attachment
/// (docs/design/attachments.md): the user object whose single reference the graph holds points here, and the reclaimer
/// releases the whole bundle from here. Why one type for both: a version then costs one
/// allocation (the owners with the attachment's fields in front), not a bundle plus an attachment.
/// Immutable after publication (invariant 1): nothing but its creator and the reclaimer touches it.
class NodeAttachment : public Reclaimable {
 public:
  /// Makes the first group of `owners` (which must not be empty) the attachment of a new version:
  /// creates its user object (cuUserObjectCreate, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, refcount 1,
  /// owned by the caller). Allocates nothing. On failure the owners go to the reclaimer and
  /// DriverError is thrown.
  static NodeAttachment* create(const DriverTable& drv, Owners&& owners);

  /// The user object that owns this attachment (null for a group that is not an attachment).
  CUuserObject user_object() const noexcept { return uo_; }
  /// Number of owners held by the whole bundle this group heads.
  std::size_t owner_count() const noexcept {
    std::size_t n = 0;
    for (const NodeAttachment* b = this; b; b = b->next_group_) n += b->count_;
    return n;
  }
  /// Appends a label per owner of the whole bundle this group heads, the most recently added
  /// group first (`inspect`): the owner's own label where its type gives one (`tether_owner_label`,
  /// found by argument-dependent lookup: "SharedBuffer<float>[1024]", "kernel scale"), otherwise
  /// its type as the compiler spells it. Allocates; the bundle is immutable, so any thread may call it.
  void describe(std::vector<std::string>& out) const {
    for (const NodeAttachment* b = this; b; b = b->next_group_) b->describe_group(out);
  }
  /// Releases this group and the rest of its bundle (what the reclaimer calls).
  void reclaim() noexcept final;
  /// Destroys `first` and every group after it, in chain order (the most recently added first).
  static void destroy_groups(NodeAttachment* first) noexcept {
    while (first) {
      NodeAttachment* next = first->next_group_;
      first->destroy_group();
      first = next;
    }
  }

  /// Attachments alive in the process (created and not yet reclaimed).
  static std::uint64_t live() noexcept;

  // Groups come from the owner-group pool (pool.hpp); over-aligned ones from the general allocator.
  static void* operator new(std::size_t bytes) { return group_allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept { group_free(p, bytes); }
  static void* operator new(std::size_t bytes, std::align_val_t al) { return ::operator new(bytes, al); }
  static void operator delete(void* p, std::size_t bytes, std::align_val_t al) noexcept {
    ::operator delete(p, bytes, al);
  }

 protected:
  NodeAttachment() = default;
  ~NodeAttachment() = default;
  /// Destroys this group only (its owners, then its storage).
  virtual void destroy_group() noexcept = 0;
  /// Appends one label per owner of this group.
  virtual void describe_group(std::vector<std::string>& out) const = 0;

 private:
  friend class tether::Owners;
  friend struct OwnersAccess;
  static void on_destroy(void* self);  // CUhostFn signature; only queues (invariant 9)

  NodeAttachment* next_group_ = nullptr;  // the rest of the bundle
  CUuserObject uo_ = nullptr;
  std::uint32_t count_ = 0;
  bool attached_ = false;  // heads a version (counted by live())
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
  Owners(T&&... owners)  // NOLINT(google-explicit-constructor): `Owners{a, b}` is the intended spelling
      : head_(new Items<std::remove_cvref_t<T>...>(std::forward<T>(owners)...)) {}

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
  std::size_t size() const noexcept { return head_ ? head_->owner_count() : 0; }
  /// Whether the bundle holds no owner.
  bool empty() const noexcept { return head_ == nullptr; }

  /// Moves every owner of `more` into this bundle (no allocation: the groups are linked).
  Owners& operator+=(Owners&& more) noexcept {
    if (!more.head_) return *this;
    detail::NodeAttachment* tail = more.head_;
    while (tail->next_group_) tail = tail->next_group_;
    tail->next_group_ = head_;
    head_ = std::exchange(more.head_, nullptr);
    return *this;
  }

  /// Moves `value` into the bundle (one allocation) and returns a reference to it, stable until the
  /// bundle releases it: how a host node's trampoline finds the callable it runs.
  template <Ownable T>
  std::remove_cvref_t<T>& adopt(T&& value) {
    auto* items = new Items<std::remove_cvref_t<T>>(std::forward<T>(value));
    items->next_group_ = head_;
    head_ = items;
    return std::get<0>(items->values);
  }

  /// Destroys every owner now (the most recently added group first).
  void reset() noexcept { detail::NodeAttachment::destroy_groups(std::exchange(head_, nullptr)); }

 private:
  friend struct detail::OwnersAccess;
  template <class... T>
  struct Items final : detail::NodeAttachment {
    template <class... A>
    explicit Items(A&&... a) : values(std::forward<A>(a)...) {
      count_ = sizeof...(T);
    }
    void destroy_group() noexcept override { delete this; }
    void describe_group(std::vector<std::string>& out) const override {
      std::apply([&](const auto&... v) { (out.push_back(detail::owner_label(v)), ...); }, values);
    }
    std::tuple<T...> values;
  };
  detail::NodeAttachment* head_ = nullptr;
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
