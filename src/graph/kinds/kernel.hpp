// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The kernel node descriptor: typed arguments -> argument values, CUgraphNodeParams (kernel) and
// the version's owners (the Kernel, so its module, and every kept buffer), plus the launch
// attributes, set on the node after it exists.
#pragma once

#include "../../resources/module.hpp"
#include "../param.hpp"
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
  static constexpr bool param_mismatch = ((KernelArg<P, A>::param && !KernelArg<P, A>::param_ok) || ...);
  static_assert(!param_mismatch,
                "launch/update: a Param<T> binds to a kernel parameter of exactly type T, a Param<SharedBuffer<U>> to "
                "a pointer parameter U* (or const U*)");
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

/// The buffer arguments of a kernel spec that belong to another context than the kernel's, at
/// most `N` (its pointer parameters). Why raw bytes and a count: a single-device spec pays one
/// store (the count) and has nothing to destroy; records are written only for foreign buffers, and
/// the bytes left unwritten are copied with the spec as bytes, which reads no indeterminate value.
template <std::size_t N>
struct ForeignArgs {
  std::uint32_t count = 0;
  alignas(ForeignArg) std::byte raw[N * sizeof(ForeignArg)];

  void add(const ContextState* state, std::size_t index) noexcept {
    const ForeignArg a{state, index};
    std::memcpy(raw + count++ * sizeof(ForeignArg), &a, sizeof a);
  }
  /// enable_for_kernel for the recorded arguments. Out of line and cold, so that its frame and
  /// calls stay out of every consumer's hot path.
  [[gnu::cold, gnu::noinline]] void enable(const ContextState& kernel, std::string_view name,
                                          std::string_view what) const {
    ForeignArg list[N];
    std::memcpy(static_cast<void*>(list), raw, count * sizeof(ForeignArg));
    enable_for_kernel(kernel, name, std::span<const ForeignArg>(list, count), what);
  }
};

