#include "oracles/sim/sim.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace kgate::sim {

std::string_view name(Order o) {
  switch (o) {
    case Order::sequential: return "sequential";
    case Order::reversed: return "reversed";
    case Order::pairwise: return "pairwise";
    case Order::blocked: return "blocked";
    case Order::split_tree: return "splitK-tree";
    case Order::split_serial: return "splitK-serial";
    case Order::mfma: return "mfma-cdna3";
  }
  return "?";
}

std::string_view name(Defect d) {
  switch (d) {
    case Defect::none: return "none";
    case Defect::tap_off_by_one: return "tap off by one";
    case Defect::pad_wrong_side: return "padding on the wrong side";
    case Defect::missing_element: return "one output element missing";
    case Defect::drop_last_chunk: return "drops last K chunk (32)";
    case Defect::bf16_accumulation: return "bf16 accumulation";
    case Defect::tf32_inputs: return "tf32 inputs";
    case Defect::truncate_output: return "truncating output";
    case Defect::wrong_bias_broadcast: return "wrong bias broadcast";
    case Defect::gn_unbiased_var: return "GN unbiased variance";
    case Defect::gn_eps_outside_sqrt: return "GN eps outside sqrt";
    case Defect::gn_relu_before_affine: return "GN ReLU before affine";
  }
  return "?";
}

std::string Strategy::label() const {
  std::string s(name(order));
  if (order == Order::blocked || order == Order::split_tree || order == Order::split_serial)
    s += "(" + std::to_string(param) + ")";
  if (partial != DType::fp32) s += "[" + std::string(kgate::name(partial)) + " partials]";
  return s;
}

ReductionPlan plan_of(const Strategy& s, std::int64_t k, DType src) {
  k = std::max<std::int64_t>(k, 1);
  ReductionPlan p;
  switch (s.order) {
    case Order::sequential:
    case Order::reversed: p = ReductionPlan::sequential(k); break;
    case Order::pairwise: p = ReductionPlan::pairwise(k); break;
    case Order::blocked:
      p.length = s.param;
      p.splits = (k + s.param - 1) / s.param;
      p.combine = PartialCombine::serial;
      break;
    case Order::split_tree: p = ReductionPlan::split_k(k, s.param, PartialCombine::tree); break;
    case Order::split_serial: p = ReductionPlan::split_k(k, s.param, PartialCombine::serial); break;
    case Order::mfma:
      // f32 MFMA is chained fmaf: IEEE. f16/bf16: chunks.
      p = src == DType::fp32 ? ReductionPlan::sequential(k) : ReductionPlan::mfma(k);
      break;
  }
  p.partial = s.partial;
  return p;
}

namespace {

float to_bf16(float v) { return bf16_bits_to_fp32(fp32_to_bf16_bits(v)); }
float to_tf32(float v) {  // round to nearest even, 10 fraction bits
  if (!std::isfinite(v)) return v;
  std::uint32_t u = bit_cast<std::uint32_t>(v);
  u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  return bit_cast<float>(u);
}
float narrow(float v, DType t) {
  unsigned char b[8];
  store(t, b, 0, v);
  return static_cast<float>(load(t, b, 0));
}

struct Acc {
  bool bf16 = false;
  float add(float x, float y) const { return bf16 ? to_bf16(x + y) : x + y; }
};

float seq(const float* p, std::int64_t n, const Acc& acc) {
  float s = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) s = acc.add(s, p[i]);
  return s;
}

float pairwise_sum(const float* p, std::int64_t n, const Acc& acc) {
  if (n <= 0) return 0.0f;
  if (n == 1) return p[0];
  const std::int64_t h = n / 2;
  return acc.add(pairwise_sum(p, h, acc), pairwise_sum(p + h, n - h, acc));
}

float tree(std::vector<float> v, const Acc& acc) {
  if (v.empty()) return 0.0f;
  while (v.size() > 1) {
    std::vector<float> w;
    for (std::size_t i = 0; i + 1 < v.size(); i += 2) w.push_back(acc.add(v[i], v[i + 1]));
    if (v.size() % 2) w.push_back(v.back());
    v.swap(w);
  }
  return v[0];
}

}  // namespace

