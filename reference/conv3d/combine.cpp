#include "reference/conv3d/combine.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/conv3d/conv_geometry.hpp"
#include "reference/error.hpp"
#include "reference/parallel.hpp"

namespace kgate::ref {

namespace {

using detail::ConvGeom;
using detail::Kind;

// The constant operand and the probe's values: each run's first and last
// terms (equal values, so each partial is exact in any order and on any
// accumulation model), the other terms zero. By channel, two patterns of
// partials over the S runs of an output:
//   channels 0, 1 mod 4: 2^24 first and -2^24 last (mirrored for 1), 3/2
//     between: the plan's fp32 tree differs from one chain over the terms
//     (rounded to nearest or toward zero) for every S >= 3 even after the
//     result is rounded to bf16 (the cancellation at the end brings the
//     difference up to the result's magnitude), and from a serial combine
//     for S >= 5;
//   channels 2, 3 mod 4: 2^24, 3/2, 3/2, -2^24 repeating (shifted for 3): a
//     run boundary elsewhere than the plan's mixes a 2^23 term with a 3/4.
// (S = 2 on a bf16 output without a bias is beyond any probe: one add of
// two partials, whose fp32 difference from a chain bf16 cannot hold.)
constexpr double kConst = 0x1p12;
constexpr double kBig = 0x1p11, kSmall = 0x3p-14;  // terms kBig * kConst = 2^23, kSmall * kConst = 3/4
double probe_value(std::int64_t k, std::int64_t runs, std::int64_t c) {
  const std::int64_t v = c % 4;
  if (v < 2) {
    const double sign = v == 0 ? 1.0 : -1.0;
    if (k == 0) return sign * kBig;
    if (k == runs - 1) return -sign * kBig;
    return kSmall;
  }
  switch ((k + v) % 4) {
    case 0: return kBig;
    case 1:
    case 2: return kSmall;
    default: return -kBig;
  }
}
// Whether term e of a reduction cut into runs of `run` is one the probe sets.
bool probe_term(std::int64_t e, std::int64_t run) { return e % run == 0 || e % run == run - 1; }

// The phase-list index of tap (k0, k1, k2) of the scatter family: its rank
// among the taps of its stride phase, in (KD, KH, KW) order (a tap lies on
// exactly one phase's lattice per axis: its residue k*dil - pad mod stride).
// `size`: the length of that phase's list.
std::int64_t phase_index(const ConvGeom& g, const std::int64_t (&k)[3], std::int64_t* size = nullptr) {
  std::int64_t e = 0, n = 1;
  for (int a = 0; a < 3; ++a) {
    std::int64_t rank = 0, count = 0;
    for (std::int64_t q = 0; q < g.K[a]; ++q)
      if (((q - k[a]) * g.dil[a]) % g.stride[a] == 0) {
        rank += q < k[a];
        ++count;
      }
    e = e * count + rank;
    n *= count;
  }
  if (size) *size = n;
  return e;
}

// The taps' split runs along the outer axis: the contract family's tap
// number, the scatter family's phase-list index.
// `size`: the length of the list it indexes.
std::int64_t tap_run_index(const ConvGeom& g, Kind kind, const std::int64_t (&k)[3], std::int64_t* size = nullptr) {
  if (kind == Kind::scatter) return phase_index(g, k, size);
  if (size) *size = g.taps;
  return (k[0] * g.K[1] + k[1]) * g.K[2] + k[2];
}

// An fp32 result stored in dtype t (rounded once, as the kernels' stores).
double rounded(DType t, float y) {
  unsigned char bytes[8];
  store(t, bytes, 0, static_cast<double>(y));
  return load(t, bytes, 0);
}

float combine(std::vector<float>& p, PartialCombine how) {
  const std::int64_t n = static_cast<std::int64_t>(p.size());
  if (n == 0) return 0.0f;
  if (how == PartialCombine::serial) {
    float s = p[0];
    for (std::int64_t i = 1; i < n; ++i) s = s + p[static_cast<std::size_t>(i)];
    return s;
  }
  for (std::int64_t w = 1; w < n; w *= 2)
    for (std::int64_t s = 0; s + w < n; s += 2 * w)
      p[static_cast<std::size_t>(s)] = p[static_cast<std::size_t>(s)] + p[static_cast<std::size_t>(s + w)];
  return p[0];
}

}  // namespace

void fill_combine_probe(const ConvProblem& p, Role role, const Fill& f, Tensor& t) {
  const detail::DirPlan dp = detail::dir_plan(p);
  const ConvGeom g = detail::make_geom(p);
  const std::int64_t run = static_cast<std::int64_t>(f.run);
  const std::int64_t numel = t.numel();
  if (role == Role::b) {  // the forward's bias: small integers
    for_each_element(numel, [&](std::int64_t i) { t.set(i, static_cast<double>(static_cast<std::int64_t>(counter_hash(f.seed, role, i) % 5) - 2)); });
    return;
  }
  const bool probe = dp.kind == Kind::wgrad ? role == dp.a : role == Role::w;
  if (!probe) {
    for_each_element(numel, [&](std::int64_t i) { t.set(i, kConst); });
    return;
  }
  switch (dp.kind) {
    case Kind::wgrad:  // the small operand: rows (n, position) of cs channels
      for_each_element(numel, [&](std::int64_t i) {
        const std::int64_t r = i / g.cs, c = i % g.cs;
        const std::int64_t runs = (g.n * g.s_pos + run - 1) / run;
        t.set(i, probe_term(r, run) ? probe_value(r / run, runs, c) : 0.0);
      });
      return;
    case Kind::contract:
    case Kind::scatter:  // w[cs][KD][KH][KW][clg]
      for_each_element(numel, [&](std::int64_t i) {
        const std::int64_t q_large = i % g.clg, tap = (i / g.clg) % g.taps, c_small = i / (g.clg * g.taps);
        const std::int64_t k[3] = {tap / (g.K[1] * g.K[2]), (tap / g.K[2]) % g.K[1], tap % g.K[2]};
        // The reduction's channel: contract sums large channels (q_large),
        // scatter small ones (c_small within its group); the output's
        // channel is the other.
        const bool first = dp.kind == Kind::contract ? q_large == 0 : c_small % g.csg == 0;
        const std::int64_t out_c = dp.kind == Kind::contract ? c_small : (c_small / g.csg) * g.clg + q_large;
        std::int64_t size = 0;
        const std::int64_t e = tap_run_index(g, dp.kind, k, &size);
        t.set(i, first && probe_term(e, run) ? probe_value(e / run, (size + run - 1) / run, out_c) : 0.0);
      });
      return;
  }
}

Replay combine_replay(const ConvProblem& p, Role output, const ReductionPlan& plan, const std::map<Role, const Tensor*>& in) {
  const detail::DirPlan dp = detail::dir_plan(p);
  const ConvGeom g = detail::make_geom(p);
  const auto get = [&](Role r) -> const Tensor& {
    const auto it = in.find(r);
    if (it == in.end() || !it->second) throw std::logic_error("combine_replay: missing input " + std::string(name(r)));
    return *it->second;
  };
  const bool db = output == Role::db;
  if (!db && output != dp.out) throw std::logic_error("combine_replay: " + std::string(name(output)) + " is not an output");
  if (plan.splits > 1 && plan.split_run < 1) throw std::logic_error("combine_replay: the plan publishes no slice map");
  const std::int64_t run = plan.splits > 1 ? plan.split_run : std::int64_t{1} << 62;
  Dims dims;
  for (const auto& s : p.outputs())
    if (s.role == output) dims = s.dims;
  Replay r{Tensor(DType::fp64, dims), Tensor(DType::fp64, dims)};
  const Tensor& a = get(dp.a);
  const Tensor& b = get(dp.b);
  const Tensor* bias = dp.bias_on_out && !db ? &get(Role::b) : nullptr;
  const std::int64_t numel = r.value.numel();
  const std::int64_t rows = g.n * g.s_pos;
  std::vector<char> probed(static_cast<std::size_t>(numel), 0), sensitive(static_cast<std::size_t>(numel), 0);
  // The nonzero entries of the operand that carries the reduction's
  // structure (the probe's sparse one; any input works, only slower):
  // wgrad the small operand's rows per channel; contract and scatter the
  // weight's reduction channels per (output channel, tap).
  std::vector<std::vector<std::int64_t>> nz;
  if (!db) {
    if (dp.kind == Kind::wgrad) {
      nz.resize(static_cast<std::size_t>(g.cs));
      for (std::int64_t rr = 0; rr < rows; ++rr)
        for (std::int64_t c = 0; c < g.cs; ++c)
          if (a.get(rr * g.cs + c) != 0.0) nz[static_cast<std::size_t>(c)].push_back(rr);
    } else {
      const bool contract = dp.kind == Kind::contract;
      const std::int64_t outs = contract ? g.cs : g.cl;
      nz.resize(static_cast<std::size_t>(outs * g.taps));
      for (std::int64_t i = 0; i < b.numel(); ++i) {
        if (b.get(i) == 0.0) continue;
        const std::int64_t q_large = i % g.clg, tap = (i / g.clg) % g.taps, c_small = i / (g.clg * g.taps);
        const std::int64_t out_c = contract ? c_small : (c_small / g.csg) * g.clg + q_large;
        nz[static_cast<std::size_t>(out_c * g.taps + tap)].push_back(contract ? q_large : c_small % g.csg);
      }
    }
  }
  for_each_element(numel, [&](std::int64_t out) {
    if (db) {
      // db[c] = column sum of dy (small: rows of cs; large: rows of cl),
      // each slice in row order in fp32, then the combine.
      const Tensor& dy = get(Role::dy);
      const std::int64_t cols = p.cout, nrows = dy.numel() / cols;
      const std::int64_t slices = nrows == 0 ? 0 : (nrows - 1) / run + 1;
      std::vector<float> sums(static_cast<std::size_t>(slices), 0.0f);
      double exact = 0;
      for (std::int64_t rr = 0; rr < nrows; ++rr) {
        float& s = sums[static_cast<std::size_t>(rr / run)];
        s = s + static_cast<float>(dy.get(rr * cols + out));
        exact += dy.get(rr * cols + out);
      }
      const float y = combine(sums, plan.combine);
      r.value.set(out, rounded(p.dst, y));
      r.probed.set(out, 1.0);
      probed[static_cast<std::size_t>(out)] = 1;
      sensitive[static_cast<std::size_t>(out)] = static_cast<double>(y) != exact;
      return;
    }
    std::vector<double> part;
    std::vector<int> terms;
    auto size_to = [&](std::int64_t total) {
      const std::int64_t n = total == 0 ? 0 : (total - 1) / run + 1;
      part.assign(static_cast<std::size_t>(n), 0.0);
      terms.assign(static_cast<std::size_t>(n), 0);
    };
    auto add = [&](std::int64_t k, double v) {
      if (v == 0.0) return;
      part[static_cast<std::size_t>(k)] += v;
      ++terms[static_cast<std::size_t>(k)];
    };
    std::int64_t channel = 0;
    switch (dp.kind) {
      case Kind::wgrad: {
        const std::int64_t cll = out % g.clg;
        std::int64_t q = out / g.clg;
        const std::int64_t k2 = q % g.K[2]; q /= g.K[2];
        const std::int64_t k1 = q % g.K[1]; q /= g.K[1];
        const std::int64_t k0 = q % g.K[0];
        const std::int64_t c = q / g.K[0];
        const std::int64_t grp = c / g.csg;
        size_to(rows);
        for (const std::int64_t rr : nz[static_cast<std::size_t>(c)]) {
          std::int64_t t = rr;
          const std::int64_t i2 = t % g.S[2]; t /= g.S[2];
          const std::int64_t i1 = t % g.S[1]; t /= g.S[1];
          const std::int64_t i0 = t % g.S[0];
          const std::int64_t bn = t / g.S[0];
          const std::int64_t j0 = i0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
          const std::int64_t j1 = i1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
          const std::int64_t j2 = i2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
          if (j0 < 0 || j0 >= g.L[0] || j1 < 0 || j1 >= g.L[1] || j2 < 0 || j2 >= g.L[2]) continue;
          add(rr / run, a.get(g.small_at(bn, i0, i1, i2, c)) * b.get(g.large_at(bn, j0, j1, j2, grp * g.clg + cll)));
        }
        break;
      }
      case Kind::contract: {
        const std::int64_t c = out % g.cs;
        std::int64_t t = out / g.cs;
        const std::int64_t i2 = t % g.S[2]; t /= g.S[2];
        const std::int64_t i1 = t % g.S[1]; t /= g.S[1];
        const std::int64_t i0 = t % g.S[0];
        const std::int64_t bn = t / g.S[0];
        const std::int64_t grp = c / g.csg;
        channel = c;
        size_to(g.taps);
        for (std::int64_t tap = 0; tap < g.taps; ++tap) {
          const auto& qs = nz[static_cast<std::size_t>(c * g.taps + tap)];
          if (qs.empty()) continue;
          const std::int64_t k0 = tap / (g.K[1] * g.K[2]), k1 = (tap / g.K[2]) % g.K[1], k2 = tap % g.K[2];
          const std::int64_t j0 = i0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
          const std::int64_t j1 = i1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
          const std::int64_t j2 = i2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
          if (j0 < 0 || j0 >= g.L[0] || j1 < 0 || j1 >= g.L[1] || j2 < 0 || j2 >= g.L[2]) continue;
          for (const std::int64_t qq : qs)
            add(tap / run, a.get(g.large_at(bn, j0, j1, j2, grp * g.clg + qq)) * b.get(g.w_at(c, k0, k1, k2, qq)));
        }
        break;
      }
      case Kind::scatter: {
        const std::int64_t c = out % g.cl;
        std::int64_t t = out / g.cl;
        std::int64_t jj[3];
        jj[2] = t % g.L[2]; t /= g.L[2];
        jj[1] = t % g.L[1]; t /= g.L[1];
        jj[0] = t % g.L[0];
        const std::int64_t bn = t / g.L[0];
        const std::int64_t grp = c / g.clg, cll = c % g.clg;
        channel = c;
        bool sized = false;
        for (std::int64_t tap = 0; tap < g.taps; ++tap) {
          const std::int64_t k[3] = {tap / (g.K[1] * g.K[2]), (tap / g.K[2]) % g.K[1], tap % g.K[2]};
          std::int64_t i[3];
          bool lattice = true, inside = true;
          for (int ax = 0; ax < 3; ++ax) {
            const std::int64_t u = jj[ax] + g.pad[ax] - k[ax] * g.dil[ax];
            lattice = lattice && ((u % g.stride[ax]) + g.stride[ax]) % g.stride[ax] == 0;
            i[ax] = u >= 0 && u % g.stride[ax] == 0 ? u / g.stride[ax] : -1;
            inside = inside && i[ax] >= 0 && i[ax] < g.S[ax];
          }
          if (!lattice) continue;  // another phase's tap
          std::int64_t size = 0;
          const std::int64_t e = tap_run_index(g, dp.kind, k, &size);
          if (!sized) {
            size_to(size);  // this output's phase list
            sized = true;
          }
          if (!inside) continue;
          for (const std::int64_t qq : nz[static_cast<std::size_t>(c * g.taps + tap)])
            add(e / run, a.get(g.small_at(bn, i[0], i[1], i[2], grp * g.csg + qq)) * b.get(g.w_at(grp * g.csg + qq, k[0], k[1], k[2], cll)));
        }
        break;
      }
    }
    std::vector<float> pf(part.size());
    double exact = 0;
    bool ok = true;
    for (std::size_t k = 0; k < part.size(); ++k) {
      // At most two terms whose sum fp32 holds: exact in any order and on
      // every accumulation model (an aligned sum truncated or rounded to 24
      // bits keeps it).
      pf[k] = static_cast<float>(part[k]);
      ok = ok && terms[k] <= 2 && static_cast<double>(pf[k]) == part[k];
      exact += part[k];
    }
    float y = combine(pf, plan.combine);
    if (bias) {
      y = y + static_cast<float>(bias->get(channel));
      exact += bias->get(channel);
    }
    r.value.set(out, rounded(p.dst, y));
    r.probed.set(out, ok ? 1.0 : 0.0);
    probed[static_cast<std::size_t>(out)] = ok;
    sensitive[static_cast<std::size_t>(out)] = ok && static_cast<double>(y) != exact;
  });
  for (std::int64_t i = 0; i < numel; ++i) {
    r.probed_count += probed[static_cast<std::size_t>(i)];
    r.order_sensitive += sensitive[static_cast<std::size_t>(i)];
  }
  return r;
}

}  // namespace kgate::ref
