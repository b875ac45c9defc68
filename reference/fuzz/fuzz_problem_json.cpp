// Fuzz target: the JSON problem loader (parse_json + problem_from_json). A
// loaded problem writes to JSON and to a descriptor that both read back to
// the same problem.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/fuzz/fuzz_util.hpp"
#include "reference/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kgate::Problem p;
  try {
    p = kgate::problem_from_json(kgate::parse_json(text, "fuzz.json"), "problem");
  } catch (const kgate::InputError&) {
    return 0;
  }
  KGATE_FUZZ_REQUIRE(kgate::problem_from_json(kgate::parse_json(kgate::to_json(p).dump(), "again")) == p);
  KGATE_FUZZ_REQUIRE(kgate::parse_descriptor(kgate::to_descriptor(p)) == p);
  return 0;
}
