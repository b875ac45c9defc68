// NDHWC tensors with 64-bit shapes and strides, owning (Tensor) or viewing
// (TensorView). Elements are stored in their dtype; load/store convert through
// fp64 with a single rounding (reference/dtype.hpp).
//
// Layouts (outermost dimension first):
//   activations            [N][D][H][W][C]
//   conv3d weight          [Cout][KD][KH][KW][Cin/groups]
//   conv_transpose3d weight [Cin][KD][KH][KW][Cout/groups]
//   bias, gamma, beta      [C]
//   GroupNorm statistics   [N][G]
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference/dtype.hpp"
#include "reference/host_memory.hpp"

namespace kgate {

using Dims = std::vector<std::int64_t>;

// Number of elements; throws InputError(what) when the product overflows int64.
std::int64_t checked_numel(const Dims& dims, const std::string& what);
Dims contiguous_strides(const Dims& dims);
std::string dims_string(const Dims& dims);  // "1x128x128x128x64"

// Throws InputError(what) when `bytes` cannot be held in this machine's memory.
void check_fits_in_memory(std::int64_t bytes, const std::string& what);

struct TensorView {
  DType dtype = DType::fp32;
  Dims dims;
  Dims strides;  // in elements
  void* data = nullptr;

  std::int64_t numel() const;
  int rank() const { return static_cast<int>(dims.size()); }
  bool contiguous() const { return strides == contiguous_strides(dims); }
  std::int64_t offset(const Dims& index) const;
  double get(std::int64_t linear) const { return load(dtype, data, linear); }
  void set(std::int64_t linear, double v) const { store(dtype, data, linear, v); }
  double at(const Dims& index) const { return load(dtype, data, offset(index)); }
  std::int64_t nbytes() const { return numel() * static_cast<std::int64_t>(size_of(dtype)); }
};

// Owning, contiguous, 64-byte aligned.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Dims dims);  // zero-filled
  // Not filled (contents unspecified: a large tensor may reuse an earlier
  // one's pages, see host_memory.hpp): for a producer that writes every
  // element itself.
  struct Unfilled {};
  Tensor(DType dtype, Dims dims, Unfilled);

  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  std::int64_t numel() const { return numel_; }
  std::int64_t nbytes() const { return numel_ * static_cast<std::int64_t>(size_of(dtype_)); }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <class T> T* as() { return static_cast<T*>(data()); }
  template <class T> const T* as() const { return static_cast<const T*>(data()); }
  double get(std::int64_t i) const { return load(dtype_, data(), i); }
  void set(std::int64_t i, double v) { store(dtype_, data(), i, v); }
  TensorView view() const;

  // The same values in another dtype, each rounded once.
  Tensor to(DType target) const;

 private:
  DType dtype_ = DType::fp32;
  Dims dims_;
  std::int64_t numel_ = 0;
  std::unique_ptr<std::byte[], HostFree> data_;
};

}  // namespace kgate
