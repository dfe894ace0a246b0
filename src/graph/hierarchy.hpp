// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The graph hierarchy (docs/design/attachments.md): one per root graph, with a
// stable-address box for the root and for every CUDA-owned descendant (embedded child graphs and
// conditional bodies), per-box node metadata that never owns, and a process-wide registry of live
// raw graphs. A Graph (and an executable made from it) owns its hierarchy; views and node
// handles refer to it without owning it.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../attach/attachment.hpp"
#include "../driver/table.hpp"

namespace tether::detail {

struct Box;
struct Hierarchy;

/// A CUgraphNodeType stored in one byte (the driver's values are small).
struct NodeTypeByte {
  std::uint8_t value = 0;
  NodeTypeByte() = default;
  NodeTypeByte(CUgraphNodeType t) noexcept : value(static_cast<std::uint8_t>(t)) {}  // NOLINT: implicit on purpose
  operator CUgraphNodeType() const noexcept { return static_cast<CUgraphNodeType>(value); }
};

/// Metadata of one node: where it lives and its current version. Non-owning (invariant 2): the
/// graph's user-object reference owns `current`. Records are recycled through a free list; the
/// generation tells a handle whether its record still describes the node it was made for.
struct NodeRecord {
  CUgraphNode node = nullptr;
  Box* box = nullptr;
  NodeAttachment* current = nullptr;
  NodeRecord* prev = nullptr;  // intrusive list of the box's live nodes (no allocation to link)
  NodeRecord* next = nullptr;
  std::atomic<std::uint32_t> generation{1};
  NodeTypeByte type;     // one byte: the record fits in 48 bytes (the benchmark counts metadata)
  bool alive = false;     // published in its box
  bool pending = false;   // added by the transaction in progress, not yet published
  bool removing = false;  // its removal is logged by the transaction in progress (one log entry)
};

class PublishLock;

/// Where a hierarchy's records live: chunks that never move (handles and the executables' tables
/// point at records), carved in creation order, of 16, then 64, then 256 records. Each record
/// has a dense index (creation order, 0-based, `index_of`), found from its address through the
/// chunks' address ranges: executables keep their per-node versions in a table indexed by it,
/// which an update of the nodes in creation order walks from one slot to the next. Why not
/// std::deque: its 512-byte blocks hold ten records (a block allocation every tenth node) and
/// say nothing of an index.
class RecordStore {
 public:
  RecordStore() = default;
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;
  /// A fresh record (default state). `publishing` is the hierarchy's publish lock, held
  /// exclusively while a new chunk's range is recorded (executable updates read the ranges under
  /// it, without the hierarchy's lock). Throws std::bad_alloc (nothing changed).
  NodeRecord* make(PublishLock& publishing) {
    if (used_ == size_) [[unlikely]]
      grow(publishing);
    return &chunk_[used_++];
  }
  /// Records made so far: every index is smaller.
  std::uint32_t size() const noexcept { return first_ + used_; }
  /// The dense index of `r`, a record of this store. `hint` is the caller's guess of the chunk
  /// (updated; start with 0): consecutive records cost one range check. The caller holds the
  /// hierarchy's lock or its publish lock (shared is enough).
  std::uint32_t index_of(const NodeRecord* r, std::uint32_t& hint) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(r);
    if (hint < ranges_.size()) {
      const Range& g = ranges_[hint];
      if (a - g.begin < g.bytes) [[likely]]
        return g.first + static_cast<std::uint32_t>((a - g.begin) / sizeof(NodeRecord));
    }
    return search(a, hint);
  }

 private:
  struct Range {
    std::uintptr_t begin;
    std::uintptr_t bytes;
    std::uint32_t first;  // the index of the chunk's first record
  };
  void grow(PublishLock& publishing);
  std::uint32_t search(std::uintptr_t a, std::uint32_t& hint) const noexcept;
  // The first chunk that begins above address `a`.
  std::vector<Range>::const_iterator after(std::uintptr_t a) const noexcept;
  std::vector<std::unique_ptr<NodeRecord[]>> chunks_;
  std::vector<Range> ranges_;  // sorted by address
  NodeRecord* chunk_ = nullptr;
  std::uint32_t first_ = 0, used_ = 0, size_ = 0;
};

enum class BoxKind : std::uint8_t { root, child, body };

