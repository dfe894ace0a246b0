// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "error.hpp"

namespace tether {
namespace {

struct ResultInfo {
  int value;
  std::string_view name;
  std::string_view text;
};

constexpr ResultInfo kResults[] = {
#define TETHER_RESULT(name, value, snake, text) {value, #name, text},
#include "result_codes.inc"
#undef TETHER_RESULT
};

const ResultInfo* find_result(int v) noexcept {
  for (const ResultInfo& r : kResults)
    if (r.value == v) return &r;
  return nullptr;
}

class DriverCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda"; }
  std::string message(int ev) const override {
    const ResultInfo* r = find_result(ev);
    if (!r) return fmt::format("CUDA_ERROR_{}: unknown CUDA driver result", ev);
    return fmt::format("{}: {}", r->name, r->text);
  }
};

// Appends to a fixed buffer, counting what does not fit.
struct Writer {
  std::span<char> out;
  std::size_t len = 0;
  void put(std::string_view s) noexcept {
    if (len < out.size()) std::memcpy(out.data() + len, s.data(), std::min(s.size(), out.size() - len));
    len += s.size();
  }
  void put(int v) noexcept {
    char b[16];
    int n = std::snprintf(b, sizeof b, "%d", v);
    put(std::string_view(b, n > 0 ? static_cast<std::size_t>(n) : 0));
  }
};

void default_hook(const ErrorReport& r) noexcept {
  std::fprintf(stderr, "tether: error while %.*s: %.*s\n", static_cast<int>(r.where.size()), r.where.data(),
               static_cast<int>(r.what.size()), r.what.data());
}

std::atomic<ErrorHook> g_hook{&default_hook};

}  // namespace

const std::error_category& driver_category() noexcept {
  // Why never destroyed: errors may be reported from static destructors and the reclaimer at exit.
  static const DriverCategory* cat = new DriverCategory;
  return *cat;
}

std::error_code make_error_code(Errc e) noexcept { return {static_cast<int>(e), driver_category()}; }

std::string_view result_name(int result) noexcept {
  if (const ResultInfo* r = find_result(result)) return r->name;
  // Why a small ring: the name must outlive the call without allocating; unknown codes are rare.
  static thread_local char buf[4][32];
  static thread_local unsigned next = 0;
  char* b = buf[next++ % 4];
  int n = std::snprintf(b, sizeof buf[0], "CUDA_ERROR_%d", result);
  return {b, static_cast<std::size_t>(n)};
}

std::string_view result_description(int result) noexcept {
  const ResultInfo* r = find_result(result);
  return r ? r->text : std::string_view{};
}

namespace {
std::string compose(std::string_view entry, int result, std::string_view description, std::string_view context) {
  std::string s(detail::format_driver_error({}, entry, result, description, context), '\0');
  detail::format_driver_error(s, entry, result, description, context);
  return s;
}
}  // namespace

namespace detail {
std::size_t format_driver_error(std::span<char> out, std::string_view entry, int result, std::string_view description,
                                std::string_view context, std::string_view explanation) noexcept {
  Writer w{out};
  w.put(entry);
  w.put(" failed with ");
  w.put(result_name(result));
  w.put(" (");
  w.put(result);
  w.put(": ");
  w.put(description);
  w.put(")");
  if (!context.empty() || !explanation.empty()) w.put(" while ");
  w.put(context);
  if (!explanation.empty()) {
    if (!context.empty()) w.put("; ");
    w.put("simulator: ");
    w.put(explanation);
  }
  return w.len;
}
}  // namespace detail

DriverError::DriverError(std::string_view entry_point, int result, std::string description, std::string context)
    : std::system_error(std::error_code(result, driver_category())),
      entry_point_(entry_point),
      message_(compose(entry_point, result,
                       description.empty() ? result_description(result) : std::string_view(description), context)),
      description_(description.empty() ? std::string(result_description(result)) : std::move(description)),
      context_(std::move(context)) {}

std::string_view to_string(Unavailable reason) noexcept {
  switch (reason) {
    case Unavailable::missing_library: return "missing_library";
    case Unavailable::missing_entry: return "missing_entry";
    case Unavailable::stub_library: return "stub_library";
    case Unavailable::init_failed: return "init_failed";
    case Unavailable::no_device: return "no_device";
    case Unavailable::too_old: return "too_old";
    case Unavailable::bad_selection: return "bad_selection";
  }
  return "unknown";
}

DriverUnavailable::DriverUnavailable(Unavailable reason, const std::string& message)
    : std::runtime_error(message), reason_(reason) {}

ErrorHook set_error_hook(ErrorHook hook) noexcept {
  return g_hook.exchange(hook ? hook : &default_hook, std::memory_order_acq_rel);
}

void report_error(std::string_view where, std::string_view what) noexcept {
  ErrorHook h = g_hook.load(std::memory_order_acquire);
  h(ErrorReport{where, what});
}

void report_current_exception(std::string_view where) noexcept {
  std::exception_ptr p = std::current_exception();
  if (!p) return report_error(where, "(no exception was being handled)");
  try {
    std::rethrow_exception(p);
  } catch (const std::exception& e) {
    report_error(where, e.what());
  } catch (...) {
    report_error(where, "an exception not derived from std::exception");
  }
}

}  // namespace tether
