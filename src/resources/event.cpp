// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "event.hpp"

namespace tether {

namespace detail {
void DestroyEvent::operator()(CUevent e) const noexcept {
  release_with<Entry::cuEventDestroy>(owner, e, "destroying an event");
}
}  // namespace detail

void Event::record(const Stream& stream) const {
  detail::check_calls_allowed("Event::record");
  if (!stream) detail::throw_empty("Event::record", "Stream");
  const detail::ContextState& s = *handle_->deleter().owner;
  detail::ScopedContext scope(s);
  detail::call<detail::Entry::cuEventRecord>(*s.table, "recording an event on a stream", get(), stream.get());
}

void Event::synchronize() const {
  detail::check_calls_allowed("Event::synchronize");
  const detail::ContextState& s = *handle_->deleter().owner;
  detail::ScopedContext scope(s);
  detail::RelaxedScope relaxed(*s.table);  // an event of another capture's stream is fine to wait for
  detail::call<detail::Entry::cuEventSynchronize>(*s.table, "synchronizing an event", get());
}

bool Event::query() const {
  detail::check_calls_allowed("Event::query");
  const detail::ContextState& s = *handle_->deleter().owner;
  detail::ScopedContext scope(s);
  detail::RelaxedScope relaxed(*s.table);
  CUresult r = detail::raw<detail::Entry::cuEventQuery>(*s.table, get());
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  detail::throw_call_error(*s.table, detail::Entry::cuEventQuery, r, "querying an event");
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  detail::check_calls_allowed("Event::elapsed_ms");
  const detail::ContextState& s = *start.handle_->deleter().owner;
  detail::ScopedContext scope(s);
  float ms = 0.0f;
  detail::call<detail::Entry::cuEventElapsedTime>(*s.table, "measuring the time between two events", &ms, start.get(),
                                                  end.get());
  return ms;
}

Context Event::context() const noexcept { return detail::context_from(handle_->deleter().owner); }

}  // namespace tether