/// Records argument `index`, buffer `b`, in `out` if its memory belongs to another context than
/// `kernel`. An empty buffer is skipped: the spec's checks refuse it (or it binds a null pointer).
template <std::size_t N, class B>
void note_buffer(ForeignArgs<N>& out, std::size_t index, const B& b, CUcontext kernel) {
  if (!b) return;
  const Context c = b.context();
  if (c.get() == kernel) return;
  out.add(state_of(c).get(), index);  // the buffer, kept by the spec, keeps the state alive
}
/// The same for argument `a` of kernel parameter P, if it is a buffer the node keeps: a
/// SharedBuffer, a DeviceBuffer moved in, or a Param<SharedBuffer<T>>'s value. Unowned pointers
/// are the caller's business (docs/multi-gpu.md).
template <class P, std::size_t N, class A>
void note_foreign(ForeignArgs<N>& out, std::size_t index, const A& a, CUcontext kernel) {
  using B = Bare<A>;
  if constexpr (!std::is_pointer_v<P>)
    return;
  else if constexpr (IsSharedBuffer<B>::value || IsDeviceBuffer<B>::value)
    note_buffer(out, index, a, kernel);
  else if constexpr (IsParamResolved<B>::value) {
    if constexpr (IsSharedBuffer<Bare<decltype(a.value)>>::value) note_buffer(out, index, a.value, kernel);
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

/// The owners of a kernel node version made with parameters: one ParamUse holding the argument
/// image (`values`, laid out as KernelSaved lays them), the parameters' sites, the buffers they
/// bind, the launch parameter (or null), and `keep` (the kernel and the other kept arguments).
/// Throws std::bad_alloc (`keep` then goes to the reclaimer with the spec's other owners).
template <class... P, class... A>
Owners param_owners(const CUDA_KERNEL_NODE_PARAMS_v3& k, const std::string& kernel, const std::tuple<P...>& values,
                    std::shared_ptr<ParamStateBase> launch, Owners&& keep, const A&... args) {
  static_assert(sizeof...(P) <= kMaxParamArgs, "a kernel node with parameters has at most 64 kernel parameters");
  using S = KernelSaved<P...>;
  auto core = std::make_shared<ParamCore>();
  core->base.func = k.func;
  core->base.gridDimX = k.gridDimX;
  core->base.gridDimY = k.gridDimY;
  core->base.gridDimZ = k.gridDimZ;
  core->base.blockDimX = k.blockDimX;
  core->base.blockDimY = k.blockDimY;
  core->base.blockDimZ = k.blockDimZ;
  core->base.sharedMemBytes = k.sharedMemBytes;
  core->base.ctx = k.ctx;
  core->offsets.assign(S::offsets.begin(), S::offsets.end());
  core->image_bytes = S::bytes;
  core->kernel = kernel;
  core->launch = std::move(launch);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto site = [&](std::uint32_t arg, const auto& a) {
      if constexpr (IsParamResolved<Bare<decltype(a)>>::value) core->sites.push_back({a.state, arg});
    };
    (site(static_cast<std::uint32_t>(I), args), ...);
  }(std::index_sequence_for<A...>{});
  core->keep = std::move(keep);
  ParamUse use(core);
  std::apply([&](const auto&... v) {
    std::size_t i = 0;
    ((std::memcpy(use.image() + S::offsets[i++], &v, sizeof v)), ...);
  }, values);
  std::size_t at = 0;
  auto hold = [&](const auto& a) {
    if constexpr (IsParamResolved<Bare<decltype(a)>>::value) {
      using V = Bare<decltype(a.value)>;
      if constexpr (IsSharedBuffer<V>::value)
        use.held(at) = {std::make_shared<const V>(a.value), reinterpret_cast<std::uintptr_t>(a.value.data()),
                        a.value.size() * sizeof(typename V::value_type)};
      ++at;
    }
  };
  (hold(args), ...);
  return Owners{std::move(use)};
}

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A kernel node's spec (`tether::kernel(k, launch, args...)`): the kernel, its launch
/// configuration and arguments (checked at compile time against `Kernel<P...>`'s parameter list,
/// and at run time for empty buffers and zero dimensions), and the version's owners: the kernel
/// (so its module) and every kept buffer argument. The Launch's attributes are set on the node
/// after it is added (cuGraphKernelNodeSetAttribute) or passed to cuLaunchKernelEx by stream work;
/// an executable update refuses a Launch that sets any. An update with a spec must name the
/// kernel the node already runs (UsageError otherwise). Since 0.5.
///
/// Buffers of another device (since 0.7): a kept buffer argument whose memory belongs to another
/// context than the kernel's is noted when the spec is made, and every consumer enables peer
/// access from the kernel's context to the buffer's device before its driver call
/// (`Context::enable_peer_access`: one driver call per pair and context, then a cached bit). Where
/// the machine cannot connect the two devices, the consumer throws UsageError naming the
/// argument's position, both devices and the kernel, before its driver call. A `tether::unowned`
/// pointer to another device's memory is the caller's business: enable the access by hand.
template <class... P>
class Spec<KernelNode<P...>> : public detail::SpecKeeping<Spec<KernelNode<P...>>> {
  using Base = detail::SpecKeeping<Spec<KernelNode<P...>>>;
  using Base::owners_;
  using Base::params_;

 public:
  static constexpr const char* noun = "a kernel node";
  static constexpr CUgraphNodeType type = CU_GRAPH_NODE_TYPE_KERNEL;
  static constexpr const char* to_update = "the kernel node to update";

  /// What `tether::kernel` and the one-line spellings build. `kernel` is what the version keeps of
  /// the kernel: a Kernel (copied) or the kernel's record itself (an update moves in the reference
  /// it took: no second count).
  template <class K, class... A>
    requires(!(detail::IsParam<detail::Bare<A>>::value || ...))
  Spec(detail::What what, const detail::KernelInfo& info, K&& kernel, const Launch& l, A&&... args)
      : Spec(LaunchBound{}, what, info, std::forward<K>(kernel), l, std::forward<A>(args)...) {}
  /// The same with Param arguments: each parameter's value is taken once (what the node binds).
  template <class K, class... A>
    requires(detail::IsParam<detail::Bare<A>>::value || ...)
  Spec(detail::What what, const detail::KernelInfo& info, K&& kernel, const Launch& l, A&&... args)
      : Spec(LaunchBound{}, what, info, std::forward<K>(kernel), l, detail::resolve_param(std::forward<A>(args))...) {}
  /// The same with a launch parameter: its Launch is taken once, and the node binds it.
  template <class K, class... A>
  Spec(detail::What what, const detail::KernelInfo& info, K&& kernel, const Param<Launch>& l, A&&... args)
      : Spec(what, info, std::forward<K>(kernel), detail::ParamAccess::resolve(l, "binding a launch parameter"),
             std::forward<A>(args)...) {}
  template <class K, class... A>
  Spec(detail::What what, const detail::KernelInfo& info, K&& kernel, detail::ParamResolved<Launch>&& l, A&&... args)
      : Spec(LaunchBound{std::move(l.state)}, what, info, std::forward<K>(kernel), l.value,
             detail::resolve_param(std::forward<A>(args))...) {}

 private:
  // Which launch parameter the node binds (none: null); tags the constructor every other one
  // delegates to, whose arguments have had their parameters resolved.
  struct LaunchBound {
    std::shared_ptr<detail::ParamStateBase> param;
  };
  template <class K, class... A>
  Spec(LaunchBound bound, detail::What what, const detail::KernelInfo& info, K&& kernel, const Launch& l, A&&... args)
      : Base(CU_GRAPH_NODE_TYPE_KERNEL), checked_(check(what.text, l, args...)), values_{detail::kernel_value<P>(args)...},
        info_(&info) {
    // Why before the owners: a DeviceBuffer argument is moved into them. Why only once contexts of
    // two devices exist: before that no buffer can be another device's.
    if constexpr (kPointers > 0)
      if (detail::several_devices.load(std::memory_order_relaxed)) [[unlikely]]
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          (detail::note_foreign<P>(foreign_, I, args, info.context), ...);
        }(std::index_sequence_for<A...>{});
    if (l.attributes()) attributed_.emplace(l);
    CUDA_KERNEL_NODE_PARAMS_v3& p = params_.kernel;
    p.func = info.function;
    p.gridDimX = l.grid().x;
    p.gridDimY = l.grid().y;
    p.gridDimZ = l.grid().z;
    p.blockDimX = l.block().x;
    p.blockDimY = l.block().y;
    p.blockDimZ = l.block().z;
    p.sharedMemBytes = static_cast<unsigned>(l.shared_memory_bytes());
    p.ctx = info.context;
    if ((detail::IsParamResolved<detail::Bare<A>>::value || ...) || bound.param)
      owners_.owners = detail::param_owners(
          p, info.name, values_, std::move(bound.param),
          detail::owners_of(std::tuple_cat(detail::kernel_ref<P>(std::forward<A>(args))...), std::forward<K>(kernel)),
          args...);
    else
      owners_.owners =
          detail::owners_of(std::tuple_cat(detail::kernel_ref<P>(std::forward<A>(args))...), std::forward<K>(kernel));
  }

 public:
  /// The launch configuration (dimensions, dynamic shared memory, attributes).
  Launch launch() const noexcept {
    if (attributed_) return *attributed_;
    const CUDA_KERNEL_NODE_PARAMS_v3& p = params_.kernel;
    return Launch{Grid{p.gridDimX, p.gridDimY, p.gridDimZ}, Block{p.blockDimX, p.blockDimY, p.blockDimZ}}.shared_memory(
        p.sharedMemBytes);
  }

 private:
  friend struct detail::SpecAccess;

  // The argument pointers point into this object: set when the parameters are handed over, so
  // that the spec can move.
  void fix_pointers() noexcept {
    std::apply([&](auto&... v) {
      std::size_t i = 0;
      ((ptrs_[i++] = static_cast<void*>(&v)), ...);
    }, values_);
    params_.kernel.kernelParams = sizeof...(P) ? ptrs_ : nullptr;
  }
  const detail::KernelInfo* info() const noexcept { return info_; }
  bool has_attributes() const noexcept { return attributed_.has_value(); }
  /// What every consumer does first: enables peer access from the kernel's context to the
  /// devices of its buffers of other devices (cuCtxEnablePeerAccess, once per pair), then raises
  /// the kernel's dynamic shared memory limit if the launch needs it (cuFuncSetAttribute).
  void prepare(const detail::DriverTable& drv, CUcontext, std::string_view what) const {
    if constexpr (kPointers > 0)
      if (foreign_.count) [[unlikely]]
        foreign_.enable(*info_->owner, info_->name, what);
    if (params_.kernel.sharedMemBytes > 48u * 1024u)
      detail::raise_dynamic_shared(drv, info_->function, info_->name, params_.kernel.sharedMemBytes, what);
  }
  /// Sets the Launch's attributes on a node just made from this spec; throws DriverError.
  void after_add(const detail::DriverTable& drv, CUgraphNode node, std::string_view what) const {
    if (!has_attributes()) return;
    CUlaunchAttributeID failed{};
    if (CUresult r = detail::set_launch_attrs(drv, node, *attributed_, &failed); r != CUDA_SUCCESS)
      detail::throw_attr_error(drv, r, failed, what);
  }
  /// An executable cannot change a node's attributes.
  void check_exec(std::string_view what) const {
    if (attributed_) detail::throw_exec_attributes(what, attributed_->attributes());
  }

  /// Reads `node`'s current parameters and the attributes this update changes into `arena`
  /// (cuGraphKernelNodeGetParams, cuGraphKernelNodeGetAttribute). Throws DriverError.
  detail::Undo save(const detail::DriverTable& drv, CUgraphNode node, detail::Arena& arena) const {
    using detail::Entry;
    using S = detail::KernelSaved<P...>;
    auto* s = static_cast<S*>(arena.allocate(sizeof(S), alignof(S)));
    CUDA_KERNEL_NODE_PARAMS prev{};
    detail::call<Entry::cuGraphKernelNodeGetParams>(drv, "reading a kernel node's parameters", node, &prev);
    s->params = prev;
    for (std::size_t i = 0; i < S::n; ++i) {
      std::memcpy(s->values + S::offsets[i], prev.kernelParams[i], S::sizes[i]);
      s->args[i] = s->values + S::offsets[i];
    }
    s->params.kernelParams = S::n ? s->args : nullptr;
    s->params.extra = nullptr;
    detail::LaunchAttr now[7];
    s->nattrs = attributed_ ? static_cast<unsigned>(detail::launch_attrs(*attributed_, now)) : 0u;
    s->attrs = s->nattrs ? static_cast<detail::LaunchAttr*>(
                               arena.allocate(sizeof(detail::LaunchAttr) * s->nattrs, alignof(detail::LaunchAttr)))
                         : nullptr;
    for (unsigned i = 0; i < s->nattrs; ++i) {
      s->attrs[i].id = now[i].id;
      detail::call<Entry::cuGraphKernelNodeGetAttribute>(drv, "reading a kernel node's attribute", node, now[i].id,
                                                         &s->attrs[i].value);
    }
    return {&S::restore, s};
  }

  /// The edit update's driver calls (cuGraphNodeSetParams, then the attributes). Throws
  /// DriverError naming the call or the attribute; a failure after the parameters changed first
  /// puts the node back as it was (`undo`).
  void apply(const detail::DriverTable& drv, CUgraphNode node, const detail::Undo& undo, std::string_view what) {
    using detail::Entry;
    if (CUresult r = detail::raw<Entry::cuGraphNodeSetParams>(drv, node, &detail::SpecAccess::params(*this));
        r != CUDA_SUCCESS)
      detail::throw_call_error(drv, Entry::cuGraphNodeSetParams, r, "updating a kernel node");
    if (!has_attributes()) return;
    CUlaunchAttributeID failed{};
    if (CUresult r = detail::set_launch_attrs(drv, node, *attributed_, &failed); r != CUDA_SUCCESS) {
      undo.restore(drv, node, undo.saved);
      detail::throw_attr_error(drv, r, failed, what);
    }
  }

  /// Stream work: cuLaunchKernel, or cuLaunchKernelEx when the Launch sets attributes.
  CUresult enqueue(const detail::DriverTable& t, CUstream s, bool, detail::Entry* entry) {
    using detail::Entry;
    fix_pointers();
    const CUDA_KERNEL_NODE_PARAMS_v3& k = params_.kernel;
    if (has_attributes()) {
      detail::LaunchAttr a[7];
      const std::size_t n = detail::launch_attrs(*attributed_, a);
      CUlaunchAttribute attrs[7] = {};
      for (std::size_t i = 0; i < n; ++i) {
        attrs[i].id = a[i].id;
        attrs[i].value = a[i].value;
      }
      CUlaunchConfig c{};
      c.gridDimX = k.gridDimX;
      c.gridDimY = k.gridDimY;
      c.gridDimZ = k.gridDimZ;
      c.blockDimX = k.blockDimX;
      c.blockDimY = k.blockDimY;
      c.blockDimZ = k.blockDimZ;
      c.sharedMemBytes = k.sharedMemBytes;
      c.hStream = s;
      c.attrs = attrs;
      c.numAttrs = static_cast<unsigned>(n);
      *entry = Entry::cuLaunchKernelEx;
      return detail::raw<Entry::cuLaunchKernelEx>(t, &c, k.func, k.kernelParams, static_cast<void**>(nullptr));
    }
    *entry = Entry::cuLaunchKernel;
    return detail::raw<Entry::cuLaunchKernel>(t, k.func, k.gridDimX, k.gridDimY, k.gridDimZ, k.blockDimX, k.blockDimY,
                                              k.blockDimZ, k.sharedMemBytes, s, k.kernelParams,
                                              static_cast<void**>(nullptr));
  }

  template <class... A>
  static bool check(std::string_view what, const Launch& l, const A&... a) {
    detail::check_dims(what, l);
    [&]<std::size_t... I>(std::index_sequence<I...>) { (detail::check_kernel_arg<P>(what, I, a), ...); }(
        std::index_sequence_for<A...>{});
    return true;
  }

  bool checked_;
  std::tuple<P...> values_;
  void* ptrs_[sizeof...(P) ? sizeof...(P) : 1] = {};
  const detail::KernelInfo* info_;
  // The whole Launch only when it sets attributes (the dimensions and the dynamic shared memory
  // are in the driver parameters): copying it cost about 25 instructions on every kernel spec.
  std::optional<Launch> attributed_;
  // Buffer arguments of other devices, whose peer access `prepare` enables (none: count 0; a
  // kernel without pointer parameters has no room for any).
  static constexpr std::size_t kPointers = (std::size_t{std::is_pointer_v<P>} + ... + 0);
  [[no_unique_address]] std::conditional_t<(kPointers > 0), detail::ForeignArgs<kPointers>, std::tuple<>> foreign_;
};

