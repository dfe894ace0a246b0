// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Dynamic parameters (docs/serving.md, "Dynamic parameters"): a Param<T> is bound into kernel
// node arguments when the nodes are made; `GraphExec::set` and `Edit::set` then change every node
// that uses it. What a node version knows of its parameters is one immutable owner of the
// version, a ParamUse: the kernel's whole argument image plus which arguments are parameters, so
// that a set can make the next version of each node without reading anything back from the
// driver, and the versions a set makes share everything else (the kernel, the other buffers).
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../attach/owners.hpp"
#include "args.hpp"
#include "launch.hpp"

namespace tether::detail {

class NodeAttachment;

/// What a parameter binds: a kernel argument's value, a buffer's address, or a node's launch
/// configuration (a Param<Launch>).
enum class ParamKind : std::uint8_t { value, buffer, launch };

/// What every Param<T> shares, whatever T: its name, what it binds and the size of the kernel
/// value it binds. Identity is the object's address (a node's ParamUse names the parameters it
/// binds).
class ParamStateBase {
 public:
  ParamStateBase(std::string name, std::size_t size, ParamKind kind) : name_(std::move(name)), size_(size), kind_(kind) {}
  ParamStateBase(const ParamStateBase&) = delete;
  ParamStateBase& operator=(const ParamStateBase&) = delete;
  virtual ~ParamStateBase() = default;
  const std::string& name() const noexcept { return name_; }
  std::size_t size() const noexcept { return size_; }
  bool buffer() const noexcept { return kind_ == ParamKind::buffer; }
  /// A Param<Launch>: it binds a node's dimensions and dynamic shared memory, not an argument.
  bool launch() const noexcept { return kind_ == ParamKind::launch; }

 private:
  std::string name_;
  std::size_t size_;  // bytes of the kernel argument (of a Launch for a launch parameter)
  ParamKind kind_;
};

template <class T>
class ParamState final : public ParamStateBase {
 public:
  ParamState(T v, std::string name, std::size_t size, ParamKind kind)
      : ParamStateBase(std::move(name), size, kind), value_(std::move(v)) {}
  T value() const {
    std::lock_guard lock(mu_);
    return value_;
  }
  void set(T v) {
    std::lock_guard lock(mu_);
    value_ = std::move(v);
  }

 private:
  mutable std::mutex mu_;
  T value_;
};

/// A parameter's value taken once, when a node binds it: the kernel sees exactly the value (and,
/// for a buffer, the memory) its version keeps. What the spec's constructor receives in place of
/// the Param argument.
template <class T>
struct ParamResolved {  // declared in args.hpp
  T value;
  std::shared_ptr<ParamStateBase> state;
};

/// A new value of a parameter, type-erased for the non-template set paths: the argument bytes (a
/// Launch for a launch parameter) and, for a buffer, the buffer the next versions keep.
struct ParamValue {
  const ParamStateBase* state = nullptr;
  const void* bytes = nullptr;      // state->size() of them
  std::shared_ptr<const void> held;  // a SharedBuffer<U> copy, or null
  std::uintptr_t held_base = 0;      // its address and device bytes (memory accounting)
  std::size_t held_bytes = 0;
};

/// A buffer a parameter site of a version keeps, and what it measures.
struct ParamHeld {
  std::shared_ptr<const void> keep;  // a SharedBuffer<U> copy; null for a value
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
};

/// What a kernel node version made with parameters shares with the versions sets make from it:
/// the driver parameters but the arguments and the dimensions, where each argument sits in the
/// image, which of them are parameters, the launch parameter if the node binds one, and the owners
/// of the rest (the kernel, the other kept buffers). Immutable.
struct ParamCore {
  struct Site {
    std::shared_ptr<ParamStateBase> param;
    std::uint32_t arg;  // the kernel parameter it is bound to
  };
  CUDA_KERNEL_NODE_PARAMS base{};  // kernelParams null; the first version's dimensions
  std::vector<std::uint32_t> offsets;  // per kernel parameter, into an image
  std::size_t image_bytes = 0;
  std::vector<Site> sites;
  std::shared_ptr<ParamStateBase> launch;  // a Param<Launch> binding the dimensions, or null
  Owners keep;
  std::string kernel;  // its name, for messages
};

/// A kernel node version's dimensions and dynamic shared memory: what a Param<Launch> changes.
struct LaunchDims {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared;
  static LaunchDims of(const CUDA_KERNEL_NODE_PARAMS& p) noexcept {
    return {{p.gridDimX, p.gridDimY, p.gridDimZ}, {p.blockDimX, p.blockDimY, p.blockDimZ}, p.sharedMemBytes};
  }
  static LaunchDims of(const Launch& l) noexcept {
    return {{l.grid().x, l.grid().y, l.grid().z},
            {l.block().x, l.block().y, l.block().z},
            static_cast<unsigned>(l.shared_memory_bytes())};
  }
};

/// One kernel node version's parameters: its argument image, its dimensions, and the buffers its
/// parameters bind (one per site; empty for a value). An owner of the version, never changed once made. Why the
/// image and the first site inline: a set makes one of these per node, and two heap allocations
/// each (measured: 2 per node, about 100 instructions) were most of what a set cost beside the
/// driver call.
struct ParamUse {
  static constexpr std::size_t kInline = 64;  // argument bytes kept inline

