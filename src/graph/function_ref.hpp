// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A non-owning reference to a callable, for the driver-call hooks passed down the insertion and
// update paths. Why not std::function: those run once per node, and a std::function whose lambda
// captures more than two pointers allocates.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

namespace tether::detail {

template <class Signature>
class FunctionRef;

/// Refers to a callable that outlives every call through the reference (pass it down a call
/// chain, never store it). May be empty (default-constructed).
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  FunctionRef() noexcept = default;
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, A...>)
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): binds lambdas at call sites
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...); }) {}

  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }
  explicit operator bool() const noexcept { return call_ != nullptr; }

 private:
  void* obj_ = nullptr;
  R (*call_)(void*, A...) = nullptr;
};

}  // namespace tether::detail
