// The backend half of `kgate bench` (compiled once per backend: it includes
// the runtime): the ceilings a result is set against and the cache flush
// between timed sequences.
#pragma once

#include <cstddef>
#include <cstdint>
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

// The matrix-core peak of one MMA atom (kernels/runtime/mma.hpp) on this
// backend: a loop of the atom on operands held in registers, several
// independent accumulators per wave (so that the instruction's latency is
// hidden), over enough waves to fill the device. On the host backend: the
// emulator's rate for the atom of its configured target.
struct MmaPeak {
  std::string atom;   // Atom::name, e.g. "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
  double tflops = 0;  // 2*M*N*K per instruction
  double ms = 0;      // one timed launch
  std::uint64_t instructions = 0;
};
// Names of the atoms this backend runs (host: those of the configured target).
std::vector<std::string> mma_atoms();
// The peak of the atom named `atom` (one of mma_atoms()); measured once per
// process, then cached.
MmaPeak mma_peak(const std::string& atom);
// The atom a launch plan uses: the first of mma_atoms() whose name appears in
// its variant (the kernels name their atom there), or "" for none.
std::string atom_of_variant(const std::string& variant);

// Whether the backend replays captured launch sequences as graphs (CUDA,
// HIP); elsewhere RunOptions::graph means plain launches.
bool has_graphs();

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
