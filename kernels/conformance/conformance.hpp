// Runs the conformance kernel set on the backend this file is compiled for,
// and the same computations as plain C++ (same orders of operations), so that
// outputs can be compared bit for bit across backends and against the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kgate::conformance {

struct Output {
  std::string name;                 // e.g. "block_reduce"
  std::vector<unsigned char> bytes;  // the kernel's output, raw
};

// Fixed problem sizes; `scale` multiplies the large dimensions (1 in CI).
std::vector<Output> run_device(int scale = 1);
std::vector<Output> run_plain_cpp(int scale = 1);

// XXH3-64 of the bytes, as 16 hex digits.
std::string digest_hex(const std::vector<unsigned char>& bytes);

const char* backend_name();

}  // namespace kgate::conformance
