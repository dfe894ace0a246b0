// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Argument adapters of the DSL: how a kernel, memset or memcpy argument turns into a driver value
// and, where it owns memory, into an owner kept with the node's version.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../resources/buffer.hpp"

TETHER_EXPORT namespace tether {

template <class T>
class Param;

/// A pointer tether must not keep alive: the caller promises the memory outlives every use by
/// the graph, its clones, executables and launches. Made with `tether::unowned(...)`.
template <class T>
struct Unowned {
  using element_type = T;
  T* ptr = nullptr;
  std::size_t count = 0;  ///< elements, where known (0: unknown)
};

/// Marks a pointer as explicitly not retained (for kernel pointer parameters, memset and memcpy).
template <class T>
Unowned<T> unowned(T* p, std::size_t count = 0) noexcept {
  return {p, count};
}
/// The memory of a buffer, explicitly not retained.
template <class T>
Unowned<T> unowned(const SharedBuffer<T>& b) noexcept {
  return {b.data(), b.size()};
}
template <class T>
Unowned<T> unowned(DeviceBuffer<T>& b) noexcept {
  return {b.data(), b.size()};
}
template <class T>
Unowned<T> unowned(PinnedBuffer<T>& b) noexcept {
  return {b.data(), b.size()};
}

}  // namespace tether

namespace tether::detail {

template <class T>
struct IsSharedBuffer : std::false_type {};
template <class T>
struct IsSharedBuffer<SharedBuffer<T>> : std::true_type {};
template <class T>
struct IsDeviceBuffer : std::false_type {};
template <class T>
struct IsDeviceBuffer<DeviceBuffer<T>> : std::true_type {};
template <class T>
struct IsPinned : std::false_type {};
template <class T>
struct IsPinned<PinnedBuffer<T>> : std::true_type {};
template <class T>
struct IsPinned<SharedPinnedBuffer<T>> : std::true_type {};
template <class T>
struct IsSharedPinned : std::false_type {};
template <class T>
struct IsSharedPinned<SharedPinnedBuffer<T>> : std::true_type {};
template <class T>
struct IsUnowned : std::false_type {};
template <class T>
struct IsUnowned<Unowned<T>> : std::true_type {};

template <class A>
using Bare = std::remove_cvref_t<A>;

// Dynamic parameters (param.hpp): a Param<T> argument, and the value taken from it once when a
// node binds it.
template <class T>
struct ParamResolved;
template <class T>
struct IsParam : std::false_type {};
template <class T>
struct IsParam<Param<T>> : std::true_type {};
template <class T>
struct IsParamResolved : std::false_type {};
template <class T>
struct IsParamResolved<ParamResolved<T>> : std::true_type {};
template <class A>
struct ParamTypeOf {
  using type = void;
};
template <class T>
struct ParamTypeOf<Param<T>> {
  using type = T;
};
template <class T>
struct ParamTypeOf<ParamResolved<T>> {
  using type = T;
};
/// Whether a parameter of value type T binds to kernel parameter P: exactly P, or for a
/// SharedBuffer<U> a pointer parameter U* converts to.
template <class P, class T>
consteval bool param_binds() {
  if constexpr (IsSharedBuffer<T>::value)
    return std::is_pointer_v<P> && std::is_convertible_v<decltype(std::declval<T&>().data()), P>;
  else
    return std::is_same_v<P, T>;
}

/// How argument A binds to kernel parameter P. `ok` says whether it may; `owned` whether the
/// argument's memory is retained with the node.
template <class P, class A>
struct KernelArg {
  static constexpr bool pointer_param = std::is_pointer_v<P>;
  template <class X>
  static constexpr bool points_to = std::is_convertible_v<X*, P>;

  static constexpr bool shared = IsSharedBuffer<Bare<A>>::value;
  static constexpr bool device_rvalue = IsDeviceBuffer<Bare<A>>::value && !std::is_lvalue_reference_v<A>;
  static constexpr bool device_lvalue = IsDeviceBuffer<Bare<A>>::value && std::is_lvalue_reference_v<A>;
  static constexpr bool unowned = IsUnowned<Bare<A>>::value;
  static constexpr bool null = std::is_same_v<Bare<A>, std::nullptr_t>;
  static constexpr bool raw_pointer = std::is_pointer_v<Bare<A>>;
  static constexpr bool param = IsParam<Bare<A>>::value || IsParamResolved<Bare<A>>::value;
  static constexpr bool param_ok = [] {
    if constexpr (IsParam<Bare<A>>::value || IsParamResolved<Bare<A>>::value)
      return param_binds<P, typename ParamTypeOf<Bare<A>>::type>();
    else
      return false;
  }();

