#include "reference/conv3d/conv_fast.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cstring>

#include "reference/conv3d/conv_geometry.hpp"

namespace kgate::ref::detail {

namespace {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMat>;
using CMap = Eigen::Map<const RowMat>;
using SMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

struct Block {
  std::int64_t bn, grp, p0, p1;  // batch, group, positions [p0, p1)
  std::int64_t phase = 0;        // scatter only
};

// Per-worker scratch, grown on demand.
struct Scratch {
  std::vector<std::vector<double>> bufs;
  explicit Scratch(int workers) : bufs(static_cast<std::size_t>(workers)) {}
  double* get(int worker, std::int64_t n) {
    auto& b = bufs[static_cast<std::size_t>(worker)];
    if (static_cast<std::int64_t>(b.size()) < n) b.resize(static_cast<std::size_t>(n));
    return b.data();
  }
};

// im2col of the large operand for small positions [p0, p1) of batch bn and
// group grp: row r, columns (tap, cl') = large[bn, j(i, tap), grp*clg + cl']
// (zero where j falls in the padding).
void im2col_large(const ConvGeom& g, const Tensor& large, const Block& blk, double* col) {
  const std::int64_t width = g.taps * g.clg;
  for (std::int64_t p = blk.p0; p < blk.p1; ++p) {
    const std::int64_t i2 = p % g.S[2], i1 = (p / g.S[2]) % g.S[1], i0 = p / (g.S[2] * g.S[1]);
    double* row = col + (p - blk.p0) * width;
    for (std::int64_t k0 = 0; k0 < g.K[0]; ++k0) {
      const std::int64_t j0 = i0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
      const bool v0 = j0 >= 0 && j0 < g.L[0];
      for (std::int64_t k1 = 0; k1 < g.K[1]; ++k1) {
        const std::int64_t j1 = i1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
        const bool v1 = v0 && j1 >= 0 && j1 < g.L[1];
        for (std::int64_t k2 = 0; k2 < g.K[2]; ++k2) {
          const std::int64_t j2 = i2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
          double* dst = row + ((k0 * g.K[1] + k1) * g.K[2] + k2) * g.clg;
          if (v1 && j2 >= 0 && j2 < g.L[2])
            load_run(large, g.large_at(blk.bn, j0, j1, j2, blk.grp * g.clg), g.clg, dst);
          else
            std::memset(dst, 0, static_cast<std::size_t>(g.clg) * sizeof(double));
        }
      }
    }
  }
}

std::vector<Block> blocks(const ConvGeom& g, std::int64_t positions, std::int64_t rows, std::int64_t phase = 0) {
  std::vector<Block> v;
  for (std::int64_t bn = 0; bn < g.n; ++bn)
    for (std::int64_t grp = 0; grp < g.groups; ++grp)
      for (std::int64_t p0 = 0; p0 < positions; p0 += rows) v.push_back({bn, grp, p0, std::min(positions, p0 + rows), phase});
  return v;
}

void add_bias(double* out, std::int64_t rows, std::int64_t row_stride, const double* bias, std::int64_t count) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < count; ++c) out[r * row_stride + c] += bias[c];
}

// small[n, i, cs] = sum large * w (conv3d.fwd, conv_transpose3d.bwd_data).
void contract(const ConvGeom& g, const Tensor& large, const std::vector<double>& w, const double* bias, double* out) {
  const std::int64_t width = g.taps * g.clg;
  const std::int64_t rows = block_rows(width);
  const auto work = blocks(g, g.s_pos, rows);
  Scratch scratch(ref_threads());
  parallel_for(static_cast<std::int64_t>(work.size()), [&](std::int64_t it, int worker) {
    const Block& b = work[static_cast<std::size_t>(it)];
    const std::int64_t m = b.p1 - b.p0;
    double* col = scratch.get(worker, m * width);
    im2col_large(g, large, b, col);
    const CMap wg(w.data() + b.grp * g.csg * width, g.csg, width);
    double* o = out + (b.bn * g.s_pos + b.p0) * g.cs + b.grp * g.csg;
    SMap om(o, m, g.csg, Eigen::OuterStride<>(g.cs));
    om.noalias() = CMap(col, m, width) * wg.transpose();
    if (bias) add_bias(o, m, g.cs, bias + b.grp * g.csg, g.csg);
  });
}

