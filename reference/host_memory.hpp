#pragma once
// Host memory advice shared by the fp64 references' tensors and the host
// emulator's device allocations (both host-only).

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

// An allocator that advises huge pages for its large blocks: for per-element
// vectors as long as the tensors they describe (the oracle's bounds).
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    advise_huge_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

template <class T>
using LargeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace kgate
