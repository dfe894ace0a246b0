// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "param.hpp"

#include "../attach/node_attachment.hpp"
#include "../driver/error.hpp"
#include "kinds/kernel.hpp"

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
  std::string s = "kernel " + u.core->kernel + " with ";
  if (u.core->launch) s += "launch parameter " + u.core->launch->name() + (u.core->sites.empty() ? "" : " and ");
  if (!u.core->sites.empty()) s += u.core->sites.size() > 1 ? "parameters" : "parameter";
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

void check_param_launch(const Launch& l, std::string_view what, std::string_view name) {
  check_dims(fmt::format("{} (launch parameter '{}')", what, name), l);
}

void check_launch_set(const ParamValue& v, std::string_view what, bool exec) {
  const Launch& l = *static_cast<const Launch*>(v.bytes);
  if (!exec || !l.attributes()) return;
  LaunchAttr attrs[7];
  launch_attrs(l, attrs);
  throw UsageError(fmt::format(
      "{}: the new Launch of launch parameter '{}' sets {}, a node attribute, which an executable cannot change per "
      "node (the driver has no call for it; a set changes grid, block and dynamic shared memory, and the nodes keep "
      "the attributes they were made with): set the parameter in the graph (Edit::set sets attributes too), then "
      "update the executable from it (GraphExec::update(graph))",
      what, v.state->name(), launch_attr_name(attrs[0].id)));
}

void raise_for_launch_set(const DriverTable& drv, const ParamUse& u, const ParamValue& v, std::string_view what) {
  const std::size_t bytes = static_cast<const Launch*>(v.bytes)->shared_memory_bytes();
  if (bytes > 48u * 1024u) raise_dynamic_shared(drv, u.core->base.func, u.core->kernel, bytes, what);
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