float cdna3_chunk(float c, const double* prod, int n) {
  int emax = INT32_MIN;
  for (int j = 0; j < n; ++j)
    if (prod[j] != 0.0) emax = std::max(emax, std::ilogb(prod[j]));
  double s = 0.0;
  if (emax != INT32_MIN) {
    const double q = std::ldexp(1.0, emax - 24);
    for (int j = 0; j < n; ++j) s += std::trunc(prod[j] / q) * q;  // exact: <= 28 significant bits
  }
  const double cd = c;
  int e = INT32_MIN;
  if (s != 0.0) e = std::ilogb(s);
  if (cd != 0.0) e = std::max(e, std::ilogb(cd));
  if (e == INT32_MIN) return c + 0.0f;
  const double qs = std::ldexp(1.0, e - 31), qc = std::ldexp(1.0, e - 24);
  const double st = std::trunc(s / qs) * qs;
  const double ct = std::trunc(cd / qc) * qc;
  return static_cast<float>(st + ct);  // exact sum, one round-to-nearest-even
}

float accumulate(const float* a, const float* b, std::int64_t k, const Strategy& s, DType src, Defect d) {
  std::vector<float> p(static_cast<std::size_t>(k));
  const bool tf32 = d == Defect::tf32_inputs && src == DType::fp32;
  std::int64_t n = k;
  if (d == Defect::drop_last_chunk && k > kDroppedChunk) n = k - kDroppedChunk;
  for (std::int64_t j = 0; j < n; ++j)
    p[j] = tf32 ? to_tf32(a[j]) * to_tf32(b[j]) : a[j] * b[j];
  Acc acc{d == Defect::bf16_accumulation};
  switch (s.order) {
    case Order::sequential: return seq(p.data(), n, acc);
    case Order::reversed: std::reverse(p.begin(), p.begin() + n); return seq(p.data(), n, acc);
    case Order::pairwise: return pairwise_sum(p.data(), n, acc);
    case Order::blocked: {
      float total = 0.0f;
      for (std::int64_t j = 0; j < n; j += s.param)
        total = acc.add(total, seq(p.data() + j, std::min(s.param, n - j), acc));
      return total;
    }
    case Order::split_tree:
    case Order::split_serial: {
      const std::int64_t len = std::max<std::int64_t>(1, (k + s.param - 1) / s.param);
      std::vector<float> parts;
      for (std::int64_t j = 0; j < k; j += len) {
        const std::int64_t m = std::max<std::int64_t>(0, std::min(len, n - j));
        parts.push_back(narrow(seq(p.data() + j, m, acc), s.partial));
      }
      if (s.order == Order::split_tree) return tree(parts, acc);
      float total = 0.0f;
      for (float v : parts) total = acc.add(total, v);
      return total;
    }
    case Order::mfma: {
      if (src == DType::fp32) {  // f32 MFMA: chained fmaf in increasing k
        float c = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) {
          c = std::fma(tf32 ? to_tf32(a[j]) : a[j], tf32 ? to_tf32(b[j]) : b[j], c);
          if (acc.bf16) c = to_bf16(c);
        }
        return c;
      }
      float c = 0.0f;
      double prod[8];
      for (std::int64_t j = 0; j < n; j += 8) {
        const int m = static_cast<int>(std::min<std::int64_t>(8, n - j));
        for (int t = 0; t < 8; ++t) prod[t] = t < m ? static_cast<double>(a[j + t]) * static_cast<double>(b[j + t]) : 0.0;
        c = cdna3_chunk(c, prod, 8);
        if (acc.bf16) c = to_bf16(c);
      }
      return c;
    }
  }
  return NAN;
}

void reference_dot(const float* a, const float* b, std::int64_t k, double* value, double* abs_value) {
  double s = 0.0, comp = 0.0, as = 0.0;
  for (std::int64_t j = 0; j < k; ++j) {
    const double p = static_cast<double>(a[j]) * static_cast<double>(b[j]);  // exact
    const double t = s + p;  // TwoSum
    const double bp = t - s;
    comp += (s - (t - bp)) + (p - bp);
    s = t;
    as += std::fabs(p);
  }
  *value = s + comp;
  *abs_value = as;
}

