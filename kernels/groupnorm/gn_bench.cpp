// gn_bench: runs the GroupNorm kernels on one backend and prints, per
// problem, the digests of every output (for bit-for-bit comparison between
// backends), the kernel time and the bandwidth against the bytes the
// operator must move; with --copy, the device's copy bandwidth for scale.
//
//   gn_bench [--seed S] [--fill F] [--iters N] [--copy BYTES] DESCRIPTOR...
//
// Derived inputs (backward's mean, rstd) come from this backend's forward
// kernel, so two backends that agree on the forward see identical inputs.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "determinism/run_digest.hpp"
#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"

using namespace kgate;

namespace {

// Device-to-device copy bandwidth (read + write) over `bytes`.
double copy_gbps(std::size_t bytes, int iters) {
  rt::DeviceBuffer<std::byte> a(bytes), b(bytes);
  rt::device_memset(a.data(), 0, bytes);
  rt::copy_d2d(b.data(), a.data(), bytes);
  rt::Event start, stop;
  start.record();
  for (int i = 0; i < iters; ++i) rt::copy_d2d(b.data(), a.data(), bytes);
  stop.record();
  stop.synchronize();
  const double ms = static_cast<double>(rt::elapsed_ms(start, stop)) / iters;
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  std::string fill = "signed";
  int iters = 10;
  std::size_t copy_bytes = 0;
  std::vector<std::string> problems;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--fill" && i + 1 < argc) fill = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--copy" && i + 1 < argc) copy_bytes = std::strtoull(argv[++i], nullptr, 10);
    else problems.push_back(a);
  }
  try {
    std::printf("backend %s\n", kernels::backend_name().c_str());
    if (copy_bytes) std::printf("copy %zu bytes: %.1f GB/s\n", copy_bytes, copy_gbps(copy_bytes, iters));
    for (const std::string& d : problems) {
      const Problem p = parse_descriptor(d);
      const Fill f = parse_fill(fill, seed);
      const auto in = determinism::make_inputs(p, f);
      std::map<Role, const Tensor*> ptr;
      for (const auto& [r, t] : in) ptr[r] = &t;
      double ms = 0;
      kernels::RunOptions opt;
      opt.kernel_ms = &ms;
      opt.timing_iters = iters;
      const auto out = kernels::run(p, kernels::plan(p), ptr, opt);
      std::printf("%s\n", to_descriptor(p).c_str());
      for (const auto& [r, t] : out) std::printf("  %-7s %s\n", std::string(name(r)).c_str(), digest(t).c_str());
      const double bytes = static_cast<double>(min_bytes(p));
      std::printf("  time %.4f ms  min bytes %.0f  %.1f GB/s\n", ms, bytes, bytes / (ms * 1e6));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gn_bench: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
