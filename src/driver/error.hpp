// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

TETHER_EXPORT namespace tether {

/// Every `CUresult` the CUDA 13 headers define, as a scoped enum usable with `std::error_code`.
/// The enumerator is the `CUDA_ERROR_*` name in snake case without the prefix
/// (`CUDA_ERROR_INVALID_VALUE` is `Errc::invalid_value`); the values are the driver's.
/// `DriverError::code() == Errc::not_supported` compares a caught error with a code.
enum class Errc : int {
#define TETHER_RESULT(name, value, snake, text) snake = value,
#include "result_codes.inc"
#undef TETHER_RESULT
};

/// The `std::error_category` of CUDA driver results ("cuda"). `message(ev)` gives
/// "CUDA_ERROR_NAME: description" from the headers' documentation, so it works with no driver
/// loaded. Thread safety: immutable singleton.
const std::error_category& driver_category() noexcept;

/// Makes an `std::error_code` in `driver_category()`; found by ADL so `Errc` converts implicitly.
std::error_code make_error_code(Errc e) noexcept;

/// The `CUDA_ERROR_*` (or `CUDA_SUCCESS`) name of a driver result, or "CUDA_ERROR_<value>" for a
/// value the CUDA 13 headers do not define. Never calls the driver.
std::string_view result_name(int result) noexcept;

/// The headers' one-sentence description of a driver result (empty for unknown values).
std::string_view result_description(int result) noexcept;

/// A CUDA driver call failed. Carries the entry point (for example "cuGraphAddKernelNode"), the
/// result as an `std::error_code` in `driver_category()`, the `CUDA_ERROR_*` name, the driver's
/// own description of the result, and what tether was doing when it made the call.
///
/// `what()` reads: "cuGraphCreate failed with CUDA_ERROR_INVALID_VALUE (1: invalid argument)
/// while creating a graph". Thread safety: immutable after construction.
class DriverError : public std::system_error {
 public:
  /// `entry_point` must name a driver entry point; `description` is the driver's text for the
  /// result (empty selects the headers' description); `context` says what tether was doing.
  DriverError(std::string_view entry_point, int result, std::string description, std::string context);

  /// The driver entry point that failed, e.g. "cuGraphInstantiate".
  std::string_view entry_point() const noexcept { return entry_point_; }
  /// The numeric `CUresult`.
  int result() const noexcept { return code().value(); }
  /// The whole message (see the class comment).
  const char* what() const noexcept override { return message_.c_str(); }
  /// The `CUDA_ERROR_*` name of the result.
  std::string_view result_name() const noexcept { return tether::result_name(result()); }
  /// The description of the result (the driver's `cuGetErrorString` where available).
  std::string_view description() const noexcept { return description_; }
  /// What tether was doing, e.g. "adding kernel node 'scale' to graph 0x5581...".
  std::string_view context() const noexcept { return context_; }

 private:
  std::string entry_point_;
  std::string message_;
  std::string description_;
  std::string context_;
};

/// The API was misused: a removed or invalidated handle, a node of another graph, an impossible
/// request. Thrown before any driver call is made, so the driver state is unchanged.
class UsageError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Why no usable driver could be opened, or why a driver feature is missing.
enum class Unavailable {
  missing_library,   ///< `libcuda.so.1` (or `TETHER_CUDA_LIBRARY`) could not be loaded.
  missing_entry,     ///< the library lacks an entry point tether needs (not a CUDA driver?).
  stub_library,      ///< the library is the toolkit's link stub (`CUDA_ERROR_STUB_LIBRARY`).
  init_failed,       ///< `cuInit` failed for another reason (its result is in the message).
  no_device,         ///< the driver works but sees no CUDA device.
  too_old,           ///< the driver is older than tether, or than a feature, needs.
  bad_selection,     ///< `TETHER_DRIVER` holds a value other than `cuda` or `sim`.
};

/// The name of an `Unavailable` reason ("stub_library", ...).
std::string_view to_string(Unavailable reason) noexcept;

/// No usable driver, or a driver feature that this driver lacks (`reason() == too_old`).
/// The message says what was tried and what to do about it.
class DriverUnavailable : public std::runtime_error {
 public:
  DriverUnavailable(Unavailable reason, const std::string& message);
  Unavailable reason() const noexcept { return reason_; }

 private:
  Unavailable reason_;
};

/// One failure that could not be thrown (a destructor, a reclaimer thread, an undo step).
struct ErrorReport {
  std::string_view where;  ///< what tether was doing, e.g. "destroying a stream"
  std::string_view what;   ///< the error message
};

/// The reporting hook: called for every error that cannot be thrown. Must not throw; it may be
/// called on any thread, including tether's reclaimer, and concurrently.
using ErrorHook = void (*)(const ErrorReport&) noexcept;

/// Installs `hook` (nullptr restores the default, which writes one line to stderr) and returns
/// the previous hook. Thread safety: atomic; a report in progress may still use the old hook.
ErrorHook set_error_hook(ErrorHook hook) noexcept;

/// Sends a report to the current hook. Never throws, whatever the hook does.
void report_error(std::string_view where, std::string_view what) noexcept;

/// Reports the exception currently being handled (call inside a `catch`). Never throws.
void report_current_exception(std::string_view where) noexcept;

}  // namespace tether

namespace tether::detail {

/// Writes the message of a failed driver call — "cuGraphCreate failed with CUDA_ERROR_INVALID_VALUE
/// (1: invalid argument) while creating a graph", then "; simulator: " and `explanation` if there is
/// one — into `out`, as much as fits (no terminating NUL), and returns the length of the whole
/// message (larger than `out.size()` when it was cut). The one formatter of DriverError::what() and
/// of reports that cannot throw (format_call_error). Never allocates, never throws.
std::size_t format_driver_error(std::span<char> out, std::string_view entry, int result, std::string_view description,
                                std::string_view context, std::string_view explanation = {}) noexcept;

}  // namespace tether::detail

template <>
struct std::is_error_code_enum<tether::Errc> : std::true_type {};

#if TETHER_HAS_FMT

/// `fmt::format("{}", driver_error)` gives `what()`.
template <>
struct fmt::formatter<tether::DriverError> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::DriverError& e, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(e.what(), ctx);
  }
};

/// `fmt::format("{}", usage_error)` gives `what()`.
template <>
struct fmt::formatter<tether::UsageError> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::UsageError& e, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(e.what(), ctx);
  }
};

/// `fmt::format("{}", errc)` gives the `CUDA_ERROR_*` name.
template <>
struct fmt::formatter<tether::Errc> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(tether::Errc e, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tether::result_name(static_cast<int>(e)), ctx);
  }
};
#endif  // TETHER_HAS_FMT
