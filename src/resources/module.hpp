// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "context.hpp"
#include "unique_handle.hpp"

namespace tether::detail {

// cuModuleUnload with the module's context pushed, under the release rule.
struct UnloadModule {
  ContextPtr owner;
  void operator()(CUmodule m) const noexcept;
};

using ModuleHandle = UniqueHandle<CUmodule, UnloadModule>;

struct KernelInfo;
struct KernelAccess;

// "kernel scale", built out of line for the same reason as buffer_label.
std::string kernel_label(std::string_view name);
// Kernel::module of a kernel that has none.
[[noreturn]] void throw_no_module(std::string_view name);

/// The name of type `T` as the compiler spells it ("double", "float *"), from
/// `__PRETTY_FUNCTION__`, for messages about declared kernel parameters. A compile-time constant
/// (unlike buffer.hpp's run-time type_name, which it could replace); no allocation.
template <class T>
constexpr std::string_view declared_type_name() noexcept {
  std::string_view f = __PRETTY_FUNCTION__;  // "... declared_type_name() [T = double]" (GCC: "[with T = double; ...]")
  std::size_t start = f.find("T = ");
  if (start == std::string_view::npos) return "?";
  start += 4;
  std::size_t end = f.find_first_of(";]", start);
  return f.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

/// One parameter of a kernel as `Kernel<Args...>` declares it.
struct DeclaredParam {
  std::size_t size;
  std::string_view type;
};

/// The declared parameter list of `Kernel<Args...>`, built at compile time.
template <class... Args>
inline constexpr std::array<DeclaredParam, sizeof...(Args)> declared_params{DeclaredParam{sizeof(Args), declared_type_name<Args>()}...};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

template <class... Args>
class Kernel;

/// The bytes of a module image: a fatbin, a cubin or PTX text, as `cuModuleLoadData` takes it.
/// The storage is shared and immutable, so copies are cheap; an Image is never empty. One extra
/// NUL always follows the `size()` bytes and is not counted, so any image read as text is
/// NUL-terminated (`cuModuleLoadData` needs that for PTX). An image made by `from_ptx` also ends
/// with PTX's own terminating NUL, which `size()` does count (the driver's size convention for
/// PTX); `from_file` and `from_bytes` count exactly the bytes given.
/// Thread safety: immutable; safe to share between threads.
class Image {
 public:
  /// Reads a whole file. Throws UsageError naming `path` if it cannot be opened or read, or is
  /// empty.
  static Image from_file(std::string_view path);

  /// Copies `bytes` (a fatbin or cubin held in memory). Throws UsageError if `bytes` is empty.
  static Image from_bytes(std::span<const std::byte> bytes);

  /// Copies PTX text (a trailing NUL in `ptx` is dropped) and appends its terminating NUL, which
  /// `size()` counts (the driver's convention for PTX images). Throws UsageError if `ptx` is
  /// empty.
  static Image from_ptx(std::string_view ptx);

  Image(const Image&) noexcept = default;
  Image& operator=(const Image&) noexcept = default;
  ~Image() = default;

  /// The first byte of the image.
  const std::byte* data() const noexcept { return bytes_->data(); }
  /// The number of bytes of the image (for PTX, including its terminating NUL).
  std::size_t size() const noexcept { return size_; }

 private:
  Image(std::shared_ptr<const std::vector<std::byte>> bytes, std::size_t size) noexcept
      : bytes_(std::move(bytes)), size_(size) {}

  std::shared_ptr<const std::vector<std::byte>> bytes_;
  std::size_t size_;
};

/// A shared reference to a loaded module (`cuModuleLoadData` through `Context::load_module`;
/// `cuModuleUnload`, with its context pushed, when the last copy goes). Shared because kernels
/// and graph kernel nodes keep their module loaded. Copying (and moving) shares the module; a
/// Module is never empty. The module keeps its context alive.
/// Thread safety: all members are safe to call concurrently; the last copy may be dropped on any
/// thread and never throws: the unload (cuModuleUnload) always runs on tether's reclaimer, because
/// it can block while a host callback runs.
class Module {
 public:
  /// What `inspect` shows for a module a node owns.
  friend std::string tether_owner_label(const Module&) { return "Module"; }
  Module(const Module&) noexcept = default;
  Module& operator=(const Module&) noexcept = default;
  ~Module() = default;

  /// The driver handle, valid while any copy (or a Kernel of it) lives.
  CUmodule get() const noexcept { return handle_->get(); }

  /// The context the module was loaded into.
  Context context() const noexcept;

  /// The function named `name` (`cuModuleGetFunction`, context pushed). The handle is valid only
  /// while the module stays loaded: prefer `kernel`, which keeps it loaded. Throws DriverError
  /// naming the kernel in its context ("getting kernel 'scale' from a module"), for example
  /// CUDA_ERROR_NOT_FOUND.
  CUfunction function(std::string_view name) const;

  /// The kernel `name`, typed by its parameter list `Args...` as declared in the device code.
  /// The kernel keeps this module loaded. Looks the function up like `function`, then, where the
  /// driver describes parameters (`cuFuncGetParamInfo`: CUDA 12.4 drivers and newer; the
  /// simulator answers from the twin's registered list), checks once, here, that the compiled
  /// kernel takes as many parameters as `Args...` and each of the same size; types of equal size
  /// (`int` and `float`, two pointer types) cannot be told apart. Where the driver cannot describe
  /// them the list is taken on trust. Throws DriverError like `function`; UsageError for a
  /// mismatch, naming the kernel and the first difference, with parameters counted from 0:
  /// `Module::kernel("scale"): parameter 2 is declared as 'double' (8 bytes) but the compiled
  /// kernel's parameter 2 takes 4 bytes`, or `Module::kernel("scale"): Kernel<float *, float>
  /// declares 2 parameters but the compiled kernel takes 3`. The check allocates nothing.
  template <class... Args>
  Kernel<Args...> kernel(std::string_view name) const;

  /// Whether both share the same loaded module.
  friend bool operator==(const Module& a, const Module& b) noexcept { return a.handle_ == b.handle_; }

 private:
  friend class Context;
  explicit Module(std::shared_ptr<const detail::ModuleHandle> h) noexcept : handle_(std::move(h)) {}
  std::shared_ptr<const detail::KernelInfo> kernel_info(std::string_view name,
                                                        std::span<const detail::DeclaredParam> declared) const;

  std::shared_ptr<const detail::ModuleHandle> handle_;
};

}  // namespace tether

namespace tether::detail {

// One immutable record shared by every copy of a Kernel: one reference count per copy, and the
// module reference that keeps the function's code loaded.
// Why shared_from_this: a kernel node's handle refers to its KernelInfo without owning it, and an
// update, which names no kernel, takes a new reference from it (docs/dsl.md, "Updates").
// A kernel of the CUDA runtime's registration (tether::kernel(&fn)) has no module: the runtime
// keeps its code loaded until it tears down at exit; `owner` keeps the primary context retained,
// and with it the function the driver made of the kernel in that context.
struct KernelInfo : std::enable_shared_from_this<KernelInfo> {
  KernelInfo(Module m, ContextPtr o, CUfunction f, std::string n)
      : module(std::move(m)), owner(std::move(o)), function(f), name(std::move(n)), context(owner->context) {}
  KernelInfo(ContextPtr o, CUfunction f, std::string n)
      : owner(std::move(o)), function(f), name(std::move(n)), context(owner->context) {}
  std::optional<Module> module;  // empty for a kernel of the CUDA runtime's registration
  ContextPtr owner;
  CUfunction function;
  std::string name;
  CUcontext context;  // owner's, kept here so that building a node does not copy a Context
};
/// What `inspect` shows for the kernel record an updated kernel node keeps: "kernel scale".
inline std::string tether_owner_label(const std::shared_ptr<const KernelInfo>& k) {
  return k ? "kernel " + k->name : "kernel";
}

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A kernel, typed by its parameter list: `Kernel<float*, float, int>` is a kernel declared
/// `__global__ void k(float*, float, int)`. Graph builders check launch arguments against
/// `Args...` at compile time. Copyable (copies share one record); a Kernel is never empty. Made
/// by `Module::kernel<Args...>(name)`, from a loaded module, which the Kernel keeps loaded for as
/// long as any copy lives; or, in a `.cu` file compiled by nvcc, by `tether::kernel(&fn, ctx)`
/// from the program's own `__global__` function, whose code the CUDA runtime keeps loaded until
/// the program exits (docs/first-program.md). Either way the Kernel keeps its context retained.
/// Thread safety: immutable; safe to share between threads.
template <class... Args>
class Kernel {
  static_assert((!std::is_reference_v<Args> && ...),
                "Kernel<Args...>: kernel parameters are passed by value; a reference type cannot be one");
  static_assert((std::is_trivially_copyable_v<Args> && ...),
                "Kernel<Args...>: every kernel parameter type must be trivially copyable, because the driver copies "
                "parameter values byte by byte");

