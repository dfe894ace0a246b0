// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "stream.hpp"

namespace tether {

namespace detail {
void DestroyStream::operator()(CUstream s) const noexcept {
  release_with<Entry::cuStreamDestroy>(owner, s, "destroying a stream");
}
}  // namespace detail

Stream Stream::from_native_handle(const Context& ctx, CUstream stream) noexcept {
  detail::DestroyStream destroy{detail::state_of(ctx)};
  return Stream(detail::UniqueHandle<CUstream, detail::DestroyStream>(stream, std::move(destroy)));
}

const detail::ContextState& Stream::state(const char* what) const {
  detail::check_calls_allowed(what);
  if (!handle_) detail::throw_empty(what, "Stream");
  return *handle_.deleter().owner;
}

void Stream::synchronize() const {
  const detail::ContextState& s = state("Stream::synchronize");
  detail::ScopedContext scope(s);
  detail::call<detail::Entry::cuStreamSynchronize>(*s.table, "synchronizing a stream", get());
}

bool Stream::query() const {
  const detail::ContextState& s = state("Stream::query");
  detail::ScopedContext scope(s);
  CUresult r = detail::raw<detail::Entry::cuStreamQuery>(*s.table, get());
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  detail::throw_call_error(*s.table, detail::Entry::cuStreamQuery, r, "querying a stream");
}

Context Stream::context() const {
  if (!handle_) detail::throw_empty("Stream::context", "Stream");
  return detail::context_from(handle_.deleter().owner);
}

}  // namespace tether
