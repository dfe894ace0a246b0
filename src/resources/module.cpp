// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "module.hpp"

#include "../driver/symbols.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <iterator>

// The simulator's side of tether::kernel (src/sim/core.cpp).
namespace tether::sim::detail {
CUkernel registered_kernel(const void* fn, std::string* name);
}  // namespace tether::sim::detail

namespace tether {

namespace detail {
void UnloadModule::operator()(CUmodule m) const noexcept {
  release_with<Entry::cuModuleUnload>(owner, m, "unloading a module");
}

std::string kernel_label(std::string_view name) {
  std::string s = "kernel ";
  s.append(name);
  return s;
}

void throw_no_module(std::string_view name) {
  throw UsageError(fmt::format("Kernel::module: kernel '{}' belongs to no Module: it is the program's own "
                               "__global__ function (tether::kernel(&fn, ctx)), whose code the CUDA runtime keeps "
                               "loaded; ask has_module() first, or use context() for its context",
                               name));
}
}  // namespace detail

namespace {

// Why one extra NUL after the image: PTX handed to cuModuleLoadData must be NUL-terminated, and a
// binary image does not mind the byte after its end.
std::shared_ptr<const std::vector<std::byte>> terminated(const std::byte* p, std::size_t n) {
  auto v = std::make_shared<std::vector<std::byte>>();
  v->reserve(n + 1);
  v->assign(p, p + n);
  v->push_back(std::byte{0});
  return v;
}

}  // namespace

Image Image::from_file(std::string_view path) {
  std::string p(path);
  // Why stat first: an ifstream opens a directory and then throws std::ios_base::failure, without
  // the path, from its first read.
  struct ::stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    int err = errno;
    throw UsageError(
        fmt::format("Image::from_file: cannot open '{}': {}", p, err ? std::strerror(err) : "unknown error"));
  }
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("Image::from_file: '{}' is a directory, not a module image", p));
  if (!S_ISREG(st.st_mode)) throw UsageError(fmt::format("Image::from_file: '{}' is not a regular file", p));
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    int err = errno;
    throw UsageError(
        fmt::format("Image::from_file: cannot open '{}': {}", p, err ? std::strerror(err) : "unknown error"));
  }
  std::vector<char> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    throw UsageError(fmt::format("Image::from_file: cannot read '{}': {}", p, e.what()));
  }
  if (in.bad()) throw UsageError(fmt::format("Image::from_file: cannot read '{}'", p));
  if (bytes.empty()) throw UsageError(fmt::format("Image::from_file: '{}' is empty", p));
  std::size_t n = bytes.size();
  return Image(terminated(reinterpret_cast<const std::byte*>(bytes.data()), n), n);
}

Image Image::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.empty()) throw UsageError("Image::from_bytes: the image is empty");
  return Image(terminated(bytes.data(), bytes.size()), bytes.size());
}

Image Image::from_ptx(std::string_view ptx) {
  if (!ptx.empty() && ptx.back() == '\0') ptx.remove_suffix(1);
  if (ptx.empty()) throw UsageError("Image::from_ptx: the PTX text is empty");
  return Image(terminated(reinterpret_cast<const std::byte*>(ptx.data()), ptx.size()), ptx.size() + 1);
}

Context Module::context() const noexcept { return detail::context_from(handle_->deleter().owner); }

CUfunction Module::function(std::string_view name) const {
  detail::check_calls_allowed("Module::function");
  const detail::ContextState& s = *handle_->deleter().owner;
  std::string n(name);  // the driver wants a NUL-terminated name
  detail::ScopedContext scope(s);
  CUfunction f = nullptr;
  detail::call<detail::Entry::cuModuleGetFunction>(
      *s.table, [&] { return fmt::format("getting kernel '{}' from a module", n); }, &f, get(), n.c_str());
  return f;
}

