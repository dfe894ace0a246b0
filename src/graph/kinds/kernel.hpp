// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The kernel node descriptor: typed arguments -> argument values, CUgraphNodeParams (kernel) and
// the version's owners (the Kernel, so its module, and every kept buffer), plus the launch
// attributes, set on the node after it exists.
#pragma once

#include "../../resources/module.hpp"
#include "desc.hpp"

namespace tether::detail {

template <class Tuple, class... A>
struct KernelArgsCheck;
template <class... P, class... A>
struct KernelArgsCheck<std::tuple<P...>, A...> {
  static_assert(sizeof...(P) == sizeof...(A),
                "launch/update: the number of arguments differs from the kernel's parameter list");
  static constexpr bool raw = ((KernelArg<P, A>::pointer_param && KernelArg<P, A>::raw_pointer) || ...);
  static_assert(!raw,
                "launch/update: a kernel pointer parameter takes SharedBuffer<T>, DeviceBuffer<T>&& (both kept "
                "alive with the node) or tether::unowned(p) (explicitly not kept alive); a raw pointer is rejected "
                "because nothing would keep its memory alive");
  static constexpr bool device_lvalue = ((KernelArg<P, A>::pointer_param && KernelArg<P, A>::device_lvalue) || ...);
  static_assert(!device_lvalue,
                "launch/update: a DeviceBuffer<T> is move-only: pass std::move(buffer) to hand it to the node, share() "
                "it, or pass tether::unowned(buffer)");
  static constexpr bool narrows = (KernelArg<P, A>::narrows || ...);
  static_assert(!narrows,
                "launch/update: a value argument would narrow to the kernel's parameter type (e.g. double -> int, "
                "std::size_t -> int, int -> unsigned): pass a value of the parameter's type, e.g. static_cast<P>(v)");
  static_assert((KernelArg<P, A>::ok && ...),
                "launch/update: an argument's type does not match the kernel's parameter type (pointer parameters "
                "take buffers of a matching element type; value parameters take values convertible to them)");
  static constexpr bool ok = true;
};

/// Throws UsageError if a buffer argument that would be retained (and passed as a pointer) is empty.
template <class P, class A>
void check_kernel_arg(std::string_view what, std::size_t index, const A& a) {
  if constexpr (KernelArg<P, const A&>::pointer_param &&
                (IsSharedBuffer<Bare<A>>::value || IsDeviceBuffer<Bare<A>>::value)) {
    if (!a) throw_empty_argument(what, index, IsSharedBuffer<Bare<A>>::value ? "SharedBuffer" : "DeviceBuffer");
  }
}

/// Raises `f`'s CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to `bytes` if a launch asks for
/// more than 48 KiB and more than tether already raised it to (cuFuncSetAttribute; never lowers
/// it). Throws DriverError naming the kernel and the size when the driver refuses.
void raise_dynamic_shared(const DriverTable& drv, CUfunction f, std::string_view kernel, std::size_t bytes,
                          std::string_view what);
/// Sets the attributes of `l` on kernel node `node` (cuGraphKernelNodeSetAttribute). Returns the
/// first failure and which attribute failed (`*failed`).
CUresult set_launch_attrs(const DriverTable& drv, CUgraphNode node, const Launch& l, CUlaunchAttributeID* failed) noexcept;
/// Throws DriverError for a failed attribute set (names the attribute).
[[noreturn]] void throw_attr_error(const DriverTable& drv, CUresult r, CUlaunchAttributeID id, std::string_view what);
/// Throws UsageError: an executable's node attributes cannot be changed per node.
[[noreturn]] void throw_exec_attributes(std::string_view what, unsigned attributes);

/// The previous parameters of a kernel node, saved for the undo of an update: the driver's
/// struct, a copy of the argument values it pointed at, and the attributes the update changes.
template <class... P>
struct KernelSaved {
  static constexpr std::size_t n = sizeof...(P);
  static constexpr std::array<std::size_t, n> sizes{sizeof(P)...};
  static constexpr std::array<std::size_t, n> offsets = [] {
    std::array<std::size_t, n> o{};
    constexpr std::array<std::size_t, n> al{alignof(P)...};
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      at = (at + al[i] - 1) / al[i] * al[i];
      o[i] = at;
      at += sizes[i];
    }
    return o;
  }();
  static constexpr std::size_t bytes = n ? offsets[n ? n - 1 : 0] + sizes[n ? n - 1 : 0] : 1;

  CUDA_KERNEL_NODE_PARAMS params;
  void* args[n ? n : 1];
  alignas(16) std::byte values[bytes];
  unsigned nattrs;
  LaunchAttr* attrs;  // nattrs of them, in the arena too (none for most updates)

  static CUresult restore(const DriverTable& drv, CUgraphNode node, const void* self) noexcept {
    const auto* s = static_cast<const KernelSaved*>(self);
    CUresult r = raw<Entry::cuGraphKernelNodeSetParams>(drv, node, &s->params);
    for (unsigned i = 0; i < s->nattrs && r == CUDA_SUCCESS; ++i)
      r = raw<Entry::cuGraphKernelNodeSetAttribute>(drv, node, s->attrs[i].id, &s->attrs[i].value);
    return r;
  }
};

