// kgate_mma_conformance_<backend>: runs the sm90 MMA atoms over generated
// operands and checks every output against the host's sm90 numeric model bit
// for bit (mma_conformance.hpp). Prints one line per atom and the first
// mismatches with their operands and the model's intermediate terms.
//   usage: kgate_mma_conformance_<backend> [instructions per atom] [chain] [seed]
// Exit status: 0 all identical, 1 a mismatch, 2 bad arguments or a runtime error.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "kernels/conformance/mma_conformance.hpp"

namespace {
bool parse(const char* s, unsigned long long& v) {
  const std::string t = s;
  if (t.empty() || t.size() > 19 || t.find_first_not_of("0123456789") != std::string::npos) return false;
  v = std::strtoull(s, nullptr, 10);
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  unsigned long long n = 262144, chain = 16, seed = 20261203;
  if (argc > 4 || (argc > 1 && !parse(argv[1], n)) || (argc > 2 && !parse(argv[2], chain)) ||
      (argc > 3 && !parse(argv[3], seed)) || chain == 0 || chain > 4096 || n == 0 || n % (chain * 4) != 0) {
    std::fprintf(stderr,
                 "usage: %s [instructions per atom: a multiple of 4*chain] [chain: 1..4096] [seed]\n",
                 argc ? argv[0] : "kgate_mma_conformance");
    return 2;
  }
  try {
    const auto reps = kgate::conformance::run_mma_conformance(n, static_cast<int>(chain), seed);
    unsigned long long total = 0, same = 0, instr = 0;
    for (const auto& r : reps) {
      std::printf("%-52s instructions=%llu outputs=%llu identical=%llu mismatches=%llu  (nan %llu, inf %llu, +0 %llu, "
                  "-0 %llu, subnormal %llu)\n",
                  r.atom.c_str(), static_cast<unsigned long long>(r.instructions),
                  static_cast<unsigned long long>(r.outputs), static_cast<unsigned long long>(r.identical),
                  static_cast<unsigned long long>(r.outputs - r.identical), static_cast<unsigned long long>(r.nan),
                  static_cast<unsigned long long>(r.inf), static_cast<unsigned long long>(r.zero),
                  static_cast<unsigned long long>(r.neg_zero), static_cast<unsigned long long>(r.subnormal));
      for (const auto& m : r.mismatches) std::printf("MISMATCH %s\n", m.c_str());
      total += r.outputs;
      same += r.identical;
      instr += r.instructions;
    }
    std::printf("total: %llu MMA instructions, %llu outputs, %llu bit-identical, %llu differ (seed %llu, chain %llu)\n",
                instr, total, same, total - same, seed, chain);
    return same == total ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kgate_mma_conformance: %s\n", e.what());
    return 2;
  }
}