// large[n, j, cl] = sum small * w (conv3d.bwd_data, conv_transpose3d.fwd),
// gathered per stride phase r (j = r + s*t on every axis): the taps that
// reach phase r are the k with (r + pad - k*dil) = 0 mod s, the same for all
// its positions, so each phase is one im2col x GEMM with its own packed
// weight [taps_r * csg][clg].
void scatter(const ConvGeom& g, const Tensor& small, const std::vector<double>& w, const double* bias, double* out) {
  struct Phase {
    Axis3 r{}, cnt{};
    std::array<std::vector<std::int64_t>, 3> taps;
    std::int64_t positions = 0, ntaps = 0;
    std::vector<double> wp;  // [groups][ntaps*csg][clg]
  };
  std::vector<Phase> phases;
  for (std::int64_t r0 = 0; r0 < g.stride[0]; ++r0)
    for (std::int64_t r1 = 0; r1 < g.stride[1]; ++r1)
      for (std::int64_t r2 = 0; r2 < g.stride[2]; ++r2) {
        Phase ph;
        ph.r = {r0, r1, r2};
        ph.positions = 1;
        ph.ntaps = 1;
        for (int a = 0; a < 3; ++a) {
          ph.cnt[a] = ph.r[a] < g.L[a] ? (g.L[a] - ph.r[a] + g.stride[a] - 1) / g.stride[a] : 0;
          for (std::int64_t k = 0; k < g.K[a]; ++k) {
            const std::int64_t t = ph.r[a] + g.pad[a] - k * g.dil[a];
            if (((t % g.stride[a]) + g.stride[a]) % g.stride[a] == 0) ph.taps[a].push_back(k);
          }
          ph.positions *= ph.cnt[a];
          ph.ntaps *= static_cast<std::int64_t>(ph.taps[a].size());
        }
        if (ph.positions == 0) continue;
        const std::int64_t width = ph.ntaps * g.csg;
        ph.wp.resize(static_cast<std::size_t>(g.groups * width * g.clg));
        for (std::int64_t grp = 0; grp < g.groups; ++grp) {
          std::int64_t t = 0;
          for (std::int64_t k0 : ph.taps[0])
            for (std::int64_t k1 : ph.taps[1])
              for (std::int64_t k2 : ph.taps[2]) {
                for (std::int64_t q = 0; q < g.csg; ++q)
                  std::memcpy(&ph.wp[static_cast<std::size_t>((grp * width + t * g.csg + q) * g.clg)],
                              &w[static_cast<std::size_t>(g.w_at(grp * g.csg + q, k0, k1, k2, 0))],
                              static_cast<std::size_t>(g.clg) * sizeof(double));
                ++t;
              }
        }
        phases.push_back(std::move(ph));
      }
  std::vector<Block> work;
  for (std::size_t ph = 0; ph < phases.size(); ++ph) {
    const auto b = blocks(g, phases[ph].positions, block_rows(std::max<std::int64_t>(phases[ph].ntaps * g.csg, g.clg)),
                          static_cast<std::int64_t>(ph));
    work.insert(work.end(), b.begin(), b.end());
  }
  Scratch scratch(ref_threads());
  parallel_for(static_cast<std::int64_t>(work.size()), [&](std::int64_t it, int worker) {
    const Block& b = work[static_cast<std::size_t>(it)];
    const Phase& ph = phases[static_cast<std::size_t>(b.phase)];
    const std::int64_t m = b.p1 - b.p0, width = ph.ntaps * g.csg;
    double* buf = scratch.get(worker, m * (width + g.clg));
    double* col = buf;
    double* res = buf + m * width;
    std::vector<std::array<std::int64_t, 3>> js(static_cast<std::size_t>(m));
    for (std::int64_t p = b.p0; p < b.p1; ++p) {
      const std::int64_t t2 = p % ph.cnt[2], t1 = (p / ph.cnt[2]) % ph.cnt[1], t0 = p / (ph.cnt[2] * ph.cnt[1]);
      const std::array<std::int64_t, 3> j{ph.r[0] + g.stride[0] * t0, ph.r[1] + g.stride[1] * t1, ph.r[2] + g.stride[2] * t2};
      js[static_cast<std::size_t>(p - b.p0)] = j;
      double* row = col + (p - b.p0) * width;
      std::int64_t t = 0;
      for (std::int64_t k0 : ph.taps[0]) {
        const std::int64_t i0 = (j[0] + g.pad[0] - k0 * g.dil[0]) / g.stride[0];
        const bool v0 = j[0] + g.pad[0] - k0 * g.dil[0] >= 0 && i0 < g.S[0];
        for (std::int64_t k1 : ph.taps[1]) {
          const std::int64_t i1 = (j[1] + g.pad[1] - k1 * g.dil[1]) / g.stride[1];
          const bool v1 = v0 && j[1] + g.pad[1] - k1 * g.dil[1] >= 0 && i1 < g.S[1];
          for (std::int64_t k2 : ph.taps[2]) {
            const std::int64_t i2 = (j[2] + g.pad[2] - k2 * g.dil[2]) / g.stride[2];
            const bool v2 = v1 && j[2] + g.pad[2] - k2 * g.dil[2] >= 0 && i2 < g.S[2];
            double* dst = row + t * g.csg;
            if (v2)
              load_run(small, g.small_at(b.bn, i0, i1, i2, b.grp * g.csg), g.csg, dst);
            else
              std::memset(dst, 0, static_cast<std::size_t>(g.csg) * sizeof(double));
            ++t;
          }
        }
      }
    }
    Map rm(res, m, g.clg);
    if (width > 0)
      rm.noalias() = CMap(col, m, width) * CMap(ph.wp.data() + b.grp * width * g.clg, width, g.clg);
    else
      rm.setZero();
    for (std::int64_t r = 0; r < m; ++r) {
      const auto& j = js[static_cast<std::size_t>(r)];
      double* o = out + g.large_at(b.bn, j[0], j[1], j[2], b.grp * g.clg);
      std::memcpy(o, res + r * g.clg, static_cast<std::size_t>(g.clg) * sizeof(double));
      if (bias) add_bias(o, 1, g.clg, bias + b.grp * g.clg, g.clg);
    }
  });
  // Phases with no positions have no outputs; phases with no taps were
  // zeroed above. Every large position belongs to exactly one phase.
}

