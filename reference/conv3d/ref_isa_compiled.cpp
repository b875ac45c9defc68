// Compiled with the fast references' flags (KGATE_REF_ARCH): the features
// those flags turn on, read from the compiler's macros.
#include "reference/conv3d/ref_isa.hpp"

namespace kgate::ref::detail {

namespace {

// A defined feature macro expands to 1; an undefined one stays its own name.
#define KGATE_ISA_STR2(x) #x
#define KGATE_ISA_STR(x) KGATE_ISA_STR2(x)
constexpr bool on(const char* s) { return s[0] == '1' && s[1] == '\0'; }

// In kIsaFeatureNames order.
constexpr bool kOn[] = {
    on(KGATE_ISA_STR(__SSE3__)),     on(KGATE_ISA_STR(__SSSE3__)),    on(KGATE_ISA_STR(__SSE4_1__)),
    on(KGATE_ISA_STR(__SSE4_2__)),   on(KGATE_ISA_STR(__POPCNT__)),   on(KGATE_ISA_STR(__AVX__)),
    on(KGATE_ISA_STR(__AVX2__)),     on(KGATE_ISA_STR(__FMA__)),      on(KGATE_ISA_STR(__BMI__)),
    on(KGATE_ISA_STR(__BMI2__)),     on(KGATE_ISA_STR(__AVX512F__)),  on(KGATE_ISA_STR(__AVX512VL__)),
    on(KGATE_ISA_STR(__AVX512BW__)), on(KGATE_ISA_STR(__AVX512DQ__)), on(KGATE_ISA_STR(__AVX512CD__)),
};
static_assert(sizeof(kOn) / sizeof(kOn[0]) == kIsaFeatures);

constexpr std::uint32_t mask() {
  std::uint32_t m = 0;
  for (int i = 0; i < kIsaFeatures; ++i) m |= (kOn[i] ? 1u : 0u) << i;
  return m;
}

}  // namespace

std::uint32_t ref_isa_compiled() { return mask(); }

}  // namespace kgate::ref::detail