/// One graph of a hierarchy. Lives at a stable address until the hierarchy dies (invariant 7).
struct Box {
  Hierarchy* hierarchy = nullptr;
  CUgraph graph = nullptr;       // null once retired
  Box* parent = nullptr;
  NodeRecord* owner = nullptr;   // the child-graph / conditional node that owns this graph
  BoxKind kind = BoxKind::root;
  std::atomic<bool> retired{false};
  NodeRecord* first = nullptr;   // live nodes, creation order
  NodeRecord* last = nullptr;
  std::size_t node_count = 0;
  Box* next_owned = nullptr;     // the next box with the same owner node (if/else, switch bodies)
  // What `inspect` tells about the graph: for a body, its conditional node's CUgraphConditionalNodeType;
  // for a child graph, whether it holds a captured region (Edit::capture) rather than an embedded copy.
  std::uint8_t conditional_type = 0;
  bool captured = false;
  // An edge from a node with dependencies of its own was removed from this graph (Edit::disconnect,
  // or a rollback of Edit::connect): the H200 then refuses a whole update from it although its
  // topology is the executable's (fact U1), so plan_update refuses it too. Never cleared.
  bool edge_removed = false;
  // Owners retained on this graph by no node (captured work tether could not attribute, and
  // Capture::keeping): released with the graph. Guarded by the hierarchy's lock.
  std::size_t anonymous_owners = 0;
  Box* first_sub = nullptr;      // live boxes whose parent this is (doubly linked through sub_*)
  Box* prev_sub = nullptr;
  Box* next_sub = nullptr;
  void link_sub(Box* c) noexcept;
  void unlink_sub(Box* c) noexcept;

  void link(NodeRecord* r) noexcept;
  void unlink(NodeRecord* r) noexcept;
  template <class F>
  void for_each(F&& f) const {
    for (NodeRecord* r = first; r; r = r->next) f(r);
  }
};

/// Whether `w` and `h` name the same hierarchy (compares ownership: never dereferences either).
inline bool same_hierarchy(const std::weak_ptr<Hierarchy>& w, const std::shared_ptr<Hierarchy>& h) noexcept {
  return h && !w.owner_before(h) && !h.owner_before(w);
}

/// A handle's view of a node: valid while its hierarchy lives and the record's generation is
/// unchanged. Non-owning (a weak reference): a node handle never keeps a graph alive.
struct NodeRef {
  std::weak_ptr<Hierarchy> hierarchy;
  NodeRecord* record = nullptr;
  std::uint32_t generation = 0;
  /// Valid, for a caller that keeps the hierarchy alive (the record is then readable).
  bool current() const noexcept {
    return record && record->generation.load(std::memory_order_acquire) == generation;
  }
  bool valid() const noexcept {
    std::shared_ptr<Hierarchy> h = hierarchy.lock();
    return h && current();
  }
};

/// A handle's view of one graph of a hierarchy; non-owning, like NodeRef.
struct BoxRef {
  std::weak_ptr<Hierarchy> hierarchy;
  Box* box = nullptr;
  /// The hierarchy, if it lives and the box was not retired (else null).
  std::shared_ptr<Hierarchy> lock() const noexcept {
    std::shared_ptr<Hierarchy> h = hierarchy.lock();
    if (!h || !box || box->retired.load(std::memory_order_acquire)) return nullptr;
    return h;
  }
  bool valid() const noexcept { return lock() != nullptr; }
};

/// Process-wide registry of live raw graphs (invariant 5). Its lock is never held during a driver
/// call.
class Registry {
 public:
  static Registry& instance() noexcept;
  void add(CUgraph g, Box* b);
  void remove(CUgraph g) noexcept;
  Box* find(CUgraph g) const noexcept;
  std::size_t size() const noexcept;

 private:
  mutable std::mutex mu_;
  std::unordered_map<CUgraph, Box*> map_;
};

/// The lock of a hierarchy (invariant 10). Why not std::mutex: an Edit may be dropped on another
/// thread than the one that opened it (its rollback then unlocks there), and a thread that must
/// wait for a hierarchy while it holds another is checked for a cycle first: two threads that each
/// edit one graph and instantiate, clone, count or embed the other's would otherwise deadlock;
/// the second of them gets a UsageError naming the cycle instead.
class HierarchyLock {
 public:
  /// Blocks until the lock is free. Throws UsageError (`what` names the call) if this thread holds
  /// it already, or if waiting would close a cycle of threads waiting for each other's graphs.
  void lock(std::string_view what);
  bool try_lock() noexcept;
  void unlock() noexcept;
  /// The holding thread (a default id when free).
  std::thread::id holder() const noexcept { return holder_.load(std::memory_order_acquire); }
  bool held_here() const noexcept { return holder() == std::this_thread::get_id(); }

