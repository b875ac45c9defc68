#pragma once
// Host memory for the fp64 references' tensors and the oracle's per-element
// vectors, and the huge-page advice the host emulator's device allocations
// share (all host-only).

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace kgate {

// Regions from this size up ask for transparent huge pages (2 MiB on x86-64);
// below it a huge page would be mostly unused.
inline constexpr std::size_t kHugePageAdviceBytes = std::size_t{2} << 20;

// Asks the kernel to back [p, p + bytes) with transparent huge pages before it
// is first touched. Large tensors are written once per problem (poison fills,
// zeroed references, workspaces), and with 4 KiB pages their page faults cost
// more than the arithmetic that fills them. Advice only: where the kernel
// refuses it (THP off, no madvise mode) the memory is used as it is, so results
// never depend on it. Only the whole 2 MiB pages inside the region are advised,
// so a region that shares pages with other allocations is left unaffected there.
// Returns the bytes advised (whether or not the kernel took the advice).
inline std::size_t advise_huge_pages(void* p, std::size_t bytes) {
  if (bytes < kHugePageAdviceBytes) return 0;
  const auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + bytes;
  const std::uintptr_t a = (lo + kHugePageAdviceBytes - 1) & ~(kHugePageAdviceBytes - 1);
  const std::uintptr_t b = hi & ~(kHugePageAdviceBytes - 1);
  if (b <= a) return 0;
  (void)madvise(reinterpret_cast<void*>(a), b - a, MADV_HUGEPAGE);
  return b - a;
}

// Host blocks for tensors and per-element vectors.
//
// Below kHugePageAdviceBytes: 64-byte aligned heap memory. From it up: whole
// 2 MiB pages, mapped 2 MiB aligned with huge-page advice, and kept when freed
// (up to host_cache_budget() bytes of idle blocks, the least recently freed
// unmapped first) so that the next large block reuses pages that are already
// resident instead of faulting in and zeroing fresh ones. A verification run
// allocates outputs of the same sizes problem after problem, and on a virtual
// machine the first touch of fresh memory can cost more than the arithmetic
// that fills it. A request takes the smallest idle block that holds it (the
// rest of that block stays idle); adjacent idle blocks are merged. A request
// no idle block holds first unmaps idle blocks of at least its size (least
// recently freed first), so the resident memory never exceeds the most the
// process has had in use: the cache saves faults, never adds memory.
//
// Contract: host_alloc() returns 64-byte aligned memory of unspecified
// contents (a reused block holds what its last owner left; fresh ones are
// zero), or throws std::bad_alloc; host_free() takes the pointer and the byte
// count it was allocated with. Thread-safe.
void* host_alloc(std::size_t bytes);
void host_free(void* p, std::size_t bytes) noexcept;

struct HostCacheStats {
  std::size_t idle_bytes = 0;     // mapped, not handed out
  std::size_t budget_bytes = 0;   // most idle bytes kept
  std::uint64_t maps = 0;         // blocks mapped fresh
  std::uint64_t reuses = 0;       // requests served from idle blocks
};
// A deleter for a host_alloc() block of `bytes`.
struct HostFree {
  std::size_t bytes;
  void operator()(void* p) const noexcept { host_free(p, bytes); }
};

HostCacheStats host_cache_stats();
// False in AddressSanitizer builds: every block is heap memory there, so that
// the sanitizer sees uses after free and overruns.
bool host_cache_reuses();
// The default budget: an eighth of the machine's memory, at most 4 GiB.
std::size_t default_host_cache_budget();
// Sets the budget (0: nothing kept, every large block unmapped when freed),
// unmapping idle blocks beyond it.
void set_host_cache_budget(std::size_t bytes);
// Unmaps every idle block (memory measurements start from the live data).
void host_cache_release();

// An allocator on host_alloc(): for per-element vectors as long as the
// tensors they describe (the oracle's bounds).
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(host_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { host_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

template <class T>
using LargeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace kgate
