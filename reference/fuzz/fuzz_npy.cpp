// Fuzz target: the .npy reader, on the bytes of a file. The first byte picks
// the dtype the caller expects (none, or one of the four). A file that reads
// holds exactly the data its header claims.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "reference/error.hpp"
#include "reference/fuzz/fuzz_util.hpp"
#include "reference/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const std::optional<kgate::DType> kExpected[] = {std::nullopt, kgate::DType::fp64, kgate::DType::fp32,
                                                          kgate::DType::bf16, kgate::DType::fp16};
  const auto expected = kExpected[data[0] % 5];
  std::istringstream in(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  try {
    const kgate::Tensor t = kgate::read_npy(in, size - 1, "fuzz.npy", expected);
    KGATE_FUZZ_REQUIRE(static_cast<std::size_t>(t.nbytes()) < size);
    KGATE_FUZZ_REQUIRE(!expected || t.dtype() == *expected);
  } catch (const kgate::InputError&) {
  }
  return 0;
}