void poison(Tensor& t) {
  const std::int64_t n = t.numel();
  auto* p = static_cast<unsigned char*>(t.data());
  for (std::int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::fp64: { const std::uint64_t v = 0x7ff4000000000000ull; std::memcpy(p + 8 * i, &v, 8); break; }
      case DType::fp32: { const std::uint32_t v = 0x7fa00000u; std::memcpy(p + 4 * i, &v, 4); break; }
      case DType::bf16: { const std::uint16_t v = 0x7fa0u; std::memcpy(p + 2 * i, &v, 2); break; }
      case DType::fp16: { const std::uint16_t v = 0x7d00u; std::memcpy(p + 2 * i, &v, 2); break; }
    }
  }
}

// ---------------------------------------------------------------------------
// Convolution: one enumeration of the multiply-adds for all ops and directions.
//
// "small" is the tensor with the stride-divided extent (conv3d: y; transposed:
// x), "big" the other; big_pos = small_pos*stride - pad_front + k*dil per axis.
// The weight is [small channels][taps][big channels / groups].

namespace {

struct Mac {
  std::int64_t small, big, weight;
};

template <class F>
void for_each_mac(const ConvProblem& p, Defect d, F&& f) {
  const bool tr = p.op == ConvOp::conv_transpose3d;
  const Axis3 out = p.out();
  const Axis3 sext = tr ? p.in : out, bext = tr ? out : p.in;
  const std::int64_t cs = tr ? p.cin : p.cout, cb = tr ? p.cout : p.cin;
  const std::int64_t g = p.groups, csg = cs / g, cbg = cb / g;
  const Axis3 pf = d == Defect::pad_wrong_side ? p.pad_back : p.pad_front;
  const auto& k = p.kernel;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t s0 = 0; s0 < sext[0]; ++s0)
      for (std::int64_t s1 = 0; s1 < sext[1]; ++s1)
        for (std::int64_t s2 = 0; s2 < sext[2]; ++s2) {
          const std::int64_t spos = ((n * sext[0] + s0) * sext[1] + s1) * sext[2] + s2;
          for (std::int64_t k0 = 0; k0 < k[0]; ++k0)
            for (std::int64_t k1 = 0; k1 < k[1]; ++k1)
              for (std::int64_t k2 = 0; k2 < k[2]; ++k2) {
                const std::int64_t b0 = s0 * p.stride[0] - pf[0] + k0 * p.dilation[0];
                const std::int64_t b1 = s1 * p.stride[1] - pf[1] + k1 * p.dilation[1];
                std::int64_t b2 = s2 * p.stride[2] - pf[2] + k2 * p.dilation[2];
                if (d == Defect::tap_off_by_one && k2 == 0) b2 += 1;
                if (b0 < 0 || b0 >= bext[0] || b1 < 0 || b1 >= bext[1] || b2 < 0 || b2 >= bext[2]) continue;
                const std::int64_t bpos = ((n * bext[0] + b0) * bext[1] + b1) * bext[2] + b2;
                const std::int64_t tap = (k0 * k[1] + k1) * k[2] + k2;
                for (std::int64_t c = 0; c < cs; ++c) {
                  const std::int64_t grp = c / csg;
                  for (std::int64_t cl = 0; cl < cbg; ++cl)
                    f(Mac{spos * cs + c, bpos * cb + grp * cbg + cl, (c * (k[0] * k[1] * k[2]) + tap) * cbg + cl});
                }
              }
        }
}

enum class Slot { small, big, weight };
struct DirMap {
  Slot out, a, b;  // output and the two operands (in0, in1 order of p.inputs())
};
DirMap dir_map(const ConvProblem& p) {
  const bool tr = p.op == ConvOp::conv_transpose3d;
  switch (p.dir) {
    case ConvDir::fwd: return tr ? DirMap{Slot::big, Slot::small, Slot::weight} : DirMap{Slot::small, Slot::big, Slot::weight};
    case ConvDir::bwd_data: return tr ? DirMap{Slot::small, Slot::big, Slot::weight} : DirMap{Slot::big, Slot::small, Slot::weight};
    case ConvDir::bwd_weight: return tr ? DirMap{Slot::weight, Slot::small, Slot::big} : DirMap{Slot::weight, Slot::big, Slot::small};
  }
  return {};
}
std::int64_t pick(const Mac& m, Slot s) { return s == Slot::small ? m.small : s == Slot::big ? m.big : m.weight; }

