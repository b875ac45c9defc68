// Tensor digest: XXH3-128 over a header (format version, dtype, shape) and the
// raw element bytes, printed as 32 lowercase hex digits. Equal digests mean
// bit-identical tensors of the same dtype and shape.
#pragma once

#include <string>

#include "reference/tensor.hpp"

namespace kgate {

std::string digest(const TensorView& t);
inline std::string digest(const Tensor& t) { return digest(t.view()); }

}  // namespace kgate
