// Fuzz target: the corpus loaders, the shapes corpus (corpus/shapes.json)
// and the bitwise corpus (corpus/bitwise.json), on the same document.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corpus/bitwise.hpp"
#include "corpus/corpus_file.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"
#include "reference/fuzz/fuzz_util.hpp"
#include "reference/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc;
  try {
    doc = kgate::parse_json(text, "fuzz.json");
  } catch (const kgate::InputError&) {
    return 0;
  }
  try {
    for (const auto& e : kgate::corpus::shapes_from_json(doc, "shapes.json"))
      KGATE_FUZZ_REQUIRE(kgate::to_descriptor(e.problem) == e.descriptor);
  } catch (const kgate::InputError&) {
  }
  try {
    for (const auto& e : kgate::corpus::bitwise_from_json(doc, "bitwise.json"))
      KGATE_FUZZ_REQUIRE(kgate::to_descriptor(e.problem) == e.descriptor && !e.digests.empty());
  } catch (const kgate::InputError&) {
  }
  return 0;
}