 private:
  std::atomic<bool> locked_{false};
  std::atomic<std::thread::id> holder_{};
};

/// Holds a HierarchyLock for a scope (the short locks of instantiate, clone, count, embed).
class HierarchyGuard {
 public:
  HierarchyGuard(HierarchyLock& l, std::string_view what) : l_(&l) { l.lock(what); }
  ~HierarchyGuard() { l_->unlock(); }
  HierarchyGuard(const HierarchyGuard&) = delete;
  HierarchyGuard& operator=(const HierarchyGuard&) = delete;

 private:
  HierarchyLock* l_;
};

/// The lock between a hierarchy's publication (a commit or rollback: exclusive) and executables'
/// per-node updates (shared: each checks a node handle and calls the driver with its node). Why
/// not std::shared_mutex: a pthread rwlock costs about 60 instructions per shared pair on the
/// executable update path, where this costs two atomic increments and two loads. A writer raises
/// `writing_` and waits until the readers inside have left; a reader that sees it raised leaves
/// and waits until the writer is done, so writers are never starved by a stream of readers. Not
/// recursive (a reader must not take it again while holding it).
class PublishLock {
 public:
  /// Out of line so that bench/instructions counts it as a lock (a call, about four instructions).
  void lock_shared() noexcept;
  void unlock_shared() noexcept {
    if (readers_.fetch_sub(1, std::memory_order_seq_cst) == 1 && writing_.load(std::memory_order_seq_cst))
      readers_.notify_all();
  }
  void lock();
  void unlock() noexcept {
    writing_.store(false, std::memory_order_seq_cst);
    writing_.notify_all();
    writer_.unlock();
  }

 private:
  std::atomic<std::uint32_t> readers_{0};
  std::atomic<bool> writing_{false};
  std::mutex writer_;  // one writer at a time
};

struct Hierarchy {
  const DriverTable* drv = nullptr;
  HierarchyLock mu;               // serialises every mutation of the hierarchy (invariant 10)
  // Held exclusively while a commit or rollback publishes, retires or destroys nodes, and shared
  // by per-node executable updates while they check a node handle and call the driver with its
  // node: an executable update then never races with the edit that removes that node.
  PublishLock publish_mu;
  Box* root_box = nullptr;        // boxes.front(), readable without the lock
  std::deque<Box> boxes;          // boxes[0] is the root; parents before children (invariant 6)
  // The first box owned by each child-graph or conditional node (the rest via Box::next_owned):
  // removing or rolling back nodes beside many child graphs stays linear.
  std::unordered_map<const NodeRecord*, Box*> owned;
  RecordStore records;            // stable addresses; recycled through `free_records`
  NodeRecord* free_records = nullptr;
  std::size_t retired_boxes = 0;  // the graveyard: retired boxes stay in `boxes`
  const char* unusable = nullptr; // set when an undo failed; every later edit throws it
  // Executables instantiated from this graph while it had conditional nodes: alive, and dropped
  // but not yet destroyed by the reclaimer. CUDA instantiates such a graph once at a time.
  std::atomic<int> live_execs{0};
  std::atomic<int> root_conditionals{0};  // published conditional nodes of the root graph
  std::shared_ptr<std::atomic<int>> dying_execs = std::make_shared<std::atomic<int>>(0);
  // Records of nodes tether did not make (an adopted graph's, other code's captured work): they own
  // nothing, and `inspect` says so. Empty for most hierarchies; a record leaves it when freed.
  std::unordered_set<const NodeRecord*> untracked;
  // User-given node names (`Edit::name`), shown by `inspect`; set inside a transaction, which
  // restores them on rollback. Empty for most hierarchies; a record leaves it when freed.
  std::unordered_map<const NodeRecord*, std::string> names;

  /// Takes ownership of `root` (destroyed with the hierarchy) and registers it.
  static std::shared_ptr<Hierarchy> adopt(const DriverTable& drv, CUgraph root);
  static std::shared_ptr<Hierarchy> create(const DriverTable& drv);
  /// A hierarchy for a stream capture in progress: its root box has no graph yet, and nothing is
  /// registered; `adopt_root` takes the captured graph once the capture ended well.
  static std::shared_ptr<Hierarchy> for_capture(const DriverTable& drv);
  /// Takes ownership of `root` as this hierarchy's root graph and registers it.
  void adopt_root(CUgraph root);
  Hierarchy() noexcept;
  ~Hierarchy();
  /// Hierarchies alive in the process (graphs, clones, and the hierarchies handles keep alive).
  static std::size_t live() noexcept;