/// One kernel node's parameters and owners, built from the user's arguments in one pass. Not
/// movable: the driver parameters point into it.
template <class... P>
class KernelDesc : public DescBase {
 public:
  static constexpr const char* noun = "a kernel node";

  /// `kernel` is what the version keeps of the kernel: a Kernel (a launch copies it) or the
  /// kernel's record itself (an update moves in the reference it took: no second count).
  template <class K, class... A>
  KernelDesc(const DriverTable& drv, std::string_view what, const KernelInfo& info, K&& kernel, const Launch& l,
             A&&... args)
      : DescBase(CU_GRAPH_NODE_TYPE_KERNEL), checked_(check(what, l, args...)), values_{kernel_value<P>(args)...},
        launch_(l) {
    if (l.shared_memory_bytes() > 48u * 1024u) raise_dynamic_shared(drv, info.function, info.name, l.shared_memory_bytes(), what);
    std::apply([&](auto&... v) {
      std::size_t i = 0;
      ((ptrs_[i++] = static_cast<void*>(&v)), ...);
    }, values_);
    CUDA_KERNEL_NODE_PARAMS_v3& p = params_.kernel;
    p.func = info.function;
    p.gridDimX = l.grid().x;
    p.gridDimY = l.grid().y;
    p.gridDimZ = l.grid().z;
    p.blockDimX = l.block().x;
    p.blockDimY = l.block().y;
    p.blockDimZ = l.block().z;
    p.sharedMemBytes = static_cast<unsigned>(l.shared_memory_bytes());
    p.kernelParams = sizeof...(P) ? ptrs_ : nullptr;
    p.ctx = info.context;
    owners_.owners = owners_of(std::tuple_cat(kernel_ref<P>(std::forward<A>(args))...), std::forward<K>(kernel));
  }
  KernelDesc(const KernelDesc&) = delete;
  KernelDesc& operator=(const KernelDesc&) = delete;

  const Launch& launch() const noexcept { return launch_; }
  bool has_attributes() const noexcept { return launch_.attributes() != 0; }

  /// Sets the Launch's attributes on a node just made from this descriptor; throws DriverError.
  void set_attributes(const DriverTable& drv, CUgraphNode node, std::string_view what) const {
    CUlaunchAttributeID failed{};
    if (CUresult r = set_launch_attrs(drv, node, launch_, &failed); r != CUDA_SUCCESS)
      throw_attr_error(drv, r, failed, what);
  }

  /// Reads `node`'s current parameters and the attributes this update changes into `arena`
  /// (cuGraphKernelNodeGetParams, cuGraphKernelNodeGetAttribute). Throws DriverError.
  Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) const {
    using S = KernelSaved<P...>;
    auto* s = static_cast<S*>(arena.allocate(sizeof(S), alignof(S)));
    CUDA_KERNEL_NODE_PARAMS prev{};
    call<Entry::cuGraphKernelNodeGetParams>(drv, "reading a kernel node's parameters", node, &prev);
    s->params = prev;
    for (std::size_t i = 0; i < S::n; ++i) {
      std::memcpy(s->values + S::offsets[i], prev.kernelParams[i], S::sizes[i]);
      s->args[i] = s->values + S::offsets[i];
    }
    s->params.kernelParams = S::n ? s->args : nullptr;
    s->params.extra = nullptr;
    LaunchAttr now[7];
    s->nattrs = static_cast<unsigned>(launch_attrs(launch_, now));
    s->attrs = s->nattrs ? static_cast<LaunchAttr*>(arena.allocate(sizeof(LaunchAttr) * s->nattrs, alignof(LaunchAttr)))
                         : nullptr;
    for (unsigned i = 0; i < s->nattrs; ++i) {
      s->attrs[i].id = now[i].id;
      call<Entry::cuGraphKernelNodeGetAttribute>(drv, "reading a kernel node's attribute", node, now[i].id,
                                                 &s->attrs[i].value);
    }
    return {&S::restore, s};
  }

  /// The edit update's driver calls (cuGraphNodeSetParams, then the attributes). Throws
  /// DriverError naming the call or the attribute; a failure after the parameters changed first
  /// puts the node back as it was (`undo`).
  void apply(const DriverTable& drv, CUgraphNode node, const Undo& undo, std::string_view what) {
    if (CUresult r = raw<Entry::cuGraphNodeSetParams>(drv, node, &params_); r != CUDA_SUCCESS)
      throw_call_error(drv, Entry::cuGraphNodeSetParams, r, "updating a kernel node");
    if (!has_attributes()) return;
    CUlaunchAttributeID failed{};
    if (CUresult r = set_launch_attrs(drv, node, launch_, &failed); r != CUDA_SUCCESS) {
      undo.restore(drv, node, undo.saved);
      throw_attr_error(drv, r, failed, what);
    }
  }

 private:
  template <class... A>
  static bool check(std::string_view what, const Launch& l, const A&... a) {
    check_dims(what, l);
    [&]<std::size_t... I>(std::index_sequence<I...>) { (check_kernel_arg<P>(what, I, a), ...); }(
        std::index_sequence_for<A...>{});
    return true;
  }

  bool checked_;
  std::tuple<P...> values_;
  void* ptrs_[sizeof...(P) ? sizeof...(P) : 1];
  Launch launch_;
};

}  // namespace tether::detail
