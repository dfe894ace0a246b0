// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "param.hpp"

#include "../attach/node_attachment.hpp"
#include "../driver/error.hpp"

namespace tether::detail {

const ParamUse* param_use_of(const NodeAttachment* version) noexcept {
  for (const NodeAttachment* g = version; g; g = g->next_group_)
    if (g->ops_ == &GroupOf<ParamUse>::ops) return &std::get<0>(*static_cast<const std::tuple<ParamUse>*>(g->values()));
  return nullptr;
}

bool param_use_only(const NodeAttachment* version) noexcept {
  return version && version->ops_ == &GroupOf<ParamUse>::ops && !version->next_group_;
}

std::string tether_owner_label(const ParamUse& u) {
  std::string s = "kernel " + u.core->kernel + " with parameter";
  if (u.core->sites.size() > 1) s += 's';
  for (std::size_t i = 0; i < u.core->sites.size(); ++i) s += (i ? ", " : " ") + u.core->sites[i].param->name();
  if (const std::size_t k = u.core->keep.size(); k > 1)  // the kernel is one of them
    s += fmt::format(" (and {} other owner{})", k - 1, k == 2 ? "" : "s");
  return s;
}

void tether_owner_memory(const ParamUse& u, MemoryTally& t) {
  for (std::size_t i = 0; i < u.core->sites.size(); ++i)
    if (const ParamHeld& h = u.held(i); h.keep) t.add(h.base, h.bytes, false);
  u.core->keep.measure(t);
}

void throw_empty_param(std::string_view what) {
  throw UsageError(fmt::format("{}: this Param is moved from or empty", what));
}

void throw_empty_param_buffer(std::string_view what, std::string_view name) {
  throw UsageError(fmt::format("{}: the value of parameter '{}' is an empty SharedBuffer (a node would run with a null "
                               "pointer that nothing keeps)",
                               what, name));
}

}  // namespace tether::detail