/// A kernel node's spec: `k` launched with `launch` and `args` (see Spec<KernelNode<P...>>).
/// Checked at compile time like `Edit::launch`; throws UsageError for an empty buffer argument or
/// a zero dimension. Since 0.5.
template <class... P, class... A>
Spec<KernelNode<P...>> kernel(const Kernel<P...>& k, const Launch& launch, A&&... args) {
  static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
  return Spec<KernelNode<P...>>(detail::What{"tether::kernel"}, *detail::KernelAccess::info(k), k, launch,
                                std::forward<A>(args)...);
}
/// A kernel node's spec whose launch configuration is dynamic parameter `launch`: the node takes
/// its current Launch and binds it (`GraphExec::set(launch, l)` and `Edit::set` then change the
/// node's dimensions). Throws like the spelling with a Launch, and UsageError for an empty
/// parameter. Since 0.6.
template <class... P, class... A>
Spec<KernelNode<P...>> kernel(const Kernel<P...>& k, const Param<Launch>& launch, A&&... args) {
  static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
  return Spec<KernelNode<P...>>(detail::What{"tether::kernel"}, *detail::KernelAccess::info(k), k, launch,
                                std::forward<A>(args)...);
}
/// Shorthand for `kernel(k, Launch{grid, block}, args...)`. Since 0.5.
template <class... P, class... A>
Spec<KernelNode<P...>> kernel(const Kernel<P...>& k, Grid grid, Block block, A&&... args) {
  return kernel(k, Launch{grid, block}, std::forward<A>(args)...);
}

}  // namespace tether
