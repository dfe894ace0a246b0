// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Loading NCCL at run time (no link-time dependency, as for the driver), its errors, and the
// small value types of the public API.
#include "library.hpp"

#include <dlfcn.h>

#include "../runtime/runtime.hpp"

namespace tether::nccl {

namespace {

// NCCL's own texts (ncclGetErrorString in 2.28.9), so that messages need no library.
std::string_view result_text(int r) noexcept {
  switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case 3: return "internal error - please report this issue to the NCCL developers";
    case 4: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case 6: return "remote process exited or there was a network error";
    case 7: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "nccl"; }
  std::string message(int ev) const override {
    return fmt::format("{}: {}", nccl::result_name(ev), result_text(ev));
  }
};

}  // namespace

const std::error_category& nccl_category() noexcept {
  static const Category c;
  return c;
}

std::error_code make_error_code(Errc e) noexcept { return {static_cast<int>(e), nccl_category()}; }

std::string_view result_name(int result) noexcept {
  switch (result) {
    case 0: return "ncclSuccess";
    case 1: return "ncclUnhandledCudaError";
    case 2: return "ncclSystemError";
    case 3: return "ncclInternalError";
    case 4: return "ncclInvalidArgument";
    case 5: return "ncclInvalidUsage";
    case 6: return "ncclRemoteError";
    case 7: return "ncclInProgress";
    default: return "ncclResult (unknown)";
  }
}

Error::Error(std::string_view entry_point, int result, std::string last_error, std::string context)
    : std::system_error(result, nccl_category()),
      entry_point_(entry_point),
      last_error_(std::move(last_error)),
      context_(std::move(context)) {
  message_ = fmt::format("{} failed with {} ({}: {})", entry_point_, nccl::result_name(result), result, result_text(result));
  if (!context_.empty()) message_ += " while " + context_;
  if (!last_error_.empty()) message_ += "; NCCL: " + last_error_;
}

Unavailable::Unavailable(tether::Unavailable reason, const std::string& message)
    : std::runtime_error(message), reason_(reason) {}

std::string_view to_string(DataType t) noexcept {
  switch (t) {
    case DataType::int8: return "int8";
    case DataType::uint8: return "uint8";
    case DataType::int32: return "int32";
    case DataType::uint32: return "uint32";
    case DataType::int64: return "int64";
    case DataType::uint64: return "uint64";
    case DataType::float16: return "float16";
    case DataType::float32: return "float32";
    case DataType::float64: return "float64";
    case DataType::bfloat16: return "bfloat16";
    case DataType::float8e4m3: return "float8e4m3";
    case DataType::float8e5m2: return "float8e5m2";
  }
  return "unknown";
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::avg: return "avg";
  }
  return "unknown";
}

UniqueId UniqueId::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != size)
    throw UsageError(fmt::format("nccl::UniqueId::from_bytes: an id is {} bytes, not {}", size, bytes.size()));
  UniqueId id;
  std::copy(bytes.begin(), bytes.end(), id.bytes_.begin());
  return id;
}

UniqueId UniqueId::from_hex(std::string_view hex) {
  if (hex.size() != 2 * size)
    throw UsageError(fmt::format("nccl::UniqueId::from_hex: an id is {} hexadecimal digits, not {}", 2 * size, hex.size()));
  auto digit = [&](std::size_t i) {
    const char c = hex[i];
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw UsageError(fmt::format("nccl::UniqueId::from_hex: character {} ('{}') is not a hexadecimal digit", i, c));
  };
  UniqueId id;
  for (std::size_t i = 0; i < size; ++i) id.bytes_[i] = static_cast<std::byte>(digit(2 * i) * 16 + digit(2 * i + 1));
  return id;
}

std::string UniqueId::to_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * size, '0');
  for (std::size_t i = 0; i < size; ++i) {
    const auto b = static_cast<unsigned>(bytes_[i]);
    s[2 * i] = kDigits[b >> 4];
    s[2 * i + 1] = kDigits[b & 15];
  }
  return s;
}

UniqueId::operator bool() const noexcept {
  return std::any_of(bytes_.begin(), bytes_.end(), [](std::byte b) { return b != std::byte{0}; });
}

}  // namespace tether::nccl

