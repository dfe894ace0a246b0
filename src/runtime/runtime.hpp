// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../driver/api.hpp"
#include "../driver/table.hpp"

namespace tether {
class Runtime;
namespace detail {
const DriverTable& table_of(const Runtime& rt) noexcept;
}  // namespace detail
}  // namespace tether

TETHER_EXPORT namespace tether {

class Context;

/// The entry point of tether: a handle to one loaded driver (real or simulated).
///
/// A `Runtime` is a cheap, copyable reference to process-wide driver state that lives until the
/// process exits (drivers are never unloaded, so objects released during exit can still reach
/// theirs). Thread safety: all members are safe to call concurrently.
class Runtime {
 public:
  /// Opens the driver selected by the environment variable `TETHER_DRIVER`:
  /// - `cuda`: the real driver (`Runtime::cuda()`), or DriverUnavailable;
  /// - `sim`: the simulated driver (`Runtime::simulated()`);
  /// - unset or empty: the real driver if it loads and sees a device, otherwise the simulator,
  ///   announced once per process on stderr with the reason the real driver was not used.
  /// Throws DriverUnavailable (reason `bad_selection` for any other value of `TETHER_DRIVER`).
  static Runtime open();

  /// Opens the real CUDA driver: `dlopen("libcuda.so.1")` (or the path in `TETHER_CUDA_LIBRARY`),
  /// `cuInit(0)`, then every entry point through `cuGetProcAddress`. The first successful load is
  /// reused by later calls. Throws DriverUnavailable: missing_library, missing_entry,
  /// stub_library, init_failed, no_device or too_old, with a message saying what to do.
  static Runtime cuda();

  /// Opens tether's in-process simulated driver (always part of the library).
  static Runtime simulated();

  /// Which driver this runtime uses.
  DriverKind kind() const noexcept;
  /// `cuDriverGetVersion` of the driver (13000 for CUDA 13.0).
  int driver_version() const noexcept;
  /// Number of CUDA devices the driver sees (`cuDeviceGetCount`), at least 1.
  int device_count() const noexcept;
  /// Where the driver came from: the library path, or "tether simulator".
  std::string_view origin() const noexcept;
  /// One line: "cuda driver 13.0 from libcuda.so.1, 1 device".
  std::string describe() const;

  /// The primary context of device `ordinal`, retained while the returned Context or anything
  /// made in it lives (`Context::primary(*this, ordinal)`). Throws UsageError for an ordinal out
  /// of range, DriverError if the driver refuses. Defined in resources/context.cpp.
  Context context(int ordinal) const;

  /// The driver's entry points, for raw driver calls through the driver this runtime uses (the
  /// simulator's functions when it is selected): `rt.driver().cuStreamGetCaptureInfo(s.get(), ...)`.
  /// See DriverApi. Built on first use per driver and kept until the process exits; the reference
  /// stays valid as long. Throws std::bad_alloc (first use only). Since 0.5.
  const DriverApi& driver() const;

  friend bool operator==(const Runtime& a, const Runtime& b) noexcept { return a.table_ == b.table_; }

 private:
  explicit Runtime(const detail::DriverTable* t) noexcept : table_(t) {}
  friend const detail::DriverTable& detail::table_of(const Runtime& rt) noexcept;
  const detail::DriverTable* table_;
};

}  // namespace tether

namespace tether::detail {
inline const DriverTable& table_of(const Runtime& rt) noexcept { return *rt.table_; }
}  // namespace tether::detail
