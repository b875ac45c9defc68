// Problems as values: ConvProblem and GroupNormProblem, their validation, the
// tensors each operator-direction reads and writes, and their cost counts.
//
// The output-shape formulas live here and nowhere else; they equal PyTorch's:
//   conv3d:            out = floor((in + pad_front + pad_back - dil*(k-1) - 1) / stride) + 1
//   conv_transpose3d:  out = (in - 1)*stride - pad_front - pad_back + dil*(k-1) + output_padding + 1
// Per-side padding generalises PyTorch's symmetric padding (front and back may
// differ); with front == back both formulas are PyTorch's exactly.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "reference/dtype.hpp"
#include "reference/tensor.hpp"

namespace kgate {

using Axis3 = std::array<std::int64_t, 3>;  // (D, H, W)

enum class ConvOp : std::uint8_t { conv3d, conv_transpose3d };
enum class ConvDir : std::uint8_t { fwd, bwd_data, bwd_weight };
enum class GnDir : std::uint8_t { fwd, bwd };
// logical: the convolution as the model states it. halo: halo planes
// concatenated on the listed axes, padding 0 everywhere. adapter: halo only on
// the split axes, padding kept on the others (docs/CORPUS.md, "Shape forms").
enum class ShapeForm : std::uint8_t { logical, halo, adapter };

// What a tensor is to an operator. Also the key of the input generators, so
// the numeric values are part of the data format: append, never renumber.
enum class Role : std::uint8_t {
  x = 0, w = 1, b = 2, y = 3, dy = 4, dx = 5, dw = 6, db = 7,
  gamma = 8, beta = 9, mean = 10, rstd = 11, dgamma = 12, dbeta = 13,
};
std::string_view name(Role r);

std::string_view name(ConvOp op);
std::string_view name(ConvDir dir);
std::string_view name(GnDir dir);
std::string_view name(ShapeForm form);

struct TensorSpec {
  Role role;
  DType dtype;
  Dims dims;
  // A derived input is not drawn by a generator: it is computed from the
  // others (GroupNorm backward's mean and rstd come from its forward).
  bool derived = false;
};

struct ConvProblem {
  ConvOp op = ConvOp::conv3d;
  ConvDir dir = ConvDir::fwd;
  std::int64_t n = 1;
  std::int64_t cin = 1;   // channels of the operator's input (x)
  std::int64_t cout = 1;  // channels of the operator's output (y)
  std::int64_t groups = 1;
  Axis3 in{1, 1, 1};  // spatial extent of x, halo included in halo/adapter form
  Axis3 kernel{1, 1, 1};
  Axis3 stride{1, 1, 1};
  Axis3 pad_front{0, 0, 0};
  Axis3 pad_back{0, 0, 0};
  Axis3 dilation{1, 1, 1};
  Axis3 output_padding{0, 0, 0};  // conv_transpose3d only
  bool bias = false;
  // src: both operands of the direction; dst: its result; acc: accumulation.
  DType src = DType::bf16;
  DType dst = DType::bf16;
  DType acc = DType::fp32;
  ShapeForm form = ShapeForm::logical;
  Axis3 halo{0, 0, 0};  // halo planes per side per axis (halo/adapter forms)

  // Spatial extent of y. Call validate() first: on an invalid problem the
  // value may be < 1.
  Axis3 out() const;
  // Throws InputError naming the field and the allowed range.
  void validate() const;

  Dims x_dims() const;
  Dims y_dims() const;
  Dims w_dims() const;
  // Length of the reduction per output element of this direction.
  std::int64_t reduction_length() const;
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  double flops() const;              // 2 per multiply-add, plus the bias adds
  // Every input read once, every output written once. validate() refuses a
  // problem whose byte count exceeds int64, so on a valid one this never wraps.
  std::int64_t min_bytes() const;

  bool operator==(const ConvProblem&) const = default;
};

struct GroupNormProblem {
  GnDir dir = GnDir::fwd;
  std::int64_t n = 1;
  std::int64_t c = 1;
  std::int64_t groups = 1;
  Axis3 spatial{1, 1, 1};
  double eps = 1e-5;
  bool affine = true;
  bool relu = false;  // ReLU fused after the affine
  DType src = DType::bf16;  // x (and dx)
  DType dst = DType::fp32;  // y (and dy)

  void validate() const;
  Dims x_dims() const;
  std::int64_t group_size() const;  // (C/G) * D*H*W elements per (n, group)
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  double flops() const;  // nominal: fwd 8, bwd 12 per element
  std::int64_t min_bytes() const;

  bool operator==(const GroupNormProblem&) const = default;
};

using Problem = std::variant<ConvProblem, GroupNormProblem>;

void validate(const Problem& p);
std::vector<TensorSpec> inputs(const Problem& p);
std::vector<TensorSpec> outputs(const Problem& p);
double flops(const Problem& p);
std::int64_t min_bytes(const Problem& p);
// "conv3d.fwd", "groupnorm.bwd", ...
std::string op_dir_name(const Problem& p);

}  // namespace kgate
