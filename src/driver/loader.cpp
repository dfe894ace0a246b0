// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "table.hpp"

#include <cudaTypedefs.h>
#include <dlfcn.h>

namespace tether {

std::string driver_version_string(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

}  // namespace tether

namespace tether::detail {

// The field types come from cuda.h's prototypes and the version from cudaTypedefs.h's
// PFN_<name>_v<version>: if they ever disagree (new headers), this fails to compile rather than
// calling a function through the wrong ABI.
#define TETHER_ENTRY(name, ver) \
  static_assert(std::is_same_v<EntryTraits<Entry::name>::type, PFN_##name##_v##ver>, #name " ABI mismatch");
#include "entry_points.inc"
#undef TETHER_ENTRY

std::optional<Entry> find_entry(std::string_view name) noexcept {
  for (std::size_t i = 0; i < entry_count; ++i)
    if (entry_names[i] == name) return static_cast<Entry>(i);
  return std::nullopt;
}

void DriverTable::stub_all(EntryState s) noexcept {
#define TETHER_ENTRY(name, ver) set_stub<Entry::name>(s);
#include "entry_points.inc"
#undef TETHER_ENTRY
}

namespace {

// The message of a call to an entry this driver lacks (DriverUnavailable's). Never allocates.
std::size_t format_unavailable(std::span<char> out, const DriverTable& t, Entry e, std::string_view context) noexcept {
  std::string_view name = entry_name(e);
  int n = 0;
  if (t.state[index(e)] == EntryState::too_old) {
    int need = entry_versions[index(e)];
    n = std::snprintf(out.data(), out.size(), "%.*s needs a CUDA %d.%d driver; this driver is %d.%d (%s)",
                      static_cast<int>(name.size()), name.data(), need / 1000, (need % 1000) / 10, t.version / 1000,
                      (t.version % 1000) / 10, t.origin.c_str());
  } else {
    n = std::snprintf(out.data(), out.size(), "%.*s is not provided by the driver (%s)", static_cast<int>(name.size()),
                      name.data(), t.origin.c_str());
  }
  std::size_t len = n > 0 ? static_cast<std::size_t>(n) : 0;
  if (!context.empty()) {
    constexpr std::string_view kWhile = " while ";
    for (std::string_view part : {kWhile, context}) {
      if (len < out.size()) std::memcpy(out.data() + len, part.data(), std::min(part.size(), out.size() - len));
      len += part.size();
    }
  }
  return len;
}

// The driver's description of `r` where it gives one (cuGetErrorString), else the headers'.
std::string_view describe_result(const DriverTable& t, CUresult r) noexcept {
  if (t.state[index(Entry::cuGetErrorString)] == EntryState::resolved) {
    const char* s = nullptr;
    if (t.get<Entry::cuGetErrorString>()(r, &s) == CUDA_SUCCESS && s) return s;
  }
  return result_description(r);
}

}  // namespace

void throw_call_error(const DriverTable& t, Entry e, CUresult r, std::string context) {
  EntryState st = t.state[index(e)];
  if (st != EntryState::resolved) {
    // Measured first (snprintf needs room for its NUL), then written.
    std::string msg(format_unavailable({}, t, e, context) + 1, '\0');
    msg.resize(std::min(format_unavailable(msg, t, e, context), msg.size() - 1));
    throw DriverUnavailable(st == EntryState::too_old ? Unavailable::too_old : Unavailable::missing_entry, msg);
  }
  // Why the explanation is read first: it belongs to the failed call, and any later driver call
  // on this thread (cuGetErrorString included) may replace it.
  std::string why = t.explain ? t.explain() : std::string();
  std::string description(describe_result(t, r));
  if (!why.empty()) context += (context.empty() ? "" : "; ") + ("simulator: " + why);
  throw DriverError(entry_name(e), r, std::move(description), std::move(context));
}

std::string_view format_call_error(std::span<char> out, const DriverTable& t, Entry e, CUresult r,
                                   std::string_view context) noexcept {
  if (out.empty()) return {};
  std::size_t len = 0;
  if (t.state[index(e)] != EntryState::resolved) {
    len = format_unavailable(out, t, e, context);
  } else {
    std::string why;
    if (t.explain) {
      try {
        why = t.explain();
      } catch (...) {  // no memory for the explanation: the message goes without it
      }
    }
    len = format_driver_error(out, entry_name(e), r, describe_result(t, r), context, why);
  }
  if (len <= out.size()) return {out.data(), len};
  // Cut: say so in the last bytes.
  constexpr std::string_view kCut = "...";
  if (out.size() >= kCut.size()) std::memcpy(out.data() + out.size() - kCut.size(), kCut.data(), kCut.size());
  return {out.data(), out.size()};
}

void report_failure(const DriverTable& t, Entry entry, CUresult r, const char* what) noexcept {
  char buf[1024];
  report_error(what, format_call_error(buf, t, entry, r, what));
}

namespace {

using GetProcAddress = PFN_cuGetProcAddress_v12000;

[[noreturn]] void unavailable(Unavailable why, std::string msg) { throw DriverUnavailable(why, std::move(msg)); }

}  // namespace

std::unique_ptr<DriverTable> load_cuda_driver(const char* path) {
  // Why RTLD_LOCAL and never dlclose: the driver's symbols must not leak into the process, and
  // user-object destructors and deferred frees may still run inside it until process exit.
  void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    unavailable(Unavailable::missing_library,
                fmt::format("cannot load the CUDA driver {}: {}. Install the NVIDIA driver, point "
                            "TETHER_CUDA_LIBRARY at libcuda.so.1, or set TETHER_DRIVER=sim",
                            path, why ? why : "unknown dlopen error"));
  }
  auto sym = [&](const char* name) -> void* {
    void* p = ::dlsym(lib, name);
    if (!p)
      unavailable(Unavailable::missing_entry,
                  fmt::format("{} does not export {}: it is not a CUDA driver library of version {} or newer",
                              path, name, driver_version_string(minimum_driver_version)));
    return p;
  };
  auto get_proc = reinterpret_cast<GetProcAddress>(sym("cuGetProcAddress_v2"));
  auto init = reinterpret_cast<PFN_cuInit_v2000>(sym("cuInit"));
  auto get_version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(sym("cuDriverGetVersion"));

  CUresult r = init(0);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    unavailable(Unavailable::stub_library,
                fmt::format("{} is the CUDA toolkit's link stub, not a driver (cuInit returned "
                            "CUDA_ERROR_STUB_LIBRARY): install the NVIDIA driver or set TETHER_DRIVER=sim",
                            path));
  if (r == CUDA_ERROR_NO_DEVICE)
    unavailable(Unavailable::no_device,
                fmt::format("the CUDA driver {} sees no CUDA device (cuInit returned CUDA_ERROR_NO_DEVICE)", path));
  if (r != CUDA_SUCCESS)
    unavailable(Unavailable::init_failed, fmt::format("cuInit failed with {} ({}: {}) in {}", result_name(r),
                                                      static_cast<int>(r), result_description(r), path));

  auto t = std::make_unique<DriverTable>();
  t->kind = DriverKind::cuda;
  t->origin = path;
  r = get_version(&t->version);
  if (r != CUDA_SUCCESS)
    unavailable(Unavailable::init_failed,
                fmt::format("cuDriverGetVersion failed with {} in {}", result_name(r), path));
  if (t->version < minimum_driver_version)
    unavailable(Unavailable::too_old,
                fmt::format("the CUDA driver {} is version {}; tether needs {} or newer", path,
                            driver_version_string(t->version), driver_version_string(minimum_driver_version)));

  t->stub_all(EntryState::missing);
  for (std::size_t i = 0; i < entry_count; ++i) {
    if (entry_versions[i] > t->version) {
      t->state[i] = EntryState::too_old;
      continue;
    }
    void* p = nullptr;
    CUdriverProcAddressQueryResult found{};
    std::string name(entry_names[i]);
    r = get_proc(name.c_str(), &p, entry_versions[i], CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (r == CUDA_SUCCESS && p && found == CU_GET_PROC_ADDRESS_SUCCESS) {
      t->fn[i] = p;
      t->state[i] = EntryState::resolved;
    }
  }
  // Entries every use of tether needs; the rest fail when (and only when) they are called.
  for (Entry e : {Entry::cuDeviceGetCount, Entry::cuDeviceGet, Entry::cuGetErrorName, Entry::cuGetErrorString,
                  Entry::cuGraphCreate, Entry::cuGraphDestroy, Entry::cuUserObjectCreate}) {
    if (t->state[index(e)] != EntryState::resolved)
      unavailable(Unavailable::missing_entry,
                  fmt::format("cuGetProcAddress could not resolve {} (version {}) in {}", entry_name(e),
                              entry_versions[index(e)], path));
  }
  r = t->get<Entry::cuDeviceGetCount>()(&t->device_count);
  if (r != CUDA_SUCCESS)
    unavailable(Unavailable::init_failed, fmt::format("cuDeviceGetCount failed with {} in {}", result_name(r), path));
  if (t->device_count == 0)
    unavailable(Unavailable::no_device, fmt::format("the CUDA driver {} reports no CUDA device", path));
  return t;
}

}  // namespace tether::detail