Terms gather(const ConvProblem& p, const Tensor& in0, const Tensor& in1, std::int64_t nout, Defect d) {
  const DirMap dm = dir_map(p);
  Terms t;
  t.start.assign(nout + 1, 0);
  for_each_mac(p, d, [&](const Mac& m) { ++t.start[pick(m, dm.out) + 1]; });
  for (std::int64_t i = 0; i < nout; ++i) t.start[i + 1] += t.start[i];
  t.a.resize(t.start[nout]);
  t.b.resize(t.start[nout]);
  std::vector<std::int64_t> fillp(t.start.begin(), t.start.end() - 1);
  for_each_mac(p, d, [&](const Mac& m) {
    const std::int64_t o = pick(m, dm.out);
    const std::int64_t j = fillp[o]++;
    t.a[j] = static_cast<float>(in0.get(pick(m, dm.a)));
    t.b[j] = static_cast<float>(in1.get(pick(m, dm.b)));
  });
  return t;
}

Tensor make_input(const ConvProblem& p, const Fill& f, const TensorSpec& s) {
  Tensor t(s.dtype, s.dims);
  fill_tensor(f, Problem{p}, s.role, t);
  return t;
}

}  // namespace

ConvCase make_conv_case(const ConvProblem& p, const Fill& fill) {
  p.validate();
  ConvCase c;
  c.p = p;
  c.fill = fill;
  const auto ins = p.inputs();
  c.in0 = make_input(p, fill, ins[0]);
  c.in1 = make_input(p, fill, ins[1]);
  if (p.bias && p.dir == ConvDir::fwd) c.bias = make_input(p, fill, ins[2]);
  const auto outs = p.outputs();
  c.out = outs[0].role;
  c.ref = Tensor(DType::fp64, outs[0].dims);
  c.abs = Tensor(DType::fp64, outs[0].dims);
  const std::int64_t n = c.ref.numel();
  c.terms = gather(p, c.in0, c.in1, n, Defect::none);
  c.kmax = std::max<std::int64_t>(1, p.reduction_length());
  const std::int64_t cout = outs[0].dims.back();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t s = c.terms.start[i], e = c.terms.start[i + 1];
    double v = 0, a = 0;
    reference_dot(c.terms.a.data() + s, c.terms.b.data() + s, e - s, &v, &a);
    if (c.bias.numel()) {
      v += c.bias.get(i % cout);
      a += std::fabs(c.bias.get(i % cout));
    }
    c.ref.set(i, v);
    c.abs.set(i, a);
  }
  return c;
}

Tensor run_conv(const ConvCase& c, const Strategy& s, Defect d) {
  const auto outs = c.p.outputs();
  Tensor y(c.p.dst, outs[0].dims);
  poison(y);
  const std::int64_t n = y.numel();
  const bool regather = d == Defect::tap_off_by_one || d == Defect::pad_wrong_side;
  const Terms alt = regather ? gather(c.p, c.in0, c.in1, n, d) : Terms{};
  const Terms& t = regather ? alt : c.terms;
  const std::int64_t cout = outs[0].dims.back();
  for (std::int64_t i = 0; i < n; ++i) {
    if (d == Defect::missing_element && i == n / 2) continue;
    const std::int64_t b = t.start[i], e = t.start[i + 1];
    float v = accumulate(t.a.data() + b, t.b.data() + b, e - b, s, c.p.src, d);
    if (c.bias.numel()) {
      const std::int64_t ch = d == Defect::wrong_bias_broadcast ? (i + 1) % cout : i % cout;
      v = v + static_cast<float>(c.bias.get(ch));
    }
    if (d == Defect::truncate_output && c.p.dst != DType::fp32) {
      // Truncation toward zero to dst precision.
      const std::uint32_t u = bit_cast<std::uint32_t>(v);
      if (c.p.dst == DType::bf16) {
        y.set(i, bit_cast<float>(u & 0xffff0000u));
      } else {
        const double q = std::ldexp(1.0, std::max(std::ilogb(v), -14) - 10);
        y.set(i, v == 0 ? 0.0 : std::trunc(v / q) * q);
      }
      continue;
    }
    y.set(i, v);  // rounds once from fp32 to dst (a kernel's fp32 -> dst convert)
  }
  return y;
}

