// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The move/reset logic of every move-only owner of one driver handle, written once (STYLE.md §3).
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

namespace tether::detail {

/// Owns one driver handle `H` and destroys it with `Destroy` (a `noexcept` callable taking `H`,
/// usually carrying the owning context). `H{}` is the empty value (a null pointer, a zero
/// `CUdeviceptr`). Move-only; a move leaves the source empty, move assignment first destroys the
/// handle the target held. The deleter travels with the handle and is kept by `reset(h)`.
/// Thread safety: none; one owner, one thread at a time.
template <class H, class Destroy>
class UniqueHandle {
  static_assert(std::is_nothrow_invocable_v<const Destroy&, H>,
                "a UniqueHandle deleter must be noexcept: it runs in destructors");

 public:
  UniqueHandle() noexcept(std::is_nothrow_default_constructible_v<Destroy>) = default;
  UniqueHandle(H handle, Destroy destroy) noexcept : handle_(handle), destroy_(std::move(destroy)) {}

  UniqueHandle(UniqueHandle&& other) noexcept
      : handle_(std::exchange(other.handle_, H{})), destroy_(std::move(other.destroy_)) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();  // why first: the old handle must be destroyed with its own deleter, not leaked
      handle_ = std::exchange(other.handle_, H{});
      destroy_ = std::move(other.destroy_);
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  H get() const noexcept { return handle_; }
  /// Gives up ownership without destroying; the caller now owns the returned handle.
  H release() noexcept { return std::exchange(handle_, H{}); }
  /// Destroys the owned handle (if any) and takes `handle` instead, keeping the deleter.
  void reset(H handle = H{}) noexcept {
    H old = std::exchange(handle_, handle);
    if (old != H{}) destroy_(old);
  }
  void swap(UniqueHandle& other) noexcept {
    using std::swap;
    swap(handle_, other.handle_);
    swap(destroy_, other.destroy_);
  }
  explicit operator bool() const noexcept { return handle_ != H{}; }
  const Destroy& deleter() const noexcept { return destroy_; }

 private:
  H handle_{};
  Destroy destroy_{};
};

}  // namespace tether::detail