  explicit ParamUse(std::shared_ptr<const ParamCore> c) : core(std::move(c)), dims(LaunchDims::of(core->base)) {
    if (core->image_bytes > kInline) big.reset(new std::byte[core->image_bytes]);
    if (core->sites.size() > 1) rest.resize(core->sites.size() - 1);
  }
  ParamUse(ParamUse&&) noexcept = default;
  ParamUse& operator=(ParamUse&&) noexcept = default;

  std::byte* image() noexcept { return big ? big.get() : small; }
  const std::byte* image() const noexcept { return big ? big.get() : small; }
  ParamHeld& held(std::size_t site) noexcept { return site ? rest[site - 1] : first; }
  const ParamHeld& held(std::size_t site) const noexcept { return site ? rest[site - 1] : first; }

  /// Whether this version binds `p`.
  bool uses(const ParamStateBase* p) const noexcept {
    if (core->launch.get() == p) return true;
    for (const ParamCore::Site& s : core->sites)
      if (s.param.get() == p) return true;
    return false;
  }
  /// The driver parameters of this version; `args` has room for every kernel parameter.
  CUDA_KERNEL_NODE_PARAMS params(void** args) const noexcept {
    CUDA_KERNEL_NODE_PARAMS p = core->base;
    p.gridDimX = dims.grid[0];
    p.gridDimY = dims.grid[1];
    p.gridDimZ = dims.grid[2];
    p.blockDimX = dims.block[0];
    p.blockDimY = dims.block[1];
    p.blockDimZ = dims.block[2];
    p.sharedMemBytes = dims.shared;
    const std::byte* im = image();
    for (std::size_t i = 0; i < core->offsets.size(); ++i) args[i] = const_cast<std::byte*>(im) + core->offsets[i];
    p.kernelParams = core->offsets.empty() ? nullptr : args;
    p.extra = nullptr;
    return p;
  }
  /// This version with `v` in place of its parameter's arguments (or dimensions, for a launch
  /// parameter). Throws std::bad_alloc.
  ParamUse with(const ParamValue& v) const {
    ParamUse next(core);
    std::memcpy(next.image(), image(), core->image_bytes);
    next.dims = v.state == core->launch.get() ? LaunchDims::of(*static_cast<const Launch*>(v.bytes)) : dims;
    for (std::size_t i = 0; i < core->sites.size(); ++i) {
      if (core->sites[i].param.get() == v.state) {
        std::memcpy(next.image() + core->offsets[core->sites[i].arg], v.bytes, v.state->size());
        next.held(i) = {v.held, v.held_base, v.held_bytes};
      } else {
        next.held(i) = held(i);
      }
    }
    return next;
  }