// ---------------------------------------------------------------------------
// GroupNorm

ReductionPlan gn_plan(std::int64_t n, bool pairwise) {
  return pairwise ? ReductionPlan::pairwise(n) : ReductionPlan::sequential(n);
}

namespace {

struct GnIndex {
  std::int64_t N, C, G, Cg, S, M;
  explicit GnIndex(const GroupNormProblem& p)
      : N(p.n), C(p.c), G(p.groups), Cg(p.c / p.groups), S(p.spatial[0] * p.spatial[1] * p.spatial[2]),
        M(p.group_size()) {}
  template <class F>
  void group(std::int64_t b, std::int64_t g, F&& f) const {  // element indices of (b, g) in NDHWC order
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t cl = 0; cl < Cg; ++cl) f((b * S + s) * C + g * Cg + cl);
  }
};

double comp_sum(const std::vector<double>& v) {
  double s = 0, c = 0;
  for (double p : v) {
    const double t = s + p, bp = t - s;
    c += (s - (t - bp)) + (p - bp);
    s = t;
  }
  return s + c;
}

float fsum(const std::vector<float>& v, bool pairwise) {
  Acc acc;
  return pairwise ? pairwise_sum(v.data(), static_cast<std::int64_t>(v.size()), acc)
                  : seq(v.data(), static_cast<std::int64_t>(v.size()), acc);
}

}  // namespace

