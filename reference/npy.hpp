// NumPy .npy (format 1.0, little-endian, C order) for kgate tensors.
// fp64 '<f8', fp32 '<f4', fp16 '<f2'; bf16 has no NumPy dtype and is stored
// as its raw bits, '<u2' (read it back by naming bf16 as the expected dtype).
// Writes are atomic: a temporary file in the same folder, then rename.
#pragma once

#include <optional>
#include <string>

#include "reference/tensor.hpp"

namespace kgate {

void write_npy(const std::string& path, const TensorView& t);
// Throws InputError(field = path) on a malformed file or a dtype mismatch.
Tensor read_npy(const std::string& path, std::optional<DType> expected = std::nullopt);

// Writes `contents` to path atomically (temporary file + rename).
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace kgate