namespace {

// The lookup the message names: `Module::kernel("scale")` (a name) or `tether::kernel(saxpy)` (a
// function).
struct Lookup {
  std::string_view call;
  std::string_view name;
  bool by_name;
};

[[noreturn]] void signature_mismatch(const Lookup& lookup, std::span<const detail::DeclaredParam> declared,
                                     std::size_t compiled, std::size_t index, std::size_t compiled_size) {
  const std::string call = lookup.by_name ? fmt::format("{}(\"{}\")", lookup.call, lookup.name)
                                          : fmt::format("{}({})", lookup.call, lookup.name);
  if (compiled != declared.size()) {
    std::string list;
    for (const detail::DeclaredParam& d : declared) list += (list.empty() ? "" : ", ") + std::string(d.type);
    throw UsageError(fmt::format("{}: Kernel<{}> declares {} parameter{} but the compiled kernel takes {}", call, list,
                                 declared.size(), declared.size() == 1 ? "" : "s", compiled));
  }
  auto bytes = [](std::size_t n) { return fmt::format("{} byte{}", n, n == 1 ? "" : "s"); };
  throw UsageError(fmt::format("{}: parameter {} is declared as '{}' ({}) but the compiled kernel's parameter {} "
                               "takes {}",
                               call, index, declared[index].type, bytes(declared[index].size), index,
                               bytes(compiled_size)));
}

// Compares the declared parameter list with what cuFuncGetParamInfo says about the compiled
// kernel (the context is current). Why it counts to the end even after a size mismatch: a wrong
// count is the more useful report. Allocates nothing unless it throws; declared.size() + 1 calls.
void check_signature(const detail::DriverTable& t, CUfunction f, const Lookup& lookup,
                     std::span<const detail::DeclaredParam> declared) {
  using detail::Entry;
  if (t.state[detail::index(Entry::cuFuncGetParamInfo)] != detail::EntryState::resolved) return;
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  // The driver's parameter buffer holds at most 32764 bytes, so no kernel has more parameters.
  constexpr std::size_t most = 32764;
  std::size_t bad = none, bad_size = 0, count = 0;
  for (; count <= most; ++count) {
    std::size_t offset = 0, size = 0;
    CUresult r = detail::raw<Entry::cuFuncGetParamInfo>(t, f, count, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;                 // past the last parameter (as on the H200)
    if (r == CUDA_ERROR_NOT_SUPPORTED && count == 0) return;  // this driver cannot describe parameters
    if (r != CUDA_SUCCESS)
      detail::throw_call_error(t, Entry::cuFuncGetParamInfo, r,
                               fmt::format("checking the parameters of kernel '{}'", lookup.name));
    if (count < declared.size() && bad == none && size != declared[count].size) {
      bad = count;
      bad_size = size;
    }
  }
  if (count > most) return;  // not a driver answer to trust
  if (count != declared.size() || bad != none) signature_mismatch(lookup, declared, count, bad, bad_size);
}

}  // namespace

std::shared_ptr<const detail::KernelInfo> Module::kernel_info(std::string_view name,
                                                              std::span<const detail::DeclaredParam> declared) const {
  detail::check_calls_allowed("Module::kernel");
  CUfunction f = function(name);
  {
    const detail::ContextState& s = *handle_->deleter().owner;
    detail::ScopedContext scope(s);
    check_signature(*s.table, f, Lookup{"Module::kernel", name, true}, declared);
  }
  return std::make_shared<const detail::KernelInfo>(*this, handle_->deleter().owner, f, std::string(name));
}

namespace detail {

namespace {

[[noreturn]] void runtime_refused(const RuntimeLookup& lookup, std::string_view call, const char* what, int error,
                                  std::string_view advice) {
  const char* name = lookup.error_name ? lookup.error_name(error) : nullptr;
  const char* text = lookup.error_string ? lookup.error_string(error) : nullptr;
  throw UsageError(fmt::format("{}: the CUDA runtime's {} failed with {} ({}: {}); {}", call, what,
                               name ? name : "an unknown error", error, text ? text : "no description", advice));
}

}  // namespace

std::shared_ptr<const KernelInfo> registered_kernel_info(const Context& ctx, const void* fn,
                                                         std::span<const DeclaredParam> declared,
                                                         const RuntimeLookup& lookup) {
  check_calls_allowed("tether::kernel");
  if (!fn) throw UsageError("tether::kernel: the function is null; pass the address of a __global__ function (&saxpy)");
  const ContextPtr& state = state_of(ctx);
  const DriverTable& t = *state->table;
  ScopedContext scope(*state);
  std::string name;
  CUfunction f = nullptr;
  if (t.kind == DriverKind::simulated) {
    // Why not the CUDA runtime here: it needs a real driver; the simulator's twins stand for the
    // program's kernels, registered per function.
    CUkernel k = sim::detail::registered_kernel(fn, &name);
    if (!k)
      throw UsageError(fmt::format("tether::kernel({}): the simulator has no twin for this function; register one "
                                   "with tether::sim::register_kernel(&kernel, body) before tether::kernel looks it up",
                                   function_label(fn)));
    call<Entry::cuKernelGetFunction>(
        t, [&] { return fmt::format("getting the function of kernel '{}'", name); }, &f, k);
  } else {
    const std::string label = function_label(fn);
    const std::string what = fmt::format("tether::kernel({})", label);
    constexpr std::string_view advice =
        "is the function a __global__ function of a .cu file compiled by nvcc for this GPU (-arch), in this program?";
    // The runtime's name of a kernel it found ("saxpy", "scale<float>"), else the label.
    auto runtime_name = [&] {
      const char* symbol = nullptr;
      return lookup.function_name(fn, &symbol) == 0 && symbol ? kernel_name_from_symbol(symbol) : label;
    };
    if (t.state[index(Entry::cuKernelGetFunction)] == EntryState::resolved) {
      CUkernel k = nullptr;
      if (int e = lookup.get_kernel(fn, &k); e != 0) runtime_refused(lookup, what, "cudaGetKernel", e, advice);
      name = runtime_name();
      call<Entry::cuKernelGetFunction>(
          t, [&] { return fmt::format("getting the function of kernel '{}'", name); }, &f, k);
    } else {
      if (int e = lookup.get_function(fn, &f); e != 0) runtime_refused(lookup, what, "cudaGetFuncBySymbol", e, advice);
      name = runtime_name();
    }
  }
  check_signature(t, f, Lookup{"tether::kernel", name, false}, declared);
  return std::make_shared<const KernelInfo>(state, f, std::move(name));
}

}  // namespace detail

}  // namespace tether
