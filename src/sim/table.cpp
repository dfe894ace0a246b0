// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator: the driver table it serves, and the public queries that span its parts.
#include "state.hpp"

namespace tether::sim::detail {
void fill_core(tether::detail::DriverTable& t);
void fill_stream(tether::detail::DriverTable& t);
void fill_graph(tether::detail::DriverTable& t);
void fill_exec(tether::detail::DriverTable& t);
void fill_pool(tether::detail::DriverTable& t);
std::size_t live_pools();
std::size_t live_modules();
std::size_t live_user_objects();
std::pair<std::size_t, std::size_t> live_allocations();
std::size_t live_streams();
std::size_t live_events();
std::size_t live_graphs();
std::size_t live_execs();
bool deferred_idle();

namespace {
std::string explain_last() { return ts().explain; }
}  // namespace
}  // namespace tether::sim::detail

namespace tether::sim {

using namespace detail;

std::unique_ptr<tether::detail::DriverTable> make_table() {
  init_violation_mode();
  auto t = std::make_unique<tether::detail::DriverTable>();
  t->stub_all(tether::detail::EntryState::missing);
  fill_core(*t);
  fill_stream(*t);
  fill_graph(*t);
  fill_exec(*t);
  fill_pool(*t);
  for (std::size_t i = 0; i < tether::detail::entry_count; ++i)
    if (t->state[i] != tether::detail::EntryState::resolved)
      throw std::logic_error(fmt::format("the simulator lacks {}", tether::detail::entry_names[i]));
  t->kind = DriverKind::simulated;
  t->version = CUDA_VERSION;
  t->device_count = device_count();
  t->origin = "tether simulator";
  t->explain = &explain_last;
  return t;
}

void set_conditional(std::uint64_t handle, unsigned value) {
  std::lock_guard<std::recursive_mutex> lock(graph_mutex());
  if (CondHandle* c = cond_of(handle)) c->value = value;
}

Stats stats() {
  Stats s;
  auto [dev, host] = live_allocations();
  s.device_allocations = dev;
  s.host_allocations = host;
  s.user_objects = live_user_objects();
  s.graphs = live_graphs();
  s.execs = live_execs();
  s.streams = live_streams();
  s.events = live_events();
  s.modules = live_modules();
  s.mem_pools = live_pools();
  return s;
}

bool quiesce(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    bool idle = deferred_idle();
    for (Stream* s : all_streams()) idle = idle && s->idle();
    idle = idle && destroyed_streams_idle();
    if (idle && deferred_idle()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace tether::sim
