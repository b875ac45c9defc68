#include "reference/problem.hpp"

#include <cmath>

#include "reference/error.hpp"

namespace kgate {

std::string_view name(Role r) {
  switch (r) {
    case Role::x: return "x";
    case Role::w: return "w";
    case Role::b: return "b";
    case Role::y: return "y";
    case Role::dy: return "dy";
    case Role::dx: return "dx";
    case Role::dw: return "dw";
    case Role::db: return "db";
    case Role::gamma: return "gamma";
    case Role::beta: return "beta";
    case Role::mean: return "mean";
    case Role::rstd: return "rstd";
    case Role::dgamma: return "dgamma";
    case Role::dbeta: return "dbeta";
  }
  return "?";
}

std::string_view name(ConvOp op) { return op == ConvOp::conv3d ? "conv3d" : "conv_transpose3d"; }
std::string_view name(ConvDir d) {
  switch (d) {
    case ConvDir::fwd: return "fwd";
    case ConvDir::bwd_data: return "bwd_data";
    case ConvDir::bwd_weight: return "bwd_weight";
  }
  return "?";
}
std::string_view name(GnDir d) { return d == GnDir::fwd ? "fwd" : "bwd"; }
std::string_view name(ShapeForm f) {
  switch (f) {
    case ShapeForm::logical: return "logical";
    case ShapeForm::halo: return "halo";
    case ShapeForm::adapter: return "adapter";
  }
  return "?";
}

namespace {

constexpr const char* kAxis[3] = {"d", "h", "w"};

std::string field(const char* what, int axis) { return std::string(what) + "[" + kAxis[axis] + "]"; }

void require(bool ok, const std::string& f, const std::string& msg) {
  if (!ok) throw InputError(f, msg);
}

std::int64_t prod(const Axis3& a) { return a[0] * a[1] * a[2]; }
// In double: cost counts may exceed int64 (they are rounded, never wrapped).
double dprod(const Axis3& a) {
  return static_cast<double>(a[0]) * static_cast<double>(a[1]) * static_cast<double>(a[2]);
}

// Bytes of every tensor read or written, each counted once. Throws
// InputError naming the tensor (or "bytes", for the sum) past 2^63 bytes, so
// that a valid problem's byte count is always representable.
std::int64_t checked_bytes(const std::vector<TensorSpec>& in, const std::vector<TensorSpec>& out) {
  std::int64_t total = 0;
  for (const auto* ts : {&in, &out})
    for (const auto& t : *ts) {
      const std::string role(name(t.role));
      std::int64_t b = 0;
      if (__builtin_mul_overflow(checked_numel(t.dims, role), static_cast<std::int64_t>(size_of(t.dtype)), &b))
        throw InputError(role, "shape " + dims_string(t.dims) + " of " + std::string(name(t.dtype)) +
                                   " needs more than 2^63 bytes");
      if (__builtin_add_overflow(total, b, &total))
        throw InputError("bytes", "the tensors of this problem need more than 2^63 bytes together");
    }
  return total;
}

// Every extent of a valid problem is below this, so products of a handful of
// them cannot overflow int64 before checked_numel sees them.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 24;

void require_range(std::int64_t v, std::int64_t lo, std::int64_t hi, const std::string& f) {
  require(v >= lo && v <= hi, f,
          "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
}

}  // namespace

// ---------------------------------------------------------------------------
// ConvProblem

Axis3 ConvProblem::out() const {
  Axis3 o{};
  for (int a = 0; a < 3; ++a) {
    const std::int64_t span = dilation[a] * (kernel[a] - 1);
    if (op == ConvOp::conv3d) {
      const std::int64_t num = in[a] + pad_front[a] + pad_back[a] - span - 1;
      // floor division (num may be negative on an invalid problem)
      o[a] = (num >= 0 ? num / stride[a] : -((-num + stride[a] - 1) / stride[a])) + 1;
    } else {
      o[a] = (in[a] - 1) * stride[a] - pad_front[a] - pad_back[a] + span + output_padding[a] + 1;
    }
  }
  return o;
}

void ConvProblem::validate() const {
  require_range(n, 1, kMaxExtent, "n");
  require_range(cin, 1, kMaxExtent, "cin");
  require_range(cout, 1, kMaxExtent, "cout");
  require_range(groups, 1, kMaxExtent, "groups");
  require(cin % groups == 0 && cout % groups == 0, "groups",
          "must divide the input channels (" + std::to_string(cin) + ") and the output channels (" +
              std::to_string(cout) + "), got " + std::to_string(groups));
  for (int a = 0; a < 3; ++a) {
    require_range(in[a], 1, kMaxExtent, field("in", a));
    require_range(kernel[a], 1, 1024, field("kernel", a));
    require_range(stride[a], 1, 1024, field("stride", a));
    require_range(dilation[a], 1, 1024, field("dilation", a));
    require_range(pad_front[a], 0, kMaxExtent, field("pad_front", a));
    require_range(pad_back[a], 0, kMaxExtent, field("pad_back", a));
    if (op == ConvOp::conv3d) {
      require(output_padding[a] == 0, field("output_padding", a),
              "must be 0 for conv3d, got " + std::to_string(output_padding[a]));
    } else {
      const std::int64_t lim = std::max(stride[a], dilation[a]);
      require(output_padding[a] >= 0 && output_padding[a] < lim, field("output_padding", a),
              "must be in [0, max(stride, dilation) - 1 = " + std::to_string(lim - 1) + "], got " +
                  std::to_string(output_padding[a]));
    }
  }
  // One problem, one name: bwd_data reads dy and w only; the bias gradient
  // is bwd_weight's db.
  require(!(bias && dir == ConvDir::bwd_data), "bias",
          "bwd_data has no bias tensor (the bias gradient db is computed by bwd_weight): drop `bias`");
  switch (form) {
    case ShapeForm::logical:
      for (int a = 0; a < 3; ++a) require(halo[a] == 0, field("halo", a), "must be 0 in logical form");
      break;
    case ShapeForm::halo:
    case ShapeForm::adapter:
      for (int a = 0; a < 3; ++a) {
        require_range(halo[a], 0, kMaxExtent, field("halo", a));
        if (form == ShapeForm::halo || halo[a] > 0) {
          const std::string why = std::string("must be 0 on a halo axis in ") + std::string(name(form)) + " form";
          require(pad_front[a] == 0, field("pad_front", a), why);
          require(pad_back[a] == 0, field("pad_back", a), why);
        }
        require(2 * halo[a] < in[a], field("halo", a),
                "2*halo must be less than the input extent " + std::to_string(in[a]));
      }
      if (form == ShapeForm::halo) {
        require(halo[0] > 0 || halo[1] > 0 || halo[2] > 0, "halo", "halo form needs a halo on some axis");
      }
      break;
  }
  require(acc == DType::fp32 || acc == DType::fp64, "acc",
          "must be fp32 or fp64, got " + std::string(name(acc)));
  const Axis3 o = out();
  for (int a = 0; a < 3; ++a) {
    require(o[a] >= 1, field("out", a),
            std::string("output extent along ") + kAxis[a] + " must be >= 1, got " + std::to_string(o[a]) +
                " (input, kernel, dilation, padding and stride are inconsistent)");
    require(o[a] <= kMaxExtent, field("out", a),
            std::string("output extent along ") + kAxis[a] + " too large: " + std::to_string(o[a]));
  }
  // Every tensor's element and byte counts, and their sum, fit in int64.
  checked_bytes(inputs(), outputs());
}

Dims ConvProblem::x_dims() const { return {n, in[0], in[1], in[2], cin}; }
Dims ConvProblem::y_dims() const {
  const Axis3 o = out();
  return {n, o[0], o[1], o[2], cout};
}
Dims ConvProblem::w_dims() const {
  if (op == ConvOp::conv3d) return {cout, kernel[0], kernel[1], kernel[2], cin / groups};
  return {cin, kernel[0], kernel[1], kernel[2], cout / groups};
}

std::int64_t ConvProblem::reduction_length() const {
  const std::int64_t taps = prod(kernel);
  // Per output element of each direction, the number of products summed
  // (an upper bound: padding and stride make some of them zero or absent).
  switch (dir) {
    case ConvDir::fwd: return cin / groups * taps;
    case ConvDir::bwd_data: return cout / groups * taps;
    case ConvDir::bwd_weight: return n * (op == ConvOp::conv3d ? prod(out()) : prod(in));
  }
  return 0;
}

std::vector<TensorSpec> ConvProblem::inputs() const {
  switch (dir) {
    case ConvDir::fwd: {
      std::vector<TensorSpec> v{{Role::x, src, x_dims()}, {Role::w, src, w_dims()}};
      if (bias) v.push_back({Role::b, src, {cout}});
      return v;
    }
    case ConvDir::bwd_data: return {{Role::dy, src, y_dims()}, {Role::w, src, w_dims()}};
    case ConvDir::bwd_weight: return {{Role::x, src, x_dims()}, {Role::dy, src, y_dims()}};
  }
  return {};
}

std::vector<TensorSpec> ConvProblem::outputs() const {
  switch (dir) {
    case ConvDir::fwd: return {{Role::y, dst, y_dims()}};
    case ConvDir::bwd_data: return {{Role::dx, dst, x_dims()}};
    case ConvDir::bwd_weight: {
      std::vector<TensorSpec> v{{Role::dw, dst, w_dims()}};
      if (bias) v.push_back({Role::db, dst, {cout}});
      return v;
    }
  }
  return {};
}

double ConvProblem::flops() const {
  // Multiply-adds of the full contraction (taps that land in padding included,
  // as every implicit-GEMM kernel does them).
  const double macs = op == ConvOp::conv3d
                          ? static_cast<double>(n) * dprod(out()) * static_cast<double>(cout) *
                                static_cast<double>(cin / groups) * dprod(kernel)
                          : static_cast<double>(n) * dprod(in) * static_cast<double>(cin) *
                                static_cast<double>(cout / groups) * dprod(kernel);
  const double bias_adds = bias ? static_cast<double>(n) * dprod(out()) * static_cast<double>(cout) : 0.0;
  return 2.0 * macs + bias_adds;
}

std::int64_t ConvProblem::min_bytes() const { return checked_bytes(inputs(), outputs()); }

// ---------------------------------------------------------------------------
// GroupNormProblem

void GroupNormProblem::validate() const {
  require_range(n, 1, kMaxExtent, "n");
  require_range(c, 1, kMaxExtent, "c");
  require_range(groups, 1, kMaxExtent, "groups");
  require(c % groups == 0, "groups",
          "must divide c (" + std::to_string(c) + "), got " + std::to_string(groups));
  for (int a = 0; a < 3; ++a) require_range(spatial[a], 1, kMaxExtent, field("spatial", a));
  require(std::isfinite(eps) && eps > 0.0, "eps", "must be finite and > 0");
  // The kernels add eps in fp32: below fp32's smallest normal it is lost or
  // rounded (5e-324 is 0 in fp32), and a correct kernel's rstd of a constant
  // group is Inf where the fp64 reference's is finite.
  require(eps >= 0x1p-126, "eps", "must be at least 2^-126 (fp32's smallest normal, about 1.18e-38): the kernels add it in fp32");
  require(eps <= 0x1p100, "eps", "must be at most 2^100 (var + eps and its rsqrt stay in fp32's range)");
  require(src != DType::fp64 || dst == DType::fp64, "dst", "fp64 input needs fp64 output");
  checked_bytes(inputs(), outputs());
}

Dims GroupNormProblem::x_dims() const { return {n, spatial[0], spatial[1], spatial[2], c}; }
std::int64_t GroupNormProblem::group_size() const { return c / groups * prod(spatial); }

std::vector<TensorSpec> GroupNormProblem::inputs() const {
  std::vector<TensorSpec> v{{Role::x, src, x_dims()}};
  if (dir == GnDir::bwd) v.push_back({Role::dy, dst, x_dims()});
  if (affine) {
    v.push_back({Role::gamma, DType::fp32, {c}});
    v.push_back({Role::beta, DType::fp32, {c}});
  }
  if (dir == GnDir::bwd) {
    v.push_back({Role::mean, DType::fp32, {n, groups}, true});
    v.push_back({Role::rstd, DType::fp32, {n, groups}, true});
  }
  return v;
}

std::vector<TensorSpec> GroupNormProblem::outputs() const {
  if (dir == GnDir::fwd)
    return {{Role::y, dst, x_dims()}, {Role::mean, DType::fp32, {n, groups}}, {Role::rstd, DType::fp32, {n, groups}}};
  std::vector<TensorSpec> v{{Role::dx, src, x_dims()}};
  if (affine) {
    v.push_back({Role::dgamma, DType::fp32, {c}});
    v.push_back({Role::dbeta, DType::fp32, {c}});
  }
  return v;
}

double GroupNormProblem::flops() const {
  return (dir == GnDir::fwd ? 8.0 : 12.0) * static_cast<double>(n) * static_cast<double>(c) * dprod(spatial);
}

std::int64_t GroupNormProblem::min_bytes() const { return checked_bytes(inputs(), outputs()); }

// ---------------------------------------------------------------------------
// Problem

void validate(const Problem& p) { std::visit([](const auto& q) { q.validate(); }, p); }
std::vector<TensorSpec> inputs(const Problem& p) { return std::visit([](const auto& q) { return q.inputs(); }, p); }
std::vector<TensorSpec> outputs(const Problem& p) { return std::visit([](const auto& q) { return q.outputs(); }, p); }
double flops(const Problem& p) { return std::visit([](const auto& q) { return q.flops(); }, p); }
std::int64_t min_bytes(const Problem& p) { return std::visit([](const auto& q) { return q.min_bytes(); }, p); }

std::string op_dir_name(const Problem& p) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) return std::string(name(c->op)) + "." + std::string(name(c->dir));
  return "groupnorm." + std::string(name(std::get<GroupNormProblem>(p).dir));
}

}  // namespace kgate