  std::shared_ptr<const ParamCore> core;
  LaunchDims dims;  // this version's dimensions and dynamic shared memory

 private:
  std::unique_ptr<std::byte[]> big;  // the image, when larger than kInline
  ParamHeld first;                   // site 0's buffer
  std::vector<ParamHeld> rest;       // sites 1.. (empty for one site: no allocation)
  alignas(16) std::byte small[kInline];
};

/// "kernel scale with parameters step, x (and 2 owners)": what `inspect` shows for a ParamUse.
std::string tether_owner_label(const ParamUse& u);
/// What a memory measurement counts for a ParamUse: the buffers its sites bind and what the
/// kernel's other arguments keep.
void tether_owner_memory(const ParamUse& u, MemoryTally& t);

/// The ParamUse of a version (the bundle `version` heads), or null: versions of kernel nodes made
/// with parameters have one.
const ParamUse* param_use_of(const NodeAttachment* version) noexcept;

/// Whether the bundle `version` heads is a ParamUse alone: a version a value set supersedes then
/// keeps nothing its successor does not keep too (they share the core, and a value changes no
/// buffer), and the driver copied its arguments at the call, so a launch in flight needs nothing
/// of it.
bool param_use_only(const NodeAttachment* version) noexcept;

/// The largest number of kernel parameters a node with parameters may have (the set paths build
/// argument arrays on the stack).
inline constexpr std::size_t kMaxParamArgs = 64;

/// Before a set of launch parameter `v` (its bytes a Launch): in an executable (`exec`), throws
/// UsageError if the Launch sets an attribute (the driver cannot change an executable node's).
void check_launch_set(const ParamValue& v, std::string_view what, bool exec);
/// Raises the dynamic shared memory limit of `u`'s kernel if `v`'s Launch asks beyond 48 KiB
/// (cuFuncSetAttribute, as a node made with that Launch would). Throws DriverError.
void raise_for_launch_set(const DriverTable& drv, const ParamUse& u, const ParamValue& v, std::string_view what);

[[noreturn]] void throw_empty_param(std::string_view what);
/// Throws UsageError naming the parameter if `l` has a zero dimension or too much dynamic shared
/// memory for a kernel node.
void check_param_launch(const Launch& l, std::string_view what, std::string_view name);
[[noreturn]] void throw_empty_param_buffer(std::string_view what, std::string_view name);
struct ParamAccess;

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A dynamic parameter: a value bound into the arguments of any number of kernel nodes — passed
/// as a kernel argument where a value of type `T` would go, when nodes are added (`Edit::launch`,
/// `tether::kernel`), captured (`Stream::launch` inside a capture) or updated — and then changed
/// for all of them at once: `exec.set(param, v)` in an executable, `e.set(param, v)` in a graph.
/// `T` is a trivially copyable value (bound to a kernel parameter of exactly type `T`), a
/// `SharedBuffer<U>` (bound to a pointer parameter `U*`, or `const U*`; every node version keeps
/// the buffer it uses, as a buffer argument does), or a `Launch`: a `Param<Launch>` is passed
/// where a node's launch configuration goes (`e.launch(k, launch_param, args...)`, also in
/// `tether::kernel`, `Stream::launch` and kernel `update`s), and a set changes the bound nodes'
/// grid, block and dynamic shared memory (docs/serving.md says what happens to attributes).
///
/// A node takes the parameter's current value (`value()`) when it is made; `set_value` changes
/// what nodes made afterwards take, not the nodes made before (change those with `set`). A
/// parameter binds nodes of any number of graphs and executables; each graph and executable holds
/// its own value for its own nodes.
///
/// Copyable: copies are the same parameter. Empty state: default-constructed or moved from:
/// `operator bool` false; `value`, `set_value` and binding throw UsageError. Thread safety: every
/// member may be called from any thread.
template <class T>
class Param {
  static constexpr bool buffer = detail::IsSharedBuffer<T>::value;
  static constexpr bool launch = std::is_same_v<T, Launch>;
  static_assert(buffer || (std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> && !std::is_reference_v<T>),
                "Param<T>: T is a trivially copyable value type (not a pointer) or a SharedBuffer<U>");

