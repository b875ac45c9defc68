// Fuzz target: the descriptor parser. A parsed descriptor prints to its
// canonical form, which parses back to the same problem; its cost counts
// are computable without overflow.
#include <cstddef>
#include <cstdint>
#include <string>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kgate::Problem p;
  try {
    p = kgate::parse_descriptor(text);
  } catch (const kgate::InputError&) {
    return 0;
  }
  const std::string canonical = kgate::to_descriptor(p);
  KGATE_FUZZ_REQUIRE(kgate::parse_descriptor(canonical) == p);
  KGATE_FUZZ_REQUIRE(kgate::to_descriptor(kgate::parse_descriptor(canonical)) == canonical);
  KGATE_FUZZ_REQUIRE(kgate::min_bytes(p) > 0);
  KGATE_FUZZ_REQUIRE(kgate::flops(p) > 0);
  return 0;
}