 public:
  /// What `inspect` shows for a kernel a node owns: "kernel scale".
  friend std::string tether_owner_label(const Kernel& k) { return detail::kernel_label(k.name()); }
  // Why copies only: a move would leave an empty Kernel whose members dereference nothing; a
  // Kernel is never empty, so moving it copies (one reference count).
  Kernel(const Kernel&) noexcept = default;
  Kernel& operator=(const Kernel&) noexcept = default;
  ~Kernel() = default;

  /// The number of parameters.
  static constexpr std::size_t arity = sizeof...(Args);
  /// The parameter list as a tuple type.
  using params = std::tuple<Args...>;

  /// The driver handle of the function, valid while any copy of this Kernel lives.
  CUfunction function() const noexcept { return info_->function; }
  /// The kernel's name: as looked up in the module; for `tether::kernel(&fn, ctx)`, the name the
  /// CUDA runtime gives the function (`cudaFuncGetName`, without its parameter list) or, on the
  /// simulator, the name of its twin.
  std::string_view name() const noexcept { return info_->name; }
  /// Whether the kernel belongs to a loaded Module (`Module::kernel`); false for a kernel of the
  /// CUDA runtime's registration (`tether::kernel(&fn, ctx)`).
  bool has_module() const noexcept { return info_->module.has_value(); }
  /// The module the kernel belongs to. Throws UsageError for a kernel made by
  /// `tether::kernel(&fn, ctx)`, which belongs to none (`has_module()` says which).
  const Module& module() const {
    if (!info_->module) detail::throw_no_module(info_->name);
    return *info_->module;
  }
  /// The context the kernel belongs to (its module's, or the one given to `tether::kernel`).
  Context context() const noexcept { return detail::context_from(info_->owner); }
  /// The driver handle of the kernel's context.
  CUcontext context_handle() const noexcept { return info_->context; }