// dw[cs, k, cl'] = sum small * large (bwd_weight of both operators). Block q
// adds into slot q % Z; each slot is summed by one worker in increasing q and
// the slots are reduced in order, so the result does not depend on threads.
void wgrad(const ConvGeom& g, const Tensor& small, const Tensor& large, double* dw) {
  const std::int64_t width = g.taps * g.clg;
  const std::int64_t rows = block_rows(width) * kWgradRowFactor;
  const auto work = blocks(g, g.s_pos, rows);
  const std::int64_t q = static_cast<std::int64_t>(work.size());
  const std::int64_t wsize = g.cs * width;
  const std::int64_t slots =
      std::clamp<std::int64_t>(std::min(kMaxSlots, kSlotBudgetBytes / std::max<std::int64_t>(1, wsize * 8)), 1,
                               std::max<std::int64_t>(q, 1));
  std::vector<std::vector<double>> part(static_cast<std::size_t>(slots));
  parallel_for(slots, [&](std::int64_t z, int) {
    auto& acc = part[static_cast<std::size_t>(z)];
    acc.assign(static_cast<std::size_t>(wsize), 0.0);
    std::vector<double> col, sm;
    for (std::int64_t it = z; it < q; it += slots) {
      const Block& b = work[static_cast<std::size_t>(it)];
      const std::int64_t m = b.p1 - b.p0;
      col.resize(static_cast<std::size_t>(m * width));
      sm.resize(static_cast<std::size_t>(m * g.csg));
      im2col_large(g, large, b, col.data());
      for (std::int64_t p = b.p0; p < b.p1; ++p)
        load_run(small, (b.bn * g.s_pos + p) * g.cs + b.grp * g.csg, g.csg, sm.data() + (p - b.p0) * g.csg);
      Map dg(acc.data() + b.grp * g.csg * width, g.csg, width);
      dg.noalias() += CMap(sm.data(), m, g.csg).transpose() * CMap(col.data(), m, width);
    }
  });
  constexpr std::int64_t kChunk = 1 << 16;
  parallel_for((wsize + kChunk - 1) / kChunk, [&](std::int64_t c, int) {
    const std::int64_t hi = std::min(wsize, (c + 1) * kChunk);
    for (std::int64_t e = c * kChunk; e < hi; ++e) {
      double s = 0.0;
      for (const auto& pz : part) s += pz[static_cast<std::size_t>(e)];
      dw[e] = s;
    }
  });
}

}  // namespace

std::int64_t block_rows(std::int64_t width) {
  return std::clamp<std::int64_t>(kBlockBytes / std::max<std::int64_t>(1, width * 8), kMinRows, kMaxRows);
}

Outputs conv_fast(const ConvProblem& p, const Inputs& in) {
  const ConvGeom g = make_geom(p);
  const DirPlan plan = dir_plan(p);
  Outputs result;
  for (const auto& s : p.outputs()) result.emplace(s.role, f64_like(s.dims));
  double* out = result.at(plan.out).as<double>();
  std::vector<double> bias;
  if (plan.bias_on_out) bias = to_f64(at(in, Role::b));
  switch (plan.kind) {
    case Kind::contract: {
      const std::vector<double> w = to_f64(at(in, Role::w));
      contract(g, at(in, plan.a), w, bias.empty() ? nullptr : bias.data(), out);
      break;
    }
    case Kind::scatter: {
      const std::vector<double> w = to_f64(at(in, Role::w));
      scatter(g, at(in, plan.a), w, bias.empty() ? nullptr : bias.data(), out);
      break;
    }
    case Kind::wgrad: wgrad(g, at(in, plan.a), at(in, plan.b), out); break;
  }
  if (plan.db) {
    // In element order, as the direct reference sums it.
    const Tensor& dy = at(in, Role::dy);
    const std::int64_t c = dy.dims().back();
    double* db = result.at(Role::db).as<double>();
    std::vector<double> row(static_cast<std::size_t>(c));
    for (std::int64_t e = 0; e < dy.numel(); e += c) {
      load_run(dy, e, c, row.data());
      for (std::int64_t k = 0; k < c; ++k) db[k] += row[static_cast<std::size_t>(k)];
    }
  }
  return result;
}

}  // namespace kgate::ref::detail
