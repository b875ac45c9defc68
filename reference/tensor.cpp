#include "reference/tensor.hpp"

#include "reference/host_memory.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "reference/error.hpp"

namespace kgate {

std::int64_t checked_numel(const Dims& dims, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0) throw InputError(what, "negative extent in shape " + dims_string(dims));
    if (__builtin_mul_overflow(n, d, &n))
      throw InputError(what, "shape " + dims_string(dims) + " has more than 2^63 elements");
  }
  return n;
}

Dims contiguous_strides(const Dims& dims) {
  Dims s(dims.size());
  std::int64_t acc = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

std::string dims_string(const Dims& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s.empty() ? "scalar" : s;
}

void check_fits_in_memory(std::int64_t bytes, const std::string& what) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const double total = static_cast<double>(pages) * static_cast<double>(page);
  if (static_cast<double>(bytes) > total)
    throw InputError(what, "needs " + std::to_string(bytes >> 20) + " MiB but this machine has " +
                               std::to_string(static_cast<std::int64_t>(total) >> 20) + " MiB of memory");
}

std::int64_t TensorView::numel() const { return checked_numel(dims, "tensor"); }

std::int64_t TensorView::offset(const Dims& index) const {
  std::int64_t o = 0;
  for (std::size_t i = 0; i < index.size(); ++i) o += index[i] * strides[i];
  return o;
}

Tensor::Tensor(DType dtype, Dims dims) : Tensor(dtype, std::move(dims), Unfilled{}) {
  std::memset(data_.get(), 0, static_cast<std::size_t>(nbytes()));
}

Tensor::Tensor(DType dtype, Dims dims, Unfilled) : dtype_(dtype), dims_(std::move(dims)) {
  numel_ = checked_numel(dims_, "tensor shape");
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(numel_, static_cast<std::int64_t>(size_of(dtype_)), &bytes))
    throw InputError("tensor shape", dims_string(dims_) + " is too large");
  check_fits_in_memory(bytes, "tensor " + dims_string(dims_) + " " + std::string(name(dtype_)));
  const std::size_t used = static_cast<std::size_t>(bytes), rounded = used == 0 ? 64 : (used + 63) / 64 * 64;
  auto* p = static_cast<std::byte*>(host_alloc(rounded));
  std::memset(p + used, 0, rounded - used);  // the alignment padding
  data_ = std::unique_ptr<std::byte[], HostFree>(p, HostFree{rounded});
}

TensorView Tensor::view() const {
  return TensorView{dtype_, dims_, contiguous_strides(dims_), const_cast<std::byte*>(data_.get())};
}

Tensor Tensor::to(DType target) const {
  Tensor t(target, dims_);
  for (std::int64_t i = 0; i < numel_; ++i) t.set(i, get(i));
  return t;
}

}  // namespace kgate
