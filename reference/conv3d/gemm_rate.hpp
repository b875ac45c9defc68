// The machine's fp64 GEMM rate through the references' own Eigen build (the
// same ISA flags as the fast references): the yardstick their speed is
// stated against (bench_ref, `kgate bench --arm ref`).
#pragma once

namespace kgate::ref {

struct GemmRate {
  int threads = 0, n = 0, trials = 0;
  double seconds = 0;          // wall time of the best trial
  double gflops = 0;           // all threads together, by the wall clock
  double gflops_per_core = 0;  // the best trial's flops over its process CPU seconds
};

// `threads` independent n x n x n products at once (C += A * B, column-major,
// `reps` each), best of `trials` by the wall clock: a machine shared with
// others is measured at its least disturbed.
GemmRate measure_gemm_rate(int threads, int n = 1024, int trials = 5, int reps = 2);

// CPU seconds of the whole process (all threads) so far.
double process_cpu_seconds();

}  // namespace kgate::ref
