// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The launch configuration of a kernel node: dimensions, dynamic shared memory and the launch
// attributes CUDA accepts on graph kernel nodes (docs/launch-attributes.md says which, measured on
// an H200).
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

TETHER_EXPORT namespace tether {

/// Grid dimensions of a kernel launch (blocks).
struct Grid {
  unsigned x = 1, y = 1, z = 1;
};
/// Block dimensions of a kernel launch (threads).
struct Block {
  unsigned x = 1, y = 1, z = 1;
};
/// Thread-block cluster dimensions (blocks per cluster; each must divide the grid's).
struct Cluster {
  unsigned x = 1, y = 1, z = 1;
};

/// How the hardware may schedule the clusters of a launch (CUclusterSchedulingPolicy).
enum class ClusterScheduling : unsigned {
  default_ = CU_CLUSTER_SCHEDULING_POLICY_DEFAULT,
  spread = CU_CLUSTER_SCHEDULING_POLICY_SPREAD,
  load_balancing = CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING,
};

/// An L2 access policy window (CUaccessPolicyWindow): a hint about `bytes` bytes from `base`.
/// Only an address range: the memory is neither accessed nor kept alive because of it.
struct AccessPolicy {
  const void* base = nullptr;
  std::size_t bytes = 0;
  float hit_ratio = 1.0f;
  CUaccessProperty hit = CU_ACCESS_PROPERTY_PERSISTING;
  CUaccessProperty miss = CU_ACCESS_PROPERTY_STREAMING;
};

/// The launch configuration of a kernel node: `tether::Launch{grid, block}` followed by any of
/// the setters, e.g. `Launch{Grid{64}, Block{256}}.shared_memory(64 << 10).priority(1)`.
///
/// Dimensions and dynamic shared memory are kernel parameters: every launch and update sets them
/// (a Launch without `shared_memory` asks for 0 bytes). The others are node attributes
/// (cuGraphKernelNodeSetAttribute): a node gets those its Launch sets; an `Edit::update` changes
/// those its Launch sets and keeps the others (set one back to its default to clear it). An
/// executable's node attributes cannot be changed per node (the driver has no call for it):
/// `GraphExec::update` refuses a Launch that sets any; change them in the graph and update the
/// executable from it. A Launch is a plain value (about 90 bytes); thread safety: as any value.
class Launch {
 public:
  /// The attributes a Launch can set, as bits of `attributes()`.
  enum Attribute : std::uint16_t {
    cooperative_bit = 1u << 0,         ///< CU_LAUNCH_ATTRIBUTE_COOPERATIVE
    cluster_bit = 1u << 1,             ///< CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    cluster_scheduling_bit = 1u << 2,  ///< CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
    priority_bit = 1u << 3,            ///< CU_LAUNCH_ATTRIBUTE_PRIORITY
    mem_sync_domain_bit = 1u << 4,     ///< CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN
    preferred_cluster_bit = 1u << 5,   ///< CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION
    access_policy_bit = 1u << 6,       ///< CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
  };

  /// `grid` blocks of `block` threads, no dynamic shared memory, no attribute.
  constexpr Launch(Grid grid, Block block) noexcept : grid_(grid), block_(block) {}

  /// Bytes of dynamic shared memory per block (the node's `sharedMemBytes`). Beyond 48 KiB tether
  /// raises the kernel's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to this size when the node
  /// is made or updated (never lowers it); beyond the device's opt-in maximum the driver refuses.
  constexpr Launch& shared_memory(std::size_t bytes) noexcept {
    shared_ = bytes;
    return *this;
  }
  /// A cooperative launch (blocks may synchronise grid-wide; the grid must fit co-resident).
  constexpr Launch& cooperative(bool on = true) noexcept {
    cooperative_ = on;
    set_ |= cooperative_bit;
    return *this;
  }
  /// Thread-block clusters of `dims` blocks (each must divide the grid's dimension).
  constexpr Launch& cluster(Cluster dims) noexcept {
    cluster_ = dims;
    set_ |= cluster_bit;
    return *this;
  }
  /// The cluster scheduling policy preference.
  constexpr Launch& cluster_scheduling(ClusterScheduling policy) noexcept {
    scheduling_ = policy;
    set_ |= cluster_scheduling_bit;
    return *this;
  }
  /// Preferred (larger) cluster dimensions the device may use instead of `cluster` (a multiple of
  /// them); needs `cluster`.
  constexpr Launch& preferred_cluster(Cluster dims) noexcept {
    preferred_ = dims;
    set_ |= preferred_cluster_bit;
    return *this;
  }
  /// The node's execution priority. It takes effect in executables instantiated with
  /// `InstantiateOptions::use_node_priority`; otherwise the launch stream's priority applies.
  constexpr Launch& priority(int p) noexcept {
    priority_ = p;
    set_ |= priority_bit;
    return *this;
  }
  /// The memory synchronisation domain (CUlaunchMemSyncDomain).
  constexpr Launch& mem_sync_domain(CUlaunchMemSyncDomain d) noexcept {
    domain_ = d;
    set_ |= mem_sync_domain_bit;
    return *this;
  }
  /// An L2 access policy window (a hint; the range is not kept alive).
  constexpr Launch& access_policy(const AccessPolicy& w) noexcept {
    window_ = w;
    set_ |= access_policy_bit;
    return *this;
  }

  constexpr Grid grid() const noexcept { return grid_; }
  constexpr Block block() const noexcept { return block_; }
  constexpr std::size_t shared_memory_bytes() const noexcept { return shared_; }
  /// The attributes this Launch sets (Attribute bits).
  constexpr unsigned attributes() const noexcept { return set_; }
  constexpr bool is_cooperative() const noexcept { return cooperative_; }
  constexpr Cluster cluster_dims() const noexcept { return cluster_; }
  constexpr ClusterScheduling scheduling() const noexcept { return scheduling_; }
  constexpr Cluster preferred_cluster_dims() const noexcept { return preferred_; }
  constexpr int node_priority() const noexcept { return priority_; }
  constexpr CUlaunchMemSyncDomain sync_domain() const noexcept { return domain_; }
  constexpr const AccessPolicy& policy_window() const noexcept { return window_; }

 private:
  Grid grid_;
  Block block_;
  std::size_t shared_ = 0;
  Cluster cluster_{};
  Cluster preferred_{};
  AccessPolicy window_{};
  int priority_ = 0;
  ClusterScheduling scheduling_ = ClusterScheduling::default_;
  CUlaunchMemSyncDomain domain_ = CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT;
  bool cooperative_ = false;
  std::uint16_t set_ = 0;
};

}  // namespace tether

namespace tether::detail {

/// One attribute of a Launch as the driver takes it.
struct LaunchAttr {
  CUlaunchAttributeID id;
  CUlaunchAttributeValue value;
};
/// The attributes `l` sets, in a fixed order; returns how many were written to `out`.
std::size_t launch_attrs(const Launch& l, std::span<LaunchAttr, 7> out) noexcept;
/// The driver's name of an attribute and its setter ("CU_LAUNCH_ATTRIBUTE_PRIORITY
/// (Launch::priority)"), for errors.
std::string launch_attr_name(CUlaunchAttributeID id);

}  // namespace tether::detail