  static constexpr bool buffer_ok = [] {
    if constexpr (IsUnowned<Bare<A>>::value)
      return points_to<typename Bare<A>::element_type>;
    else if constexpr (IsSharedBuffer<Bare<A>>::value || IsDeviceBuffer<Bare<A>>::value)
      return points_to<std::remove_pointer_t<decltype(std::declval<Bare<A>&>().data())>>;
    else
      return false;
  }();
  // Why brace initialisation: it is what refuses narrowing (double -> int, size_t -> int,
  // int -> unsigned), which a plain conversion would perform silently.
  static constexpr bool narrows = !pointer_param && std::is_convertible_v<A, P> && !requires { P{std::declval<A>()}; };
  static constexpr bool ok = param ? param_ok
                           : pointer_param
                                 ? ((shared || device_rvalue) && buffer_ok) || (unowned && buffer_ok) || null
                                 : (!raw_pointer && !shared && !IsDeviceBuffer<Bare<A>>::value && !unowned &&
                                    std::is_convertible_v<A, P> && !narrows);
  static constexpr bool owned = pointer_param && (shared || device_rvalue);
};

/// The value passed to the driver for argument `a` of parameter type P.
template <class P, class A>
P kernel_value(A& a) {
  using Arg = KernelArg<P, A&>;
  if constexpr (Arg::null)
    return nullptr;
  else if constexpr (IsParamResolved<Bare<A>>::value) {
    if constexpr (std::is_pointer_v<P>)
      return static_cast<P>(a.value.data());
    else
      return a.value;
  }
  else if constexpr (IsUnowned<Bare<A>>::value)
    return a.ptr;
  else if constexpr (std::is_pointer_v<P>)
    return a.data();
  else
    return static_cast<P>(a);
}

/// A reference to argument `a` if tether keeps it (a one-element tuple), or an empty tuple: the
/// version's owners are built from these with one copy (or move) per kept argument.
template <class P, class A>
auto kernel_ref(A&& a) {
  if constexpr (KernelArg<P, A&&>::owned)
    return std::forward_as_tuple(std::forward<A>(a));
  else
    return std::tuple<>();
}

/// A memset/memcpy end point: device or pinned buffers (retained if shared or moved in) and
/// unowned pointers.
template <class A>
struct Endpoint {
  static constexpr bool device = IsSharedBuffer<Bare<A>>::value || IsDeviceBuffer<Bare<A>>::value;
  static constexpr bool pinned = IsPinned<Bare<A>>::value;
  static constexpr bool unowned = IsUnowned<Bare<A>>::value;
  static constexpr bool rvalue = !std::is_lvalue_reference_v<A>;
  static constexpr bool shared = IsSharedBuffer<Bare<A>>::value || IsSharedPinned<Bare<A>>::value;
  static constexpr bool ok = unowned || ((device || pinned) && (shared || rvalue));
  static constexpr bool owned = (device || pinned) && ok;
};

template <class A>
struct EndpointElemOf {
  using type = std::remove_cvref_t<decltype(*std::declval<Bare<A>&>().data())>;
};
template <class U>
struct EndpointElemOf<Unowned<U>> {
  using type = std::remove_cv_t<U>;
};
/// The element type of an end point.
template <class A>
using EndpointElem = typename EndpointElemOf<Bare<A>>::type;

template <class A>
std::uintptr_t endpoint_address(A& a) {
  if constexpr (IsUnowned<Bare<A>>::value)
    return reinterpret_cast<std::uintptr_t>(a.ptr);
  else
    return reinterpret_cast<std::uintptr_t>(a.data());
}
template <class A>
std::size_t endpoint_count(A& a) {
  if constexpr (IsUnowned<Bare<A>>::value)
    return a.count;
  else
    return a.size();
}
template <class A>
CUmemorytype endpoint_type() {
  if constexpr (Endpoint<A>::device)
    return CU_MEMORYTYPE_DEVICE;
  else if constexpr (Endpoint<A>::pinned)
    return CU_MEMORYTYPE_HOST;
  else
    return CU_MEMORYTYPE_UNIFIED;
}
/// The type an end point names in errors.
template <class A>
constexpr std::string_view endpoint_kind() {
  if constexpr (IsSharedBuffer<Bare<A>>::value)
    return "SharedBuffer";
  else if constexpr (IsDeviceBuffer<Bare<A>>::value)
    return "DeviceBuffer";
  else if constexpr (IsSharedPinned<Bare<A>>::value)
    return "SharedPinnedBuffer";
  else if constexpr (IsPinned<Bare<A>>::value)
    return "PinnedBuffer";
  else
    return "unowned pointer";
}
}  // namespace tether::detail