  /// Whether both name the same function.
  friend bool operator==(const Kernel& a, const Kernel& b) noexcept { return a.function() == b.function(); }

 private:
  friend class Module;
  friend struct detail::KernelAccess;
  explicit Kernel(std::shared_ptr<const detail::KernelInfo> info) noexcept : info_(std::move(info)) {}

  std::shared_ptr<const detail::KernelInfo> info_;
};

}  // namespace tether

namespace tether::detail {

/// The record behind a Kernel (which a kernel node's handle points at without owning it).
struct KernelAccess {
  template <class... P>
  static const KernelInfo* info(const Kernel<P...>& k) noexcept {
    return k.info_.get();
  }
  template <class... P>
  static Kernel<P...> make(std::shared_ptr<const KernelInfo> info) noexcept {
    return Kernel<P...>(std::move(info));
  }
};

/// The CUDA runtime's lookups of a `__global__` function by address, as `tether::kernel` (compiled
/// in the user's translation unit, which links the CUDA runtime) hands them to the library, which
/// itself links no CUDA library and calls them only on the real driver. Each returns the
/// `cudaError_t` (0: success).
struct RuntimeLookup {
  int (*get_kernel)(const void* fn, CUkernel* out);      // cudaGetKernel
  int (*get_function)(const void* fn, CUfunction* out);  // cudaGetFuncBySymbol, the context current
  int (*function_name)(const void* fn, const char** out);  // cudaFuncGetName
  const char* (*error_name)(int error);                  // cudaGetErrorName
  const char* (*error_string)(int error);                // cudaGetErrorString
};

/// The record of the kernel of `fn` in `ctx`: on the simulator, the twin registered for `fn`
/// (tether::sim::register_kernel(&fn, body)), and nothing calls `lookup`; on the real driver,
/// `lookup.get_kernel` and cuKernelGetFunction with the context pushed (`lookup.get_function`
/// where the driver lacks cuKernelGetFunction). Checks the compiled parameters against
/// `declared` as Module::kernel does. Throws UsageError (a null `fn`, no twin, a lookup the CUDA
/// runtime refuses, a mismatch) or DriverError.
std::shared_ptr<const KernelInfo> registered_kernel_info(const Context& ctx, const void* fn,
                                                         std::span<const DeclaredParam> declared,
                                                         const RuntimeLookup& lookup);

}  // namespace tether::detail

// Why outside the export block: an out-of-line member definition is a redeclaration of an entity
// the class already exports, and cannot itself be exported.
namespace tether {

template <class... Args>
Kernel<Args...> Module::kernel(std::string_view name) const {
  return Kernel<Args...>(kernel_info(name, detail::declared_params<Args...>));
}

}  // namespace tether
