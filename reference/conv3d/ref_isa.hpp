// The instruction set the fast references (kgate_ref_ops) were compiled for
// (CMake option KGATE_REF_ARCH, cmake/ref_arch.cmake) and the check that the
// running CPU has it.
//
// Every binary that links the fast references checks, before main, that the
// CPU has each x86 vector feature their objects were compiled with; if one is
// missing it prints which, and the level to rebuild with, and exits with 2
// (instead of dying later on an illegal instruction). Their results on lattice
// inputs do not depend on the level (every product and partial sum is exact);
// on other inputs the fp64 rounding may differ between levels (FMA, Eigen's
// blocking), far below every oracle tolerance.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kgate::ref {

// The -march level of the fast references and how it was chosen, e.g.
// "x86-64-v4 (KGATE_REF_ARCH=native)", or "portable (KGATE_REF_ARCH=portable)".
std::string ref_isa();

namespace detail {

// The x86 features the check knows, one bit each, in this order.
inline constexpr const char* kIsaFeatureNames[] = {
    "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx", "avx2", "fma",
    "bmi", "bmi2", "avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd",
};
inline constexpr int kIsaFeatures = static_cast<int>(sizeof(kIsaFeatureNames) / sizeof(kIsaFeatureNames[0]));

// The features the references' objects were compiled with (defined in an
// object built with their flags; it only returns a constant).
std::uint32_t ref_isa_compiled();
// The features of the running CPU (0 off x86-64).
std::uint32_t cpu_isa_features();
// Names of the features in `compiled` that `cpu` lacks, in table order.
std::vector<std::string> missing_isa_features(std::uint32_t compiled, std::uint32_t cpu);
// Returns when `cpu` has every feature of `compiled`; otherwise prints the
// missing ones and the level to rebuild with, and exits with 2. Run before
// main with the real masks.
void check_ref_isa(std::uint32_t compiled, std::uint32_t cpu);
// Does nothing; referenced from the references so that every binary using
// them links the start-up check.
void require_ref_isa();

}  // namespace detail
}  // namespace kgate::ref