GnCase make_gn_case(const GroupNormProblem& p, const Fill& fill) {
  p.validate();
  GnCase c;
  c.p = p;
  c.fill = fill;
  const Problem P{p};
  for (const auto& s : p.inputs()) {
    if (s.derived) continue;
    Tensor t(s.dtype, s.dims);
    fill_tensor(fill, P, s.role, t);
    if (s.role == Role::x) c.x = std::move(t);
    if (s.role == Role::dy) c.dy = std::move(t);
    if (s.role == Role::gamma) c.gamma = std::move(t);
    if (s.role == Role::beta) c.beta = std::move(t);
  }
  const GnIndex ix(p);
  c.mean = Tensor(DType::fp64, {p.n, p.groups});
  c.var = Tensor(DType::fp64, {p.n, p.groups});
  c.rstd = Tensor(DType::fp64, {p.n, p.groups});
  c.mean_fed = Tensor(DType::fp64, {p.n, p.groups});
  c.rstd_fed = Tensor(DType::fp64, {p.n, p.groups});
  for (std::int64_t b = 0; b < ix.N; ++b)
    for (std::int64_t g = 0; g < ix.G; ++g) {
      std::vector<double> v;
      ix.group(b, g, [&](std::int64_t i) { v.push_back(c.x.get(i)); });
      const double mu = comp_sum(v) / static_cast<double>(ix.M);
      std::vector<double> sq;
      for (double x : v) sq.push_back((x - mu) * (x - mu));
      const double var = comp_sum(sq) / static_cast<double>(ix.M);
      const std::int64_t ng = b * ix.G + g;
      c.mean.set(ng, mu);
      c.var.set(ng, var);
      c.rstd.set(ng, 1.0 / std::sqrt(var + p.eps));
      c.mean_fed.set(ng, static_cast<float>(mu));
      c.rstd_fed.set(ng, static_cast<float>(1.0 / std::sqrt(var + p.eps)));
    }
  auto gam = [&](std::int64_t ch) { return p.affine ? c.gamma.get(ch) : 1.0; };
  auto bet = [&](std::int64_t ch) { return p.affine ? c.beta.get(ch) : 0.0; };
  c.y_ref = Tensor(DType::fp64, p.x_dims());
  if (p.dir == GnDir::fwd) {
    for (std::int64_t i = 0; i < c.x.numel(); ++i) {
      const std::int64_t ch = i % ix.C, ng = (i / (ix.S * ix.C)) * ix.G + ch / ix.Cg;
      double y = gam(ch) * ((c.x.get(i) - c.mean.get(ng)) * c.rstd.get(ng)) + bet(ch);
      if (p.relu) y = std::max(y, 0.0);
      c.y_ref.set(i, y);
    }
    return c;
  }
  // Backward with the fed statistics; with the fused ReLU dy is masked by
  // [y_fwd > 0], y_fwd from x and the fed statistics (reference/groupnorm).
  if (p.relu) {
    Tensor masked(c.dy.dtype(), c.dy.dims());
    for (std::int64_t i = 0; i < c.x.numel(); ++i) {
      const std::int64_t ch = i % ix.C, ng = (i / (ix.S * ix.C)) * ix.G + ch / ix.Cg;
      const double y = gam(ch) * ((c.x.get(i) - c.mean_fed.get(ng)) * c.rstd_fed.get(ng)) + bet(ch);
      masked.set(i, y > 0 ? c.dy.get(i) : 0.0);
    }
    c.dy_masked_ref = std::move(masked);
  }
  const Tensor& dyr = p.relu ? c.dy_masked_ref : c.dy;
  for (std::int64_t b = 0; b < ix.N; ++b)
    for (std::int64_t g = 0; g < ix.G; ++g) {
      const std::int64_t ng = b * ix.G + g;
      const double mu = c.mean_fed.get(ng), r = c.rstd_fed.get(ng);
      std::vector<double> t1, t2;
      ix.group(b, g, [&](std::int64_t i) {
        const double gd = gam(i % ix.C) * dyr.get(i);
        t1.push_back(gd * c.x.get(i));
        t2.push_back(gd);
      });
      const double s1 = comp_sum(t1), s2 = comp_sum(t2), Md = static_cast<double>(ix.M);
      const double c2 = (s2 * mu - s1) * r * r * r / Md, c3 = -c2 * mu - s2 * r / Md;
      ix.group(b, g, [&](std::int64_t i) {
        c.y_ref.set(i, r * gam(i % ix.C) * dyr.get(i) + c2 * c.x.get(i) + c3);
      });
    }
  c.dgamma_ref = Tensor(DType::fp64, {p.c});
  c.dbeta_ref = Tensor(DType::fp64, {p.c});
  for (std::int64_t ch = 0; ch < ix.C; ++ch) {
    std::vector<double> tg, tb;
    for (std::int64_t b = 0; b < ix.N; ++b)
      for (std::int64_t s = 0; s < ix.S; ++s) {
        const std::int64_t i = (b * ix.S + s) * ix.C + ch, ng = b * ix.G + ch / ix.Cg;
        const double dy = dyr.get(i);
        tg.push_back(dy * (c.x.get(i) - c.mean_fed.get(ng)) * c.rstd_fed.get(ng));
        tb.push_back(dy);
      }
    c.dgamma_ref.set(ch, comp_sum(tg));
    c.dbeta_ref.set(ch, comp_sum(tb));
  }
  return c;
}