  Box& root() noexcept { return boxes.front(); }
  /// The first box owned by child-graph or conditional node `r` (the rest via Box::next_owned),
  /// or null.
  Box* first_owned(const NodeRecord* r) const {
    auto it = owned.find(r);
    return it == owned.end() ? nullptr : it->second;
  }
  /// Adds a box for a graph CUDA created inside `owner` (registered; parent before child).
  Box& add_box(CUgraph g, Box* parent, NodeRecord* owner, BoxKind kind);
  /// A record ready to describe a new node (allocates; done in prepare).
  NodeRecord* allocate_record();
  /// Returns an unpublished record to the free list.
  void free_record(NodeRecord* r) noexcept;
  /// Publishes a prepared record (its node and type already set): links it into `box`; the caller
  /// commits its version. No allocation.
  void publish(Box& box, NodeRecord* r) noexcept;
  /// The node is gone (removed by tether): unlinks and invalidates the record. Does not release.
  void retire_record(NodeRecord* r) noexcept;
  /// CUDA destroyed the graphs owned by `owner` (its node was destroyed or its graph replaced):
  /// unregister each raw handle first (invariant 8), then invalidate every node and handle of those
  /// boxes and their descendants, clearing metadata without releasing references (CUDA did).
  void retire_owned_by(NodeRecord* owner) noexcept;
  /// Records `b` as owned by `b.owner` (in the `owned` index) and below `b.parent`. Allocates.
  void index_owned(Box& b);
  /// Removes the raw handles of the boxes below `owner` from the registry (before CUDA destroys
  /// them, invariant 8), or puts them back (`add`), which allocates and may throw.
  void unregister_owned_by(const NodeRecord* owner) noexcept;
  void reregister_owned_by(const NodeRecord* owner);
  /// Throws UsageError if an earlier undo failed.
  void check_usable() const;
};

/// Copies the metadata of `src` (a box and every box below it) onto the copy CUDA made of it
/// (`copy_root`, a clone or an embedded copy), looking each node up with cuGraphNodeFindInClone and
/// each nested child with cuGraphChildGraphNodeGetGraph. The new boxes go into `dst` below
/// `dst_parent` (null: `copy_root` is dst's root box, already present). Nothing is published until
/// every lookup succeeded: on failure the added boxes are removed again and the error propagates
/// (DriverError from a lookup; UsageError for a source with conditional nodes, which CUDA cannot copy).
/// `map` and `pairs` (either may be null) receive source record -> copy record. The caller holds
/// both hierarchies' locks.
using RecordPairs = std::vector<std::pair<const NodeRecord*, NodeRecord*>>;
void rekey(Hierarchy& dst, Box& copy_root_box, const Box& src, std::unordered_map<const NodeRecord*, NodeRecord*>* map,
           RecordPairs* pairs = nullptr);

/// Clones a whole hierarchy (cuGraphClone + rekey). Throws DriverError (NOT_SUPPORTED for graphs
/// with conditional nodes, as the driver refuses them) leaving the source unchanged.
std::shared_ptr<Hierarchy> clone_hierarchy(Hierarchy& src, std::unordered_map<const NodeRecord*, NodeRecord*>* map,
                                           RecordPairs* pairs = nullptr);

/// Whether a node of type `t` owns graphs (a child graph node or a conditional node).
inline bool owns_graphs(CUgraphNodeType t) noexcept {
  return t == CU_GRAPH_NODE_TYPE_GRAPH || t == CU_GRAPH_NODE_TYPE_CONDITIONAL;
}

/// Held around every cuGraphExecDestroy and every cuGraphDestroy of a root graph tether makes. Why:
/// the H200 double-frees inside libcuda when cuGraphDestroy of a graph overlaps, on another
/// thread, cuGraphExecDestroy of an executable made from it (ASan on the H200; the simulator
/// records the overlap as concurrent_exec_destroy). Neither call waits for a host callback or a
/// launch, and the user-object destructors they run only queue, so holding it never blocks long.
std::mutex& graph_destroy_mutex() noexcept;

/// A text summary of a hierarchy's live metadata (retired boxes left out), for debugging and tests.
std::string describe(const Hierarchy& h);

}  // namespace tether::detail
