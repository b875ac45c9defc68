#include "reference/host_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

namespace kgate {

namespace {

constexpr std::size_t kPage = kHugePageAdviceBytes;

// Under AddressSanitizer every block is heap memory, so that a use after free
// or an overrun of a tensor is reported (idle blocks would hide both).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kReuse = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kReuse = false;
#else
constexpr bool kReuse = true;
#endif
#else
constexpr bool kReuse = true;
#endif

std::size_t whole_pages(std::size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

struct Idle {
  std::size_t bytes;
  std::uint64_t freed;  // when it was last freed (a counter): eviction order
};

struct Cache {
  std::mutex m;
  std::map<std::uintptr_t, Idle> idle;  // by address, so that neighbours merge
  std::size_t idle_bytes = 0;
  std::size_t budget = default_host_cache_budget();
  std::uint64_t clock = 0, maps = 0, reuses = 0;

  // Unmaps the least recently freed idle blocks until at most `keep` bytes
  // are idle. Caller holds m.
  void shrink_to(std::size_t keep) {
    while (idle_bytes > keep) {
      auto oldest = idle.begin();
      for (auto it = idle.begin(); it != idle.end(); ++it)
        if (it->second.freed < oldest->second.freed) oldest = it;
      munmap(reinterpret_cast<void*>(oldest->first), oldest->second.bytes);
      idle_bytes -= oldest->second.bytes;
      idle.erase(oldest);
    }
  }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: blocks may be freed during static destruction
  return *c;
}

// A fresh mapping of `bytes` (whole pages) aligned to kPage, so that every
// page of it can be a huge page.
void* map_fresh(std::size_t bytes) {
  void* m = mmap(nullptr, bytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const auto lo = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t a = (lo + kPage - 1) & ~(kPage - 1);
  if (a > lo) munmap(m, a - lo);
  if (const std::uintptr_t tail = lo + bytes + kPage - (a + bytes); tail > 0)
    munmap(reinterpret_cast<void*>(a + bytes), tail);
  advise_huge_pages(reinterpret_cast<void*>(a), bytes);
  return reinterpret_cast<void*>(a);
}

}  // namespace

std::size_t default_host_cache_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const std::size_t total = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
  return std::min<std::size_t>(total / 8, std::size_t{4} << 30) / kPage * kPage;
}

bool host_cache_reuses() { return kReuse; }

void* host_alloc(std::size_t bytes) {
  if (bytes < kPage || !kReuse) {
    if (bytes > static_cast<std::size_t>(-1) - 64) throw std::bad_alloc();
    void* p = std::aligned_alloc(64, std::max<std::size_t>(64, (bytes + 63) / 64 * 64));
    if (!p) throw std::bad_alloc();
    advise_huge_pages(p, bytes);
    return p;
  }
  if (bytes > static_cast<std::size_t>(-1) - 2 * kPage) throw std::bad_alloc();
  const std::size_t need = whole_pages(bytes);
  Cache& c = cache();
  {
    std::lock_guard lk(c.m);
    auto best = c.idle.end();
    for (auto it = c.idle.begin(); it != c.idle.end(); ++it)
      if (it->second.bytes >= need && (best == c.idle.end() || it->second.bytes < best->second.bytes)) best = it;
    if (best != c.idle.end()) {
      const std::uintptr_t a = best->first;
      const Idle rest{best->second.bytes - need, best->second.freed};
      c.idle.erase(best);
      if (rest.bytes > 0) c.idle.emplace(a + need, rest);
      c.idle_bytes -= need;
      ++c.reuses;
      return reinterpret_cast<void*>(a);
    }
    // No idle block holds it: unmap idle blocks of at least its size first,
    // so that the cache never holds the process above the most memory it
    // has had in use (frees move bytes from in use to idle, reuses back).
    c.shrink_to(c.idle_bytes > need ? c.idle_bytes - need : 0);
  }
  void* p = map_fresh(need);
  std::lock_guard lk(c.m);
  ++c.maps;
  return p;
}

void host_free(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kPage || !kReuse) {
    std::free(p);
    return;
  }
  const std::size_t n = whole_pages(bytes);
  Cache& c = cache();
  std::lock_guard lk(c.m);
  if (n > c.budget) {
    munmap(p, n);
    return;
  }
  std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  std::size_t size = n;
  // Merge with the idle neighbours on both sides.
  if (auto next = c.idle.find(a + size); next != c.idle.end()) {
    size += next->second.bytes;
    c.idle.erase(next);
  }
  if (auto it = c.idle.lower_bound(a); it != c.idle.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.bytes == a) {
      a = prev->first;
      size += prev->second.bytes;
      c.idle.erase(prev);
    }
  }
  c.idle.emplace(a, Idle{size, ++c.clock});
  c.idle_bytes += n;
  c.shrink_to(c.budget);
}

HostCacheStats host_cache_stats() {
  Cache& c = cache();
  std::lock_guard lk(c.m);
  return {c.idle_bytes, c.budget, c.maps, c.reuses};
}

void set_host_cache_budget(std::size_t bytes) {
  Cache& c = cache();
  std::lock_guard lk(c.m);
  c.budget = bytes / kPage * kPage;
  c.shrink_to(c.budget);
}

void host_cache_release() {
  Cache& c = cache();
  std::lock_guard lk(c.m);
  c.shrink_to(0);
}

}  // namespace kgate