GnOutputs run_gn(const GnCase& c, bool pw, Defect d) {
  const auto& p = c.p;
  const GnIndex ix(p);
  GnOutputs o;
  auto gam = [&](std::int64_t ch) { return p.affine ? static_cast<float>(c.gamma.get(ch)) : 1.0f; };
  auto bet = [&](std::int64_t ch) { return p.affine ? static_cast<float>(c.beta.get(ch)) : 0.0f; };
  const float Mf = static_cast<float>(ix.M);
  if (p.dir == GnDir::fwd) {
    o.y = Tensor(p.dst, p.x_dims());
    poison(o.y);
    o.mean = Tensor(DType::fp32, {p.n, p.groups});
    o.rstd = Tensor(DType::fp32, {p.n, p.groups});
    for (std::int64_t b = 0; b < ix.N; ++b)
      for (std::int64_t g = 0; g < ix.G; ++g) {
        std::vector<float> v;
        ix.group(b, g, [&](std::int64_t i) { v.push_back(static_cast<float>(c.x.get(i))); });
        const float mu = fsum(v, pw) / Mf;
        std::vector<float> sq;
        for (float x : v) sq.push_back((x - mu) * (x - mu));
        float var = fsum(sq, pw) / (d == Defect::gn_unbiased_var ? Mf - 1.0f : Mf);
        const float eps = static_cast<float>(p.eps);
        const float r = d == Defect::gn_eps_outside_sqrt ? 1.0f / (std::sqrt(var) + eps) : 1.0f / std::sqrt(var + eps);
        const std::int64_t ng = b * ix.G + g;
        o.mean.set(ng, mu);
        o.rstd.set(ng, r);
        ix.group(b, g, [&](std::int64_t i) {
          const std::int64_t ch = i % ix.C;
          float xh = (static_cast<float>(c.x.get(i)) - mu) * r;
          float y;
          if (d == Defect::gn_relu_before_affine) {
            y = gam(ch) * std::max(xh, 0.0f) + bet(ch);
          } else {
            y = gam(ch) * xh + bet(ch);
            if (p.relu) y = std::max(y, 0.0f);
          }
          o.y.set(i, y);
        });
      }
    return o;
  }
  o.y = Tensor(p.src, p.x_dims());
  poison(o.y);
  // The kernel's own mask: y_fwd recomputed in fp32.
  std::vector<float> dyk(static_cast<std::size_t>(c.x.numel()));
  for (std::int64_t i = 0; i < c.x.numel(); ++i) {
    const std::int64_t ch = i % ix.C, ng = (i / (ix.S * ix.C)) * ix.G + ch / ix.Cg;
    const float yf = gam(ch) * ((static_cast<float>(c.x.get(i)) - static_cast<float>(c.mean_fed.get(ng))) *
                                static_cast<float>(c.rstd_fed.get(ng))) + bet(ch);
    dyk[i] = (!p.relu || yf > 0.0f) ? static_cast<float>(c.dy.get(i)) : 0.0f;
  }
  for (std::int64_t b = 0; b < ix.N; ++b)
    for (std::int64_t g = 0; g < ix.G; ++g) {
      const std::int64_t ng = b * ix.G + g;
      const float mu = static_cast<float>(c.mean_fed.get(ng)), r = static_cast<float>(c.rstd_fed.get(ng));
      std::vector<float> t1, t2;
      ix.group(b, g, [&](std::int64_t i) {
        const float gd = gam(i % ix.C) * dyk[i];
        t1.push_back(gd * static_cast<float>(c.x.get(i)));
        t2.push_back(gd);
      });
      const float s1 = fsum(t1, pw), s2 = fsum(t2, pw);
      const float c2 = (s2 * mu - s1) * (r * r * r) / Mf;
      const float c3 = -c2 * mu - s2 * r / Mf;
      ix.group(b, g, [&](std::int64_t i) {
        o.y.set(i, r * gam(i % ix.C) * dyk[i] + c2 * static_cast<float>(c.x.get(i)) + c3);
      });
    }
  if (p.affine) {
    o.dgamma = Tensor(DType::fp32, {p.c});
    o.dbeta = Tensor(DType::fp32, {p.c});
    for (std::int64_t ch = 0; ch < ix.C; ++ch) {
      std::vector<float> tg, tb;
      for (std::int64_t b = 0; b < ix.N; ++b)
        for (std::int64_t s = 0; s < ix.S; ++s) {
          const std::int64_t i = (b * ix.S + s) * ix.C + ch, ng = b * ix.G + ch / ix.Cg;
          const float dy = dyk[i];
          tg.push_back(dy * (static_cast<float>(c.x.get(i)) - static_cast<float>(c.mean_fed.get(ng))) *
                       static_cast<float>(c.rstd_fed.get(ng)));
          tb.push_back(dy);
        }
      o.dgamma.set(ch, fsum(tg, pw));
      o.dbeta.set(ch, fsum(tb, pw));
    }
  }
  return o;
}

}  // namespace kgate::sim
