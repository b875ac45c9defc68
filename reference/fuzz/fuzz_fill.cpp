// Fuzz target: the fill-spec parser (--fill). The first 8 bytes are the
// seed, the rest the spec. A parsed spec prints to a text that parses back to
// the same fill, and its JSON form reads back to the same fill.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "reference/error.hpp"
#include "reference/fill.hpp"
#include "reference/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint64_t seed = 0;
  if (size >= sizeof seed) {
    std::memcpy(&seed, data, sizeof seed);
    data += sizeof seed;
    size -= sizeof seed;
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  kgate::Fill f;
  try {
    f = kgate::parse_fill(text, seed);
  } catch (const kgate::InputError&) {
    return 0;
  }
  KGATE_FUZZ_REQUIRE(kgate::parse_fill(kgate::fill_string(f), seed) == f);
  KGATE_FUZZ_REQUIRE(kgate::fill_from_json(nlohmann::json::parse(kgate::to_json(f).dump())) == f);
  return 0;
}
