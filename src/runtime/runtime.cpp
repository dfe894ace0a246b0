// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "runtime.hpp"

#include "../attach/reclaimer.hpp"

#include "../sim/table.hpp"

namespace tether {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

std::mutex g_cuda_mutex;
const detail::DriverTable* g_cuda = nullptr;  // never freed: see Runtime's documentation

std::atomic<bool> g_announced{false};

// The public view of each driver table (Runtime::driver): at most two tables exist (the real
// driver's and the simulator's), each never freed, so their views are never freed either.
std::mutex g_api_mutex;
std::vector<const DriverApi*>* g_apis = nullptr;

}  // namespace

bool DriverApi::provides(std::string_view name) const noexcept {
  if (!table) return false;
  std::optional<detail::Entry> e = detail::find_entry(name);
  return e && table->state[detail::index(*e)] == detail::EntryState::resolved;
}

const DriverApi& Runtime::driver() const {
  std::lock_guard lock(g_api_mutex);
  if (!g_apis) g_apis = new std::vector<const DriverApi*>();
  for (const DriverApi* a : *g_apis)
    if (a->table == table_) return *a;
  auto api = std::make_unique<DriverApi>();
#define TETHER_ENTRY(name, ver) api->name = table_->get<detail::Entry::name>();
#include "../driver/entry_points.inc"
#undef TETHER_ENTRY
  api->table = table_;
  g_apis->reserve(g_apis->size() + 1);
  g_apis->push_back(api.get());
  return *api.release();
}

Runtime Runtime::cuda() {
  detail::watch_fork();
  detail::check_calls_allowed("Runtime::cuda");
  std::lock_guard lock(g_cuda_mutex);
  if (!g_cuda) {
    const char* path = env("TETHER_CUDA_LIBRARY");
    g_cuda = detail::load_cuda_driver(path ? path : "libcuda.so.1").release();
  }
  return Runtime(g_cuda);
}

Runtime Runtime::simulated() {
  detail::watch_fork();
  detail::check_calls_allowed("Runtime::simulated");
  // Why a function-local static pointer: built once, thread-safely, and never destroyed.
  static const detail::DriverTable* table = sim::make_table().release();
  return Runtime(table);
}

Runtime Runtime::open() {
  const char* sel = env("TETHER_DRIVER");
  if (sel) {
    std::string_view s(sel);
    if (s == "cuda") return cuda();
    if (s == "sim") return simulated();
    throw DriverUnavailable(Unavailable::bad_selection,
                            fmt::format("TETHER_DRIVER is '{}'; it must be 'cuda', 'sim' or unset", s));
  }
  try {
    return cuda();
  } catch (const DriverUnavailable& real) {
    Runtime rt = [&] {
      try {
        return simulated();
      } catch (const DriverUnavailable& sim) {
        throw DriverUnavailable(real.reason(), fmt::format("no usable driver: {}; and {}", real.what(), sim.what()));
      }
    }();
    if (!g_announced.exchange(true))
      std::fprintf(stderr, "tether: using the simulated CUDA driver (%s). Set TETHER_DRIVER=sim to choose it explicitly.\n",
                   real.what());
    return rt;
  }
}

DriverKind Runtime::kind() const noexcept { return table_->kind; }
int Runtime::driver_version() const noexcept { return table_->version; }
int Runtime::device_count() const noexcept { return table_->device_count; }
std::string_view Runtime::origin() const noexcept { return table_->origin; }

std::string Runtime::describe() const {
  return fmt::format("{} driver {} from {}, {} device{}", to_string(kind()), driver_version_string(driver_version()),
                     origin(), device_count(), device_count() == 1 ? "" : "s");
}

}  // namespace tether
