// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A lazy, budgeted cache of executables keyed by the application's own key (a batch size, a
// shape): docs/serving.md, "An executable cache".
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../attach/reclaimer.hpp"
#include "exec.hpp"

TETHER_EXPORT namespace tether {

/// What an `ExecCache` may hold: at most `max_count` executables and `max_bytes` bytes, as its
/// cost function counts them. Both must be at least 1. Since 0.6.
struct ExecCacheLimits {
  std::size_t max_count = std::numeric_limits<std::size_t>::max();
  std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
};

/// What an `ExecCache` did since it was made. Since 0.6.
struct ExecCacheStats {
  std::uint64_t hits = 0;           ///< `get`/`launch` calls that found their executable built
  std::uint64_t misses = 0;         ///< calls that built it (`prewarm` counts its builds here too)
  std::uint64_t evictions = 0;      ///< executables dropped to stay within the limits
  std::uint64_t failed_builds = 0;  ///< builds that threw (nothing was kept for them)
  std::size_t count = 0;            ///< executables held now
  std::size_t bytes = 0;            ///< their cost now, summed
  std::chrono::nanoseconds build_time{0};  ///< time spent in the build and cost functions, all builds
};

/// A thread-safe cache of executables, built lazily by `build(key)` (a capture or a `Graph`
/// built and instantiated) on the first `get` of a key, and evicted least recently used once
/// more than `limits.max_count` executables, or more than `limits.max_bytes` bytes of them as
/// `cost(key, exec)` counts them, are held. The most recently used executable is never evicted,
/// even when it alone exceeds the byte budget (a cache that could not hold what it just built
/// would build it again on every call).
///
/// `get` returns shared ownership: an evicted (or erased, or cleared) executable stays alive as
/// long as a caller holds it, and its launches in flight keep their owners as any launch does;
/// the cache only drops its own reference. A build runs without the cache's lock: hits of other
/// keys proceed meanwhile, and concurrent `get`s of the key being built wait for that one build
/// (if it throws, each of them then tries its own).
///
/// The cost function defaults to the device bytes of the buffers the executable's versions keep
/// (`owned_memory(exec).device_bytes`: each allocation once; buffers other executables or the
/// application also keep count for each of them). The driver's own memory for an executable is
/// not measurable (no call reports it); give a cost function to count it, or a different figure.
/// Executables shared between threads launch one at a time (GraphExec's rule).
///
/// Empty state: a default-constructed or moved-from cache holds nothing and every call but
/// `stats`, `size`, `contains` and `operator bool` throws UsageError. Thread safety: all members
/// may be called concurrently on one cache, except construction, assignment and destruction.
/// `get`, `launch` and `prewarm` throw UsageError inside a host callback (they may build or
/// launch); the others never make a driver call of their own, though dropping the last reference
/// to an executable destroys it as `GraphExec`'s destructor does (on the reclaimer).
template <class Key, class Hash = std::hash<Key>, class KeyEqual = std::equal_to<Key>>
class ExecCache {
 public:
  /// Makes the executable for a key. Called without the cache's lock, at most once at a time per key.
  using Build = std::function<GraphExec(const Key&)>;
  /// What an executable counts against `max_bytes`.
  using Cost = std::function<std::size_t(const Key&, const GraphExec&)>;

  /// An empty cache (see "Empty state").
  ExecCache() noexcept = default;
  /// A cache that builds with `build`. Throws UsageError for an empty `build` or a limit of 0.
  explicit ExecCache(Build build, ExecCacheLimits limits = {}, Cost cost = {}) {
    if (!build) throw UsageError("ExecCache: the build function is empty; give a function that makes a key's executable");
    check_limits(limits, "ExecCache");
    s_ = std::make_unique<State>();
    s_->build = std::move(build);
    s_->cost = std::move(cost);
    s_->limits = limits;
  }
  ExecCache(ExecCache&&) noexcept = default;
  ExecCache& operator=(ExecCache&&) noexcept = default;
  ExecCache(const ExecCache&) = delete;
  ExecCache& operator=(const ExecCache&) = delete;
  /// Drops the cache's references; executables that callers still hold, or that are in flight, live on.
  ~ExecCache() = default;

  /// Whether this cache can build (false when default-constructed or moved from).
  explicit operator bool() const noexcept { return s_ != nullptr; }

  /// The executable for `key`, built by the build function if the cache does not hold it (then
  /// the least recently used ones beyond the limits are evicted). Throws what the build or cost
  /// function throws (nothing is kept for the key; `failed_builds` counts it), UsageError if the
  /// build returned an empty executable, inside a host callback, or for an empty cache.
  std::shared_ptr<GraphExec> get(const Key& key) {
    detail::check_calls_allowed("ExecCache::get");
    State& st = live("ExecCache::get");
    std::unique_lock lock(st.mu);
    if (Entry* e = built_locked(st, lock, key)) {
      ++st.stats.hits;
      st.lru.splice(st.lru.begin(), st.lru, e->lru);
      return e->exec;
    }
    return build_locked(st, lock, key);
  }

  /// `get(key)->launch(stream)`: launches the key's executable, building it first on a miss.
  /// Throws like `get` and `GraphExec::launch`.
  void launch(const Key& key, const Stream& stream) { get(key)->launch(stream); }

  /// Builds every key of `keys` that the cache does not hold, in order (start-up: one call for
  /// the batch sizes a server will see). Keys beyond the limits evict earlier ones as `get` does.
  /// Returns how many it built. Throws like `get` at the first build that fails; the keys built
  /// before it stay.
  std::size_t prewarm(std::span<const Key> keys) {
    detail::check_calls_allowed("ExecCache::prewarm");
    State& st = live("ExecCache::prewarm");
    std::size_t made = 0;
    // Why an index: a range-for over a span compares its iterators with an operator an importer
    // of the module cannot see (the module-only test).
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Key& key = keys[i];
      std::unique_lock lock(st.mu);
      if (built_locked(st, lock, key)) continue;
      build_locked(st, lock, key);
      ++made;
    }
    return made;
  }
  /// As `prewarm(span)`, for a braced list of keys.
  std::size_t prewarm(std::initializer_list<Key> keys) { return prewarm(std::span<const Key>(keys.begin(), keys.size())); }

  /// Whether the cache holds a built executable for `key` (false for an empty cache).
  bool contains(const Key& key) const {
    if (!s_) return false;
    std::lock_guard lock(s_->mu);
    auto it = s_->map.find(key);
    return it != s_->map.end() && it->second.exec;
  }
  /// How many executables the cache holds (0 for an empty cache).
  std::size_t size() const noexcept {
    if (!s_) return 0;
    std::lock_guard lock(s_->mu);
    return s_->stats.count;
  }
  /// Drops the cache's executable for `key`, if it holds one (a build in progress is not
  /// affected). Returns whether it held one. Throws UsageError for an empty cache.
  bool erase(const Key& key) {
    State& st = live("ExecCache::erase");
    std::shared_ptr<GraphExec> dropped;  // destroyed after the lock is released
    std::lock_guard lock(st.mu);
    auto it = st.map.find(key);
    if (it == st.map.end() || !it->second.exec) return false;
    dropped = remove_locked(st, it);
    return true;
  }
  /// Drops every executable the cache holds (builds in progress finish and are kept). Throws
  /// UsageError for an empty cache.
  void clear() {
    State& st = live("ExecCache::clear");
    std::vector<std::shared_ptr<GraphExec>> dropped;
    std::lock_guard lock(st.mu);
    dropped.reserve(st.stats.count);
    for (auto it = st.map.begin(); it != st.map.end();) {
      auto next = std::next(it);
      if (it->second.exec) dropped.push_back(remove_locked(st, it));
      it = next;
    }
  }
  /// The limits in force.
  ExecCacheLimits limits() const {
    const State& st = live("ExecCache::limits");
    std::lock_guard lock(st.mu);
    return st.limits;
  }
  /// Changes the limits and evicts, least recently used first, until the cache fits them
  /// (the most recently used executable aside). Throws UsageError for a limit of 0 or an empty cache.
  void set_limits(ExecCacheLimits limits) {
    check_limits(limits, "ExecCache::set_limits");
    State& st = live("ExecCache::set_limits");
    std::vector<std::shared_ptr<GraphExec>> dropped;
    std::lock_guard lock(st.mu);
    dropped.reserve(st.lru.size());  // before the change: the eviction below cannot fail then
    st.limits = limits;
    evict_locked(st, dropped);
  }
  /// What the cache did so far, and holds now (all zero for an empty cache).
  ExecCacheStats stats() const {
    if (!s_) return {};
    std::lock_guard lock(s_->mu);
    return s_->stats;
  }

 private:
  struct Entry {
    std::shared_ptr<GraphExec> exec;  // null while it is being built
    std::size_t bytes = 0;
    typename std::list<Key>::iterator lru{};
  };
  struct State {
    mutable std::mutex mu;
    std::condition_variable built;  // a build ended (kept or failed)
    std::unordered_map<Key, Entry, Hash, KeyEqual> map;
    std::list<Key> lru;  // built entries, most recently used first
    Build build;
    Cost cost;
    ExecCacheLimits limits;
    ExecCacheStats stats;
  };

  static void check_limits(const ExecCacheLimits& l, const char* what) {
    if (l.max_count == 0)
      throw UsageError(std::string(what) + ": ExecCacheLimits::max_count is 0; a cache holds at least one executable");
    if (l.max_bytes == 0)
      throw UsageError(std::string(what) + ": ExecCacheLimits::max_bytes is 0; give at least 1 byte (the most recently "
                                           "used executable is kept whatever its cost)");
  }
  State& live(const char* what) const {
    if (!s_) throw UsageError(std::string(what) + ": this ExecCache is empty (default-constructed or moved from)");
    return *s_;
  }

  // The key's built entry, after waiting out another thread's build of it (its result, or its
  // failure: then null); null if the cache does not hold the key. `lock` is held throughout.
  static Entry* built_locked(State& st, std::unique_lock<std::mutex>& lock, const Key& key) {
    for (;;) {
      auto it = st.map.find(key);
      if (it == st.map.end()) return nullptr;
      if (it->second.exec) return &it->second;
      st.built.wait(lock);
    }
  }

  // Builds `key` with the lock released; `lock` is held on entry and released on return (the
  // evicted executables are destroyed after it).
  std::shared_ptr<GraphExec> build_locked(State& st, std::unique_lock<std::mutex>& lock, const Key& key) {
    // Marks the key as being built. Why a pointer and not the iterator: other threads insert
    // while the lock is released, and a rehash invalidates iterators but not elements.
    Entry* placeholder = &st.map.try_emplace(key).first->second;
    ++st.stats.misses;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    std::shared_ptr<GraphExec> exec;
    std::size_t bytes = 0;
    std::vector<std::shared_ptr<GraphExec>> dropped;
    try {
      exec = std::make_shared<GraphExec>(st.build(key));
      if (!*exec) throw UsageError("ExecCache::get: the build function returned an empty GraphExec");
      bytes = st.cost ? st.cost(key, *exec) : owned_memory(*exec).device_bytes;
      lock.lock();
      placeholder->lru = st.lru.insert(st.lru.begin(), key);
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      st.stats.build_time += std::chrono::steady_clock::now() - start;
      st.map.erase(key);
      ++st.stats.failed_builds;
      st.built.notify_all();
      lock.unlock();  // `exec`, if made, is destroyed without the lock
      throw;
    }
    st.stats.build_time += std::chrono::steady_clock::now() - start;
    placeholder->exec = exec;
    placeholder->bytes = bytes;
    ++st.stats.count;
    st.stats.bytes += bytes;
    try {
      evict_locked(st, dropped);
    } catch (...) {
      // No memory to set the evicted aside: nothing was evicted, and the cache is over its
      // limits until the next build or set_limits.
    }
    st.built.notify_all();
    lock.unlock();
    return exec;
  }

  // Drops the least recently used entries beyond the limits, keeping the most recent one, into
  // `dropped` (destroyed by the caller after the lock). Throws std::bad_alloc before dropping any.
  static void evict_locked(State& st, std::vector<std::shared_ptr<GraphExec>>& dropped) {
    dropped.reserve(dropped.size() + st.lru.size());
    while (st.lru.size() > 1 && (st.stats.count > st.limits.max_count || st.stats.bytes > st.limits.max_bytes)) {
      ++st.stats.evictions;
      dropped.push_back(remove_locked(st, st.map.find(st.lru.back())));
    }
  }
  static std::shared_ptr<GraphExec> remove_locked(State& st, typename std::unordered_map<Key, Entry, Hash, KeyEqual>::iterator it) {
    std::shared_ptr<GraphExec> exec = std::move(it->second.exec);
    st.stats.bytes -= it->second.bytes;
    --st.stats.count;
    st.lru.erase(it->second.lru);
    st.map.erase(it);
    return exec;
  }

  std::unique_ptr<State> s_;
};

}  // namespace tether
