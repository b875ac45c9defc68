// Compiled for the compiler's default target (never with the references'
// -march): it runs before any code of the references and must run on every
// x86-64 CPU.
#include "reference/conv3d/ref_isa.hpp"

#include <cstdio>
#include <cstdlib>

#ifndef KGATE_REF_MARCH
#define KGATE_REF_MARCH ""
#endif
#ifndef KGATE_REF_ARCH
#define KGATE_REF_ARCH ""
#endif

namespace kgate::ref {

std::string ref_isa() {
  const std::string level = KGATE_REF_MARCH;
  return (level.empty() ? std::string("portable") : level) + " (KGATE_REF_ARCH=" + KGATE_REF_ARCH + ")";
}

namespace detail {

std::uint32_t cpu_isa_features() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // __builtin_cpu_supports takes a string literal: in kIsaFeatureNames order.
  const bool has[] = {
      __builtin_cpu_supports("sse3") != 0,     __builtin_cpu_supports("ssse3") != 0,
      __builtin_cpu_supports("sse4.1") != 0,   __builtin_cpu_supports("sse4.2") != 0,
      __builtin_cpu_supports("popcnt") != 0,   __builtin_cpu_supports("avx") != 0,
      __builtin_cpu_supports("avx2") != 0,     __builtin_cpu_supports("fma") != 0,
      __builtin_cpu_supports("bmi") != 0,      __builtin_cpu_supports("bmi2") != 0,
      __builtin_cpu_supports("avx512f") != 0,  __builtin_cpu_supports("avx512vl") != 0,
      __builtin_cpu_supports("avx512bw") != 0, __builtin_cpu_supports("avx512dq") != 0,
      __builtin_cpu_supports("avx512cd") != 0,
  };
  static_assert(sizeof(has) / sizeof(has[0]) == kIsaFeatures);
  std::uint32_t m = 0;
  for (int i = 0; i < kIsaFeatures; ++i) m |= (has[i] ? 1u : 0u) << i;
  return m;
#else
  return 0;
#endif
}

std::vector<std::string> missing_isa_features(std::uint32_t compiled, std::uint32_t cpu) {
  std::vector<std::string> out;
  for (int i = 0; i < kIsaFeatures; ++i)
    if ((compiled >> i & 1u) != 0 && (cpu >> i & 1u) == 0) out.emplace_back(kIsaFeatureNames[i]);
  return out;
}

void require_ref_isa() {}

void check_ref_isa(std::uint32_t compiled, std::uint32_t cpu) {
  const auto missing = missing_isa_features(compiled, cpu);
  if (missing.empty()) return;
  std::string names;
  for (const auto& n : missing) names += (names.empty() ? "" : " ") + n;
  std::fprintf(stderr,
               "kgate: the fast references were compiled for %s, but this CPU lacks: %s. Rebuild with "
               "-DKGATE_REF_ARCH=<a level this CPU has> (e.g. x86-64-v3, x86-64-v2 or portable).\n",
               ref_isa().c_str(), names.c_str());
  std::_Exit(2);
}

namespace {

// Before main: a missing feature would otherwise be an illegal instruction
// somewhere inside a reference, long after start-up.
[[maybe_unused]] const bool kIsaChecked = [] {
  check_ref_isa(ref_isa_compiled(), cpu_isa_features());
  return true;
}();

}  // namespace
}  // namespace detail
}  // namespace kgate::ref