namespace tether::detail {

static_assert(nccl::UniqueId::size == nccl_abi::kUniqueIdBytes);

namespace {

// The oldest NCCL tether takes: CUDA graph capture of collectives, ncclGetLastError and
// ncclCommGetAsyncError as documented all exist since 2.14.
constexpr int kMinimumVersion = nccl_abi::version_code(2, 14, 0);

std::string version_string(int code) {
  return code >= 10000 ? fmt::format("{}.{}.{}", code / 10000, (code / 100) % 100, code % 100)
                       : fmt::format("{}.{}.{}", code / 1000, (code / 100) % 10, code % 100);
}

// An entry this NCCL lacks: a call fails with invalid_usage (nccl_call turns it into Unavailable
// before calling it; the stub is the backstop for raw calls through the table).
template <class F>
struct Stub;
template <class R, class... A>
struct Stub<R (*)(A...)> {
  static R call(A...) noexcept {
    if constexpr (std::is_pointer_v<R>)
      return "this entry point is not provided by the loaded NCCL";
    else
      return R::invalid_usage;
  }
};

[[noreturn]] void unavailable(Unavailable why, std::string msg) { throw nccl::Unavailable(why, msg); }

}  // namespace

std::unique_ptr<NcclTable> load_nccl(std::initializer_list<const char*> paths) {
  // Why RTLD_LOCAL and never dlclose: NCCL's threads and user-object destructors run inside it
  // until the process exits.
  void* lib = nullptr;
  const char* path = nullptr;
  std::string tried;
  for (const char* p : paths) {
    if ((lib = ::dlopen(p, RTLD_NOW | RTLD_LOCAL))) {
      path = p;
      break;
    }
    const char* why = ::dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", p, why ? why : "unknown dlopen error");
  }
  if (!lib)
    unavailable(Unavailable::missing_library,
                fmt::format("cannot load NCCL: tried {}. Install NCCL (Debian: libnccl2; or the nvidia-nccl-cu13 wheel, "
                            "whose nvidia/nccl/lib holds it), point TETHER_NCCL_LIBRARY at libnccl.so.2, or use the "
                            "simulator's NCCL with TETHER_DRIVER=sim",
                            tried));
  auto t = std::make_unique<NcclTable>();
  t->origin = path;
  auto get_version = reinterpret_cast<nccl_abi::ncclGetVersion_fn>(::dlsym(lib, "ncclGetVersion"));
  if (!get_version)
    unavailable(Unavailable::missing_entry, fmt::format("{} does not export ncclGetVersion: it is not an NCCL library", path));
  if (get_version(&t->version) != nccl_abi::Result::success)
    unavailable(Unavailable::missing_entry, fmt::format("ncclGetVersion failed in {}", path));
  if (t->version < kMinimumVersion)
    unavailable(Unavailable::too_old, fmt::format("NCCL {} in {} is older than tether needs ({})",
                                                  version_string(t->version), path, version_string(kMinimumVersion)));
  std::size_t i = 0;
#define TETHER_NCCL_X(name, ret, params, since)                                                                      \
  if (void* p = ::dlsym(lib, #name)) {                                                                               \
    t->name = reinterpret_cast<nccl_abi::name##_fn>(p);                                                              \
    t->provided[i] = true;                                                                                           \
  } else if (t->version >= since) {                                                                                  \
    unavailable(Unavailable::missing_entry, fmt::format("{} (NCCL {}) does not export {}", path,                      \
                                                        version_string(t->version), #name));                         \
  } else {                                                                                                           \
    t->name = &Stub<nccl_abi::name##_fn>::call;                                                                      \
  }                                                                                                                  \
  ++i;
  TETHER_NCCL_ENTRIES(TETHER_NCCL_X)
#undef TETHER_NCCL_X
  return t;
}

namespace {

struct Loaded {
  std::once_flag once;
  const NcclTable* table = nullptr;
  std::exception_ptr error;
};

}  // namespace

const NcclTable& nccl_table(const Runtime& rt) {
  if (rt.kind() == DriverKind::simulated) return simulated_nccl_table();
  static Loaded* loaded = new Loaded;  // immortal: NCCL is never unloaded
  std::call_once(loaded->once, [] {
    try {
      const char* path = std::getenv("TETHER_NCCL_LIBRARY");
      loaded->table = path && *path ? load_nccl({path}).release()
                                    // The loader's search path first; then where CUDA toolkits put NCCL.
                                    : load_nccl({"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                                                 "/usr/local/cuda/lib/libnccl.so.2"})
                                          .release();
    } catch (...) {
      loaded->error = std::current_exception();
    }
  });
  if (loaded->error) std::rethrow_exception(loaded->error);
  return *loaded->table;
}

std::string nccl_version_string(int code) { return version_string(code); }

void check_provided(const NcclTable& t, NcclEntry e, std::string_view what) {
  const auto i = static_cast<std::size_t>(e);
  if (t.provided[i]) return;
  throw nccl::Unavailable(Unavailable::too_old,
                          fmt::format("{}: {} needs NCCL {}; this NCCL is {} ({})", what, nccl_entry_name(e),
                                      version_string(nccl_entry_since[i]), version_string(t.version), t.origin));
}

void throw_nccl_error(const NcclTable& t, NcclEntry e, nccl_abi::Result r, std::string context) {
  std::string last;
  if (t.provided[static_cast<std::size_t>(NcclEntry::ncclGetLastError)])
    if (const char* s = t.ncclGetLastError(nullptr); s) last = s;
  throw nccl::Error(nccl_entry_name(e), static_cast<int>(r), std::move(last), std::move(context));
}

}  // namespace tether::detail

namespace tether::nccl {

std::string describe(const Runtime& rt) {
  const detail::NcclTable& t = detail::nccl_table(rt);
  return t.simulated ? fmt::format("NCCL {} (tether simulator)", detail::nccl_version_string(t.version))
                     : fmt::format("NCCL {} from {}", detail::nccl_version_string(t.version), t.origin);
}

int version(const Runtime& rt) { return detail::nccl_table(rt).version; }

}  // namespace tether::nccl
