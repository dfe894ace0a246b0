// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

TETHER_EXPORT namespace tether {

class Owners;

/// A value tether can keep alive for a graph node: any movable, destructible object — a buffer,
/// a module or kernel, an event, a stream, a callable with its captured state, another `Owners`
/// bundle is excluded (merge bundles with `+=`).
template <class T>
concept Ownable = !std::is_same_v<std::remove_cvref_t<T>, Owners> && std::move_constructible<std::remove_cvref_t<T>> &&
                  std::destructible<std::remove_cvref_t<T>>;

/// A move-only, type-erased bundle of any number of owners, stored in one allocation per group
/// added. `tether::Owners{std::move(buffer), kernel, [state = std::move(s)] {}}` moves (or copies,
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
  std::size_t size() const noexcept {
    std::size_t n = 0;
    for (Block* b = head_; b; b = b->next) n += b->count;
    return n;
  }
  /// Whether the bundle holds no owner.
  bool empty() const noexcept { return head_ == nullptr; }

  /// Moves every owner of `more` into this bundle (no allocation: the groups are linked).
  Owners& operator+=(Owners&& more) noexcept {
    if (!more.head_) return *this;
    Block* tail = more.head_;
    while (tail->next) tail = tail->next;
    tail->next = head_;
    head_ = std::exchange(more.head_, nullptr);
    return *this;
  }

  /// Moves `value` into the bundle (one allocation) and returns a reference to it, stable until the
  /// bundle releases it: how a host node's trampoline finds the callable it runs.
  template <Ownable T>
  std::remove_cvref_t<T>& adopt(T&& value) {
    auto* items = new Items<std::remove_cvref_t<T>>(std::forward<T>(value));
    items->next = head_;
    head_ = items;
    return std::get<0>(items->values);
  }

  /// Destroys every owner now (the most recently added group first).
  void reset() noexcept {
    while (head_) {
      Block* next = head_->next;
      head_->destroy(head_);
      head_ = next;
    }
  }

 private:
  struct Block {
    Block* next = nullptr;
    std::size_t count = 0;
    void (*destroy)(Block*) noexcept = nullptr;
  };
  template <class... T>
  struct Items final : Block {
    template <class... A>
    explicit Items(A&&... a) : values(std::forward<A>(a)...) {
      count = sizeof...(T);
      destroy = [](Block* b) noexcept { delete static_cast<Items*>(b); };
    }
    std::tuple<T...> values;
  };
  Block* head_ = nullptr;
};

}  // namespace tether
