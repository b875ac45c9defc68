// Element loops of one problem over several threads: input fills, the
// oracle's bounds and its comparison of full-size tensors.
//
// Contract: a loop over [0, n) is cut into fixed chunks of kElementChunk
// elements, whatever the thread count; `body(lo, hi, chunk)` runs once per
// chunk, on some thread, chunks in no particular order. A caller that
// reduces keeps one partial per chunk and merges them in chunk order, so
// that every result (sums included) is the same for any thread count.
// The first exception a body throws is rethrown on the calling thread after
// every started chunk has finished.
#pragma once

#include <cstdint>
#include <functional>

namespace kgate {

inline constexpr std::int64_t kElementChunk = std::int64_t{1} << 16;

// Threads an element loop may use (>= 1): the machine's cores unless
// KGATE_ELEMENT_THREADS says otherwise (an integer in [1, 1024]; anything
// else is an InputError naming the variable). Concurrent problems (--jobs) share
// the cores through the scheduler: the loops are bound by memory bandwidth,
// and a loop with fewer chunks than threads starts one thread per chunk.
int element_threads();
void set_element_threads(int threads);

std::int64_t chunk_count(std::int64_t n);
void parallel_chunks(std::int64_t n, const std::function<void(std::int64_t lo, std::int64_t hi, std::int64_t chunk)>& body);

// fn(i) for every i in [0, n), over the chunks above: for loops whose
// elements are independent (each writes only its own results).
template <class F>
void for_each_element(std::int64_t n, const F& fn) {
  parallel_chunks(n, [&](std::int64_t lo, std::int64_t hi, std::int64_t) {
    for (std::int64_t i = lo; i < hi; ++i) fn(i);
  });
}

}  // namespace kgate
