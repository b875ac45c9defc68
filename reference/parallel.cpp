#include "reference/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reference/error.hpp"

namespace kgate {

namespace {

// -1 until the first query reads KGATE_ELEMENT_THREADS (or the cores).
std::atomic<int>& threads_setting() {
  static std::atomic<int> t{-1};
  return t;
}

}  // namespace

int element_threads() {
  int t = threads_setting().load();
  if (t > 0) return t;
  const char* env = std::getenv("KGATE_ELEMENT_THREADS");
  if (!env || !*env) {
    t = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  } else {
    const std::string v(env);
    std::size_t used = 0;
    long n = 0;
    try {
      n = std::stol(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() || n < 1 || n > 1024)
      throw InputError("KGATE_ELEMENT_THREADS", "must be an integer in [1, 1024], got '" + v + "'");
    t = static_cast<int>(n);
  }
  threads_setting().store(t);
  return t;
}

void set_element_threads(int threads) { threads_setting().store(std::clamp(threads, 1, 1024)); }

std::int64_t chunk_count(std::int64_t n) { return n <= 0 ? 0 : (n + kElementChunk - 1) / kElementChunk; }

void parallel_chunks(std::int64_t n, const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& body) {
  const std::int64_t chunks = chunk_count(n);
  const int threads = static_cast<int>(std::min<std::int64_t>(element_threads(), chunks));
  if (threads <= 1) {
    for (std::int64_t c = 0; c < chunks; ++c) body(c * kElementChunk, std::min(n, (c + 1) * kElementChunk), c);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr first;
  std::mutex m;
  auto work = [&] {
    for (std::int64_t c; !stop.load() && (c = next.fetch_add(1)) < chunks;) {
      try {
        body(c * kElementChunk, std::min(n, (c + 1) * kElementChunk), c);
      } catch (...) {
        const std::lock_guard<std::mutex> g(m);
        if (!first) first = std::current_exception();
        stop.store(true);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads: the ones started and this one finish the loop.
  }
  work();
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace kgate
