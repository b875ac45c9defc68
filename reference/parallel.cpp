#include "reference/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kgate {

namespace {

int initial_threads() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* env = std::getenv("KGATE_ELEMENT_THREADS");
  if (!env || !*env) return cores;
  try {
    std::size_t used = 0;
    const int v = std::stoi(env, &used);
    if (used == std::string(env).size() && v >= 1 && v <= 1024) return v;
  } catch (const std::exception&) {
  }
  return cores;  // a malformed override is no reason to stop a run: the default
}

std::atomic<int>& threads_setting() {
  static std::atomic<int> t{initial_threads()};
  return t;
}

}  // namespace

int element_threads() { return threads_setting().load(); }

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
