// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The one table of CUDA driver entry points. Both drivers fill it: the real one from libcuda.so.1
// through cuGetProcAddress, the simulator with its own functions. Everything in tether calls the
// driver through a table, never through a linked symbol, so the table is also where faults are
// injected and calls are counted.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "error.hpp"

TETHER_EXPORT namespace tether {

/// Which implementation serves the driver table.
enum class DriverKind {
  cuda,       ///< the real CUDA driver, `libcuda.so.1`, loaded at run time
  simulated,  ///< tether's in-process simulated driver
};

/// "cuda" or "simulated".
constexpr std::string_view to_string(DriverKind k) noexcept { return k == DriverKind::cuda ? "cuda" : "simulated"; }

/// Formats a `cuDriverGetVersion` number: 13000 -> "13.0", 12030 -> "12.3".
std::string driver_version_string(int version);

}  // namespace tether

namespace tether::detail {

// Why the enumerators are spelled with cuda.h's names: cuda.h maps some of them to versioned
// symbols (cuMemAlloc -> cuMemAlloc_v2) with macros, and every TU that names an entry includes
// cuda.h, so the enumerator and the field type always agree with the prototype being called.
enum class Entry : std::uint16_t {
#define TETHER_ENTRY(name, ver) name,
#include "entry_points.inc"
#undef TETHER_ENTRY
};

inline constexpr std::size_t entry_count = 0
#define TETHER_ENTRY(name, ver) +1
#include "entry_points.inc"
#undef TETHER_ENTRY
    ;

template <Entry E>
struct EntryTraits;
#define TETHER_ENTRY(name, ver)                                      \
  template <>                                                        \
  struct EntryTraits<Entry::name> {                                  \
    using type = decltype(&::name);                                  \
    static constexpr std::string_view spelled = #name;               \
    static constexpr int version = ver;                              \
  };
#include "entry_points.inc"
#undef TETHER_ENTRY

inline constexpr std::array<std::string_view, entry_count> entry_names = {
#define TETHER_ENTRY(name, ver) std::string_view(#name),
#include "entry_points.inc"
#undef TETHER_ENTRY
};

inline constexpr std::array<int, entry_count> entry_versions = {
#define TETHER_ENTRY(name, ver) ver,
#include "entry_points.inc"
#undef TETHER_ENTRY
};

constexpr std::size_t index(Entry e) noexcept { return static_cast<std::size_t>(e); }
constexpr std::string_view entry_name(Entry e) noexcept { return entry_names[index(e)]; }

/// Finds an entry by its unversioned driver name ("cuGraphCreate"); nullopt if tether has none.
std::optional<Entry> find_entry(std::string_view name) noexcept;

enum class EntryState : std::uint8_t {
  resolved,  // the pointer is the driver's (or the simulator's) function
  too_old,   // the driver predates the ABI version tether calls; the pointer is a stub
  missing,   // the driver did not provide it; the pointer is a stub
};

// A stub of the right type for entries the driver cannot provide: it returns NOT_SUPPORTED
// instead of leaving a null pointer, and detail::call turns that into a clear DriverUnavailable.
template <class F>
struct StubFor;
template <class... A>
struct StubFor<CUresult (*)(A...)> {
  static CUresult fn(A...) { return CUDA_ERROR_NOT_SUPPORTED; }
};

struct DriverTable {
  std::array<void*, entry_count> fn{};
  std::array<EntryState, entry_count> state{};
  DriverKind kind = DriverKind::cuda;
  int version = 0;          // cuDriverGetVersion
  int device_count = 0;
  std::string origin;       // where it came from, e.g. "libcuda.so.1" or "tether simulator"
  // The simulator's explanation of the calling thread's last failure (nullptr for the real driver):
  // DriverError messages append it so that, e.g., a missing kernel twin says how to register one.
  std::string (*explain)() = nullptr;

  template <Entry E>
  typename EntryTraits<E>::type get() const noexcept {
    return reinterpret_cast<typename EntryTraits<E>::type>(fn[index(E)]);
  }
  template <Entry E>
  void set(typename EntryTraits<E>::type f, EntryState s = EntryState::resolved) noexcept {
    fn[index(E)] = reinterpret_cast<void*>(f);
    state[index(E)] = s;
  }
  template <Entry E>
  void set_stub(EntryState s) noexcept {
    set<E>(&StubFor<typename EntryTraits<E>::type>::fn, s);
  }
  // Fills every entry with its stub; loaders then overwrite what they provide.
  void stub_all(EntryState s) noexcept;
};

/// Throws the error of a failed call of entry `e` with result `r` while `context`: DriverError
/// (its message from format_driver_error, with the simulator's explanation), or DriverUnavailable
/// when the driver lacks the entry.
[[noreturn]] void throw_call_error(const DriverTable& t, Entry e, CUresult r, std::string context);

/// The message throw_call_error's exception would carry, written into `out` (cut to fit, the cut
/// marked by "..."); returns the written text. Never throws and allocates nothing of its own (only
/// the simulator's explanation allocates, and is left out if it cannot): the reporting path of
/// releases and destructors formats with it.
std::string_view format_call_error(std::span<char> out, const DriverTable& t, Entry e, CUresult r,
                                   std::string_view context) noexcept;

/// Reports a failed driver call that cannot be thrown (a release, a destructor) through the error
/// hook, with the message a throwing call would give (format_call_error; at most 1 KiB). Never throws.
void report_failure(const DriverTable& t, Entry entry, CUresult r, const char* what) noexcept;

inline std::string context_string(const char* s) { return s; }
inline std::string context_string(std::string_view s) { return std::string(s); }
inline std::string context_string(std::string s) { return s; }
template <std::invocable F>
std::string context_string(F&& f) {
  return std::string(std::forward<F>(f)());
}

/// Calls entry E and returns its result unchecked (for calls whose failure is a value).
template <Entry E, class... A>
CUresult raw(const DriverTable& t, A&&... a) {
  return t.get<E>()(std::forward<A>(a)...);
}

/// Calls entry E and throws DriverError (or DriverUnavailable for a missing entry) on failure.
/// `ctx` says what tether was doing: a string, or a callable that makes one (only on failure).
template <Entry E, class Ctx, class... A>
void call(const DriverTable& t, Ctx&& ctx, A&&... a) {
  CUresult r = t.get<E>()(std::forward<A>(a)...);
  if (r != CUDA_SUCCESS) [[unlikely]]
    throw_call_error(t, E, r, context_string(std::forward<Ctx>(ctx)));
}

/// Loads the real driver from `path` (normally "libcuda.so.1"), initialises it and resolves every
/// entry point. Throws DriverUnavailable naming the reason. The returned table is never unloaded.
std::unique_ptr<DriverTable> load_cuda_driver(const char* path);

/// The minimum driver tether opens at all (entries newer than this are checked per call).
inline constexpr int minimum_driver_version = 12030;

}  // namespace tether::detail