 public:
  using value_type = T;
  /// An empty parameter (see "Empty state").
  Param() noexcept = default;
  /// A parameter whose nodes start with `initial`; `name` is what errors and `inspect` call it.
  /// A SharedBuffer value must not be empty, a Launch must have no zero dimension and at most
  /// 4 GiB of dynamic shared memory (UsageError).
  explicit Param(T initial, std::string name = "param") {
    check(initial, "Param", name);
    s_ = std::make_shared<detail::ParamState<T>>(
        std::move(initial), std::move(name), buffer ? sizeof(void*) : sizeof(T),
        buffer ? detail::ParamKind::buffer : launch ? detail::ParamKind::launch : detail::ParamKind::value);
  }
  /// Whether this handle names a parameter.
  explicit operator bool() const noexcept { return s_ != nullptr; }
  /// Its name ("param" unless given). Throws UsageError when empty.
  const std::string& name() const { return live("Param::name").name(); }
  /// The value nodes made from now on take. Throws UsageError when empty.
  T value() const { return live("Param::value").value(); }
  /// Sets the value nodes made from now on take (nodes already made keep theirs). Throws
  /// UsageError when empty or for a value the constructor refuses.
  void set_value(T v) {
    detail::ParamState<T>& s = live("Param::set_value");
    check(v, "Param::set_value", s.name());
    s.set(std::move(v));
  }

 private:
  friend struct detail::ParamAccess;
  static void check(const T& v, std::string_view what, std::string_view name) {
    if constexpr (buffer) {
      if (!v) detail::throw_empty_param_buffer(what, name);
    } else if constexpr (launch) {
      detail::check_param_launch(v, what, name);
    }
  }
  detail::ParamState<T>& live(std::string_view what) const {
    if (!s_) detail::throw_empty_param(what);
    return *s_;
  }
  std::shared_ptr<detail::ParamState<T>> s_;
};

}  // namespace tether

namespace tether::detail {

struct ParamAccess {
  /// The parameter's value, taken once, with its identity: what a node binds.
  template <class T>
  static ParamResolved<T> resolve(const Param<T>& p, std::string_view what) {
    ParamState<T>& s = p.live(what);
    return {s.value(), p.s_};
  }
  /// A new value of `p` for the set paths. For a buffer, `keep` receives the copy the next
  /// versions keep. Throws UsageError for an empty parameter or buffer.
  template <class T>
  static ParamValue value(const Param<T>& p, const T& v, std::string_view what, const void*& address) {
    ParamState<T>& s = p.live(what);
    if constexpr (IsSharedBuffer<T>::value) {
      if (!v) throw_empty_param_buffer(what, s.name());
      auto held = std::make_shared<const T>(v);
      address = static_cast<const void*>(held->data());
      return {&s, &address, std::move(held), reinterpret_cast<std::uintptr_t>(address),
              v.size() * sizeof(typename T::value_type)};
    } else {
      if constexpr (std::is_same_v<T, Launch>) check_param_launch(v, what, s.name());
      return {&s, &v, nullptr, 0, 0};
    }
  }
  template <class T>
  static const ParamStateBase* state(const Param<T>& p, std::string_view what) {
    return &p.live(what);
  }
};

/// What the spec's constructor receives for kernel argument `a`: a Param's value taken once, or
/// `a` itself.
template <class A>
decltype(auto) resolve_param(A&& a) {
  if constexpr (IsParam<std::remove_cvref_t<A>>::value)
    return ParamAccess::resolve(a, "binding a parameter");
  else
    return std::forward<A>(a);
}

}  // namespace tether::detail
