// The backend half of `kgate bench` (compiled once per backend: it includes
// the runtime): the ceilings a result is set against and the cache flush
// between timed sequences.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kgate::bench {

// Device-to-device copy bandwidth (bytes read + bytes written per second,
// in GB/s) over `bytes`, mean of `iters` copies after a warm-up.
double copy_gbps(std::size_t bytes, int iters);

struct Ceiling {
  std::string name;
  double ms = 0;
  double gbps = 0;  // of the traffic the line names
  double share_of_copy = 0;
};

// Streaming ceilings of a bandwidth-bound forward over `bytes` of bf16 input
// (the GroupNorm forward's traffic: x read, fp32 y written): a read-only
// pass, an fp32 write-only pass of the output's size, a bf16 -> fp32
// widening pass (the apply's access pattern without its arithmetic), the
// read and the widening in sequence (the floor of any forward that reads its
// input twice), and the bound on a forward that reads x once: it must read
// all of x before it writes any y (each output depends on its group's
// statistics over the whole volume), so it takes at least the read pass plus
// a widening pass in which the fraction f of x held on chip is not loaded
// again, for f = 0, 1/4, ..., 1. Shares are of `copy` (GB/s).
std::vector<Ceiling> streaming_ceilings(std::size_t bytes, int iters, double copy);

// Overwrites a buffer larger than the device's last-level cache on each
// call, so that the next timed sequence does not start from cache.
class CacheFlush {
 public:
  explicit CacheFlush(std::size_t bytes);
  ~CacheFlush();
  CacheFlush(const CacheFlush&) = delete;
  CacheFlush& operator=(const CacheFlush&) = delete;
  void operator()() const;
  std::size_t bytes() const { return bytes_; }

 private:
  void* buf_ = nullptr;
  std::size_t bytes_ = 0;
};

// Sizes for this backend: the flush buffer (several times the largest
// last-level cache of the targets: 256 MiB on GPUs, 64 MiB on the host) and
// the copy measurement (1 GiB on GPUs, 64 MiB on the host).
std::size_t default_flush_bytes();
std::size_t default_copy_bytes();

}  // namespace kgate::bench
