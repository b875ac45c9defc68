#include "reference/conv3d/conv_fast.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <utility>

#include "reference/conv3d/conv_geometry.hpp"
#include "reference/host_memory.hpp"

namespace kgate::ref::detail {

namespace {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMat>;
using CMap = Eigen::Map<const RowMat>;
using SMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
using SCMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

struct Block {
  std::int64_t bn, grp, p0, p1;  // batch, group, positions [p0, p1)
  std::int64_t phase = 0;        // scatter only
};

// Per-worker scratch, grown on demand.
struct Scratch {
  std::vector<LargeVector<double>> bufs;
  explicit Scratch(int workers) : bufs(static_cast<std::size_t>(workers)) {}
  double* get(int worker, std::int64_t n) {
    auto& b = bufs[static_cast<std::size_t>(worker)];
    if (static_cast<std::int64_t>(b.size()) < n) b.resize(static_cast<std::size_t>(n));
    return b.data();
  }
};

// The coordinates of the row-major linear index `idx` over extents `ext`: a
// position over S or L, a tap over K, a phase's position over its counts.
Axis3 unravel(std::int64_t idx, const Axis3& ext) {
  return {idx / (ext[1] * ext[2]), idx / ext[2] % ext[1], idx % ext[2]};
}

// im2col of the large operand for small positions [p0, p1) of batch bn and
// group grp, columns [c0, c1) of (tap, cl'): row r holds large[bn, j(i, tap),
// grp*clg + cl'] (zero where j falls in the padding).
void im2col_large(const ConvGeom& g, const Tensor& large, const Block& blk, std::int64_t c0, std::int64_t c1,
                  double* col) {
  const std::int64_t width = c1 - c0;
  if (width <= 0) return;
  const std::int64_t t0 = c0 / g.clg, t1 = (c1 - 1) / g.clg;
  for (std::int64_t p = blk.p0; p < blk.p1; ++p) {
    const auto [i0, i1, i2] = unravel(p, g.S);
    double* row = col + (p - blk.p0) * width;
    std::int64_t t = 0;
    for (std::int64_t k0 = 0; k0 < g.K[0]; ++k0) {
      const std::int64_t j0 = i0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
      const bool v0 = j0 >= 0 && j0 < g.L[0];
      for (std::int64_t k1 = 0; k1 < g.K[1]; ++k1) {
        const std::int64_t j1 = i1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
        const bool v1 = v0 && j1 >= 0 && j1 < g.L[1];
        for (std::int64_t k2 = 0; k2 < g.K[2]; ++k2, ++t) {
          if (t < t0 || t > t1) continue;
          const std::int64_t j2 = i2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
          const std::int64_t lo = std::max(c0, t * g.clg) - t * g.clg, hi = std::min(c1, (t + 1) * g.clg) - t * g.clg;
          double* dst = row + t * g.clg + lo - c0;
          if (v1 && j2 >= 0 && j2 < g.L[2])
            load_run(large, g.large_at(blk.bn, j0, j1, j2, blk.grp * g.clg + lo), hi - lo, dst);
          else
            std::memset(dst, 0, static_cast<std::size_t>(hi - lo) * sizeof(double));
        }
      }
    }
  }
}

// Column tile t of `tiles` over [0, cols): widths a multiple of 8 (Eigen's
// register blocking), the last one narrower or empty.
std::pair<std::int64_t, std::int64_t> tile_range(std::int64_t cols, std::int64_t tiles, std::int64_t t) {
  const std::int64_t tw = ((cols + tiles - 1) / tiles + 7) / 8 * 8;
  const std::int64_t c0 = std::min(cols, t * tw);
  return {c0, std::min(cols, c0 + tw)};
}

// The GEMMs of a blocked contraction: for every block b of `work` and column
// tile [c0, c1) of `cols` (col_tiles() of the blocks), one work item: fill(b,
// a) writes the block's left operand (rows x width doubles, per-worker
// scratch), then mul(b, a, c0, c1, worker) computes those output columns.
template <class Fill, class Mul>
void blocked_gemm(const std::vector<Block>& work, std::int64_t width, std::int64_t cols, Fill&& fill, Mul&& mul) {
  const std::int64_t nb = static_cast<std::int64_t>(work.size());
  const std::int64_t tiles = col_tiles(cols, nb);
  Scratch scratch(ref_threads());
  parallel_for(nb * tiles, [&](std::int64_t it, int worker) {
    const Block& b = work[static_cast<std::size_t>(it / tiles)];
    const auto [c0, c1] = tile_range(cols, tiles, it % tiles);
    if (c0 >= c1) return;
    double* a = scratch.get(worker, (b.p1 - b.p0) * width);
    fill(b, a);
    mul(b, static_cast<const double*>(a), c0, c1, worker);
  });
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

// out[c] = res[c] + bias[c] (bias null: res[c]) for c < count: the bias is
// added once to the finished sum, as in contract().
void store_row(double* out, const double* res, std::int64_t count, const double* bias) {
  if (!bias) {
    std::memcpy(out, res, static_cast<std::size_t>(count) * sizeof(double));
    return;
  }
  for (std::int64_t c = 0; c < count; ++c) out[c] = res[c] + bias[c];
}

// Rows of a scatter item's GEMM computed at once: about kResultBytes of
// result, at least kSplitRows (each GEMM packs its weight operand again), at
// most the item's m.
std::int64_t result_rows(std::int64_t m, std::int64_t tw) {
  return std::clamp<std::int64_t>(kResultBytes / (tw * 8), std::min(m, kSplitRows), m);
}

// The GEMM of a scatter item: a (m x depth, row-major) times b (depth x tw,
// row stride ldb), result_rows() rows at a time into `res` (at least
// result_rows() x tw doubles), each result row r then handed to store(r,
// row) while it is still in cache. depth 0 gives rows of zeros.
template <class Store>
void gemm_rows(const double* a, std::int64_t m, std::int64_t depth, const double* b, std::int64_t ldb, std::int64_t tw,
               double* res, Store&& store) {
  const std::int64_t sub = result_rows(m, tw);
  for (std::int64_t r0 = 0; r0 < m; r0 += sub) {
    const std::int64_t rows = std::min(sub, m - r0);
    Map rm(res, rows, tw);
    if (depth > 0)
      rm.noalias() = CMap(a + r0 * depth, rows, depth) * SCMap(b, depth, tw, Eigen::OuterStride<>(ldb));
    else
      rm.setZero();
    for (std::int64_t r = 0; r < rows; ++r) store(r0 + r, res + r * tw);
  }
}

// small[n, i, cs] = sum large * w (conv3d.fwd, conv_transpose3d.bwd_data).
void contract(const ConvGeom& g, const Tensor& large, const double* w, const double* bias, double* out) {
  const std::int64_t width = g.taps * g.clg;
  const auto work = blocks(g, g.s_pos, split_rows(block_rows(width), g.n * g.groups * g.s_pos));
  blocked_gemm(
      work, width, g.csg, [&](const Block& b, double* col) { im2col_large(g, large, b, 0, width, col); },
      [&](const Block& b, const double* col, std::int64_t c0, std::int64_t c1, int) {
        const std::int64_t m = b.p1 - b.p0;
        const CMap wg(w + (b.grp * g.csg + c0) * width, c1 - c0, width);
        double* o = out + (b.bn * g.s_pos + b.p0) * g.cs + b.grp * g.csg + c0;
        SMap om(o, m, c1 - c0, Eigen::OuterStride<>(g.cs));
        om.noalias() = CMap(col, m, width) * wg.transpose();
        if (bias) add_bias(o, m, g.cs, bias + b.grp * g.csg + c0, c1 - c0);
      });
}

// large[n, j, cl] = sum small * w (conv3d.bwd_data, conv_transpose3d.fwd),
// gathered per stride phase r (j = r + s*t on every axis): the taps that
// reach phase r are the k with (r + pad - k*dil) = 0 mod s, the same for all
// its positions, so each phase is one im2col x GEMM with its own packed
// weight [taps_r * csg][clg].
void scatter(const ConvGeom& g, const Tensor& small, const double* w, const double* bias, double* out) {
  struct Phase {
    Axis3 r{}, cnt{};
    std::array<std::vector<std::int64_t>, 3> taps;
    std::int64_t positions = 0, ntaps = 0;
    LargeVector<double> wp;  // [groups][ntaps*csg][clg]
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
                              w + g.w_at(grp * g.csg + q, k0, k1, k2, 0),
                              static_cast<std::size_t>(g.clg) * sizeof(double));
                ++t;
              }
        }
        phases.push_back(std::move(ph));
      }
  std::vector<Block> work;
  std::int64_t width = 0, total = 0;
  for (const Phase& ph : phases) total += g.n * g.groups * ph.positions;
  for (std::size_t ph = 0; ph < phases.size(); ++ph) {
    width = std::max(width, phases[ph].ntaps * g.csg);
    const std::int64_t rows = block_rows(std::max<std::int64_t>(phases[ph].ntaps * g.csg, g.clg));
    const auto b = blocks(g, phases[ph].positions, split_rows(rows, total), static_cast<std::int64_t>(ph));
    work.insert(work.end(), b.begin(), b.end());
  }
  auto j_of = [&](const Phase& ph, std::int64_t p) {
    const Axis3 t = unravel(p, ph.cnt);
    return Axis3{ph.r[0] + g.stride[0] * t[0], ph.r[1] + g.stride[1] * t[1], ph.r[2] + g.stride[2] * t[2]};
  };
  auto fill = [&](const Block& b, double* col) {
    const Phase& ph = phases[static_cast<std::size_t>(b.phase)];
    const std::int64_t pw = ph.ntaps * g.csg;
    for (std::int64_t p = b.p0; p < b.p1; ++p) {
      const auto j = j_of(ph, p);
      double* row = col + (p - b.p0) * pw;
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
  };
  Scratch results(ref_threads());
  blocked_gemm(work, width, g.clg, fill,
               [&](const Block& b, const double* col, std::int64_t c0, std::int64_t c1, int worker) {
                 const Phase& ph = phases[static_cast<std::size_t>(b.phase)];
                 const std::int64_t m = b.p1 - b.p0, pw = ph.ntaps * g.csg, tw = c1 - c0;
                 const double* bs = bias ? bias + b.grp * g.clg + c0 : nullptr;
                 gemm_rows(col, m, pw, ph.wp.data() + b.grp * pw * g.clg + c0, g.clg, tw,
                           results.get(worker, result_rows(m, tw) * tw), [&](std::int64_t r, const double* row) {
                             const auto j = j_of(ph, b.p0 + r);
                             store_row(out + g.large_at(b.bn, j[0], j[1], j[2], b.grp * g.clg + c0), row, tw, bs);
                           });
               });
  // Phases with no positions have no outputs; phases with no taps were
  // zeroed above. Every large position belongs to exactly one phase.
}

// scatter() of a non_overlapping() geometry: large[n, i*K + k, cl] =
// small[n, i, :] * w[:, k, cl] for every tap k, so a block of small rows
// times the group's whole weight ([csg][taps*clg], as stored) gives every
// output of those rows, written back tap by tap.
void scatter_non_overlapping(const ConvGeom& g, const Tensor& small, const double* w, const double* bias,
                             double* out) {
  const std::int64_t cols = g.taps * g.clg;
  const auto work = blocks(g, g.s_pos, split_rows(block_rows(std::max(g.csg, cols)), g.n * g.groups * g.s_pos));
  Scratch results(ref_threads());
  blocked_gemm(
      work, g.csg, cols,
      [&](const Block& b, double* a) {
        for (std::int64_t p = b.p0; p < b.p1; ++p)
          load_run(small, (b.bn * g.s_pos + p) * g.cs + b.grp * g.csg, g.csg, a + (p - b.p0) * g.csg);
      },
      [&](const Block& b, const double* a, std::int64_t c0, std::int64_t c1, int worker) {
        const std::int64_t m = b.p1 - b.p0, tw = c1 - c0;
        const std::int64_t t0 = c0 / g.clg, t1 = (c1 - 1) / g.clg;
        gemm_rows(a, m, g.csg, w + b.grp * g.csg * cols + c0, cols, tw,
                  results.get(worker, result_rows(m, tw) * tw), [&](std::int64_t r, const double* row) {
                    const Axis3 i = unravel(b.p0 + r, g.S);
                    for (std::int64_t t = t0; t <= t1; ++t) {
                      const Axis3 k = unravel(t, g.K);
                      const std::int64_t lo = std::max(c0, t * g.clg) - t * g.clg,
                                         hi = std::min(c1, (t + 1) * g.clg) - t * g.clg;
                      store_row(out + g.large_at(b.bn, i[0] * g.K[0] + k[0], i[1] * g.K[1] + k[1],
                                                 i[2] * g.K[2] + k[2], b.grp * g.clg + lo),
                                row + t * g.clg + lo - c0, hi - lo, bias ? bias + b.grp * g.clg + lo : nullptr);
                    }
                  });
      });
}

// Rows of a bwd_weight block filled and multiplied at once: about
// kWgradFillBytes of operands for a tile `tw` columns wide, at least
// kWgradMinFillRows (the GEMM's depth: its dw tile is read and written once
// per fill), at most the block's `rows`.
std::int64_t wgrad_fill_rows(std::int64_t tw, std::int64_t csg, std::int64_t rows) {
  return std::clamp<std::int64_t>(kWgradFillBytes / ((tw + csg) * 8), std::min(rows, kWgradMinFillRows), rows);
}

// dw[cs, k, cl'] = sum small * large (bwd_weight of both operators). Each
// group's dw [csg][taps*clg] is cut into column tiles (col_tiles() of the
// groups), and where that gives fewer than kTargetItems items, the reduction
// over (n, positions) into Z contiguous chunks of row blocks as well (Z at
// most kMaxSlots and within kSlotBudgetBytes). An item sums its blocks in
// increasing order, each in wgrad_fill_rows() pieces in order, into its tile
// (chunk 0: dw itself; chunk z > 0: slot z); the slots are then added to dw
// in increasing z. All of it is a function of the problem, so results do not
// depend on the thread count.
//
// db (non-null) is summed from the operand rows the fill converts anyway
// instead of in a second pass over dy (sum_channels): dy small (conv3d), from
// the small rows of the items of column tile 0 (they read each row of their
// group once); dy large (conv_transpose3d) where the convolution is
// non-overlapping (every large element is one (row, tap) of the columns,
// padding columns are zeros), from the columns of every item. Each item sums
// its rows in order into its own partial sums, which are added to db in item
// order.
void wgrad(const ConvGeom& g, const Tensor& small, const Tensor& large, double* dw, double* db, bool db_small) {
  const std::int64_t width = g.taps * g.clg;
  const std::int64_t wsize = g.cs * width;
  const WgradSplit split = wgrad_split(g);
  const std::int64_t tiles = split.tiles, z_count = split.chunks, rows = split.rows;
  std::vector<Block> pos;  // row blocks of one group (grp = 0)
  for (std::int64_t bn = 0; bn < g.n; ++bn)
    for (std::int64_t p0 = 0; p0 < g.s_pos; p0 += rows) pos.push_back({bn, 0, p0, std::min(g.s_pos, p0 + rows)});
  const std::int64_t nb = static_cast<std::int64_t>(pos.size()), tiled = g.groups * tiles;
  // Each item zeroes its own tile of its slot first.
  std::vector<std::unique_ptr<double[], HostFree>> slots;
  for (std::int64_t z = 1; z < z_count; ++z)
    slots.emplace_back(static_cast<double*>(host_alloc(static_cast<std::size_t>(wsize) * sizeof(double))),
                       HostFree{static_cast<std::size_t>(wsize) * sizeof(double)});
  Scratch cols(ref_threads()), smalls(ref_threads());
  std::vector<std::vector<double>> db_parts(db ? static_cast<std::size_t>(tiled * z_count) : 0);
  parallel_for(tiled * z_count, [&](std::int64_t it, int worker) {
    const std::int64_t z = it % z_count, tile = (it / z_count) % tiles, grp = it / (z_count * tiles);
    const auto [c0, c1] = tile_range(width, tiles, tile);
    if (c0 >= c1) return;
    double* dbp = nullptr;
    if (db && (!db_small || tile == 0)) {
      auto& part = db_parts[static_cast<std::size_t>(it)];
      part.assign(static_cast<std::size_t>(db_small ? g.csg : c1 - c0), 0.0);
      dbp = part.data();
    }
    double* base = z == 0 ? dw : slots[static_cast<std::size_t>(z - 1)].get();
    SMap dg(base + grp * g.csg * width + c0, g.csg, c1 - c0, Eigen::OuterStride<>(width));
    dg.setZero();
    const std::int64_t sub = wgrad_fill_rows(c1 - c0, g.csg, rows);
    double* col = cols.get(worker, sub * (c1 - c0));
    double* sm = smalls.get(worker, sub * g.csg);
    for (std::int64_t q = z * nb / z_count; q < (z + 1) * nb / z_count; ++q) {
      const Block& blk = pos[static_cast<std::size_t>(q)];
      for (std::int64_t s0 = blk.p0; s0 < blk.p1; s0 += sub) {
        const Block b{blk.bn, grp, s0, std::min(blk.p1, s0 + sub)};
        const std::int64_t m = b.p1 - b.p0;
        im2col_large(g, large, b, c0, c1, col);
        for (std::int64_t p = b.p0; p < b.p1; ++p)
          load_run(small, (b.bn * g.s_pos + p) * g.cs + b.grp * g.csg, g.csg, sm + (p - b.p0) * g.csg);
        if (dbp) {
          const double* src = db_small ? sm : col;
          const std::int64_t w = db_small ? g.csg : c1 - c0;
          for (std::int64_t r = 0; r < m; ++r)
            for (std::int64_t c = 0; c < w; ++c) dbp[c] += src[r * w + c];
        }
        dg.noalias() += CMap(sm, m, g.csg).transpose() * CMap(col, m, c1 - c0);
      }
    }
  });
  if (db) {
    const std::int64_t nch = g.groups * (db_small ? g.csg : g.clg);
    std::fill(db, db + nch, 0.0);
    for (std::int64_t it = 0; it < tiled * z_count; ++it) {
      const auto& part = db_parts[static_cast<std::size_t>(it)];
      if (part.empty()) continue;
      const std::int64_t grp = it / (z_count * tiles);
      if (db_small) {
        for (std::int64_t c = 0; c < g.csg; ++c) db[grp * g.csg + c] += part[static_cast<std::size_t>(c)];
      } else {
        const std::int64_t c0 = tile_range(width, tiles, (it / z_count) % tiles).first;
        for (std::size_t c = 0; c < part.size(); ++c) db[grp * g.clg + (c0 + static_cast<std::int64_t>(c)) % g.clg] += part[c];
      }
    }
  }
  if (slots.empty()) return;
  constexpr std::int64_t kChunk = 1 << 16;
  parallel_for((wsize + kChunk - 1) / kChunk, [&](std::int64_t c, int) {
    const std::int64_t hi = std::min(wsize, (c + 1) * kChunk);
    for (std::int64_t e = c * kChunk; e < hi; ++e) {
      double s = dw[e];
      for (const auto& sl : slots) s += sl[e];
      dw[e] = s;
    }
  });
}

// db[c] = sum of dy[..., c] over batch and space. The rows (positions) of dy
// are cut into chunks of kDbRows, each summed in row order into its own
// partial sums, which are then added in chunk order: a function of the
// problem only.
void sum_channels(const Tensor& dy, double* db) {
  const std::int64_t c = dy.dims().back(), rows = dy.numel() / c;
  const std::int64_t chunks = (rows + kDbRows - 1) / kDbRows;
  std::vector<double> part(static_cast<std::size_t>(chunks * c));
  constexpr std::int64_t kRun = 64;  // rows converted at once
  Scratch runs(ref_threads());
  parallel_for(chunks, [&](std::int64_t z, int worker) {
    double* __restrict acc = part.data() + z * c;
    double* buf = runs.get(worker, kRun * c);
    const std::int64_t end = std::min(rows, (z + 1) * kDbRows);
    for (std::int64_t r0 = z * kDbRows; r0 < end; r0 += kRun) {
      const std::int64_t n = std::min(kRun, end - r0);
      load_run(dy, r0 * c, n * c, buf);
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t k = 0; k < c; ++k) acc[k] += buf[r * c + k];
    }
  });
  std::fill(db, db + c, 0.0);
  for (std::int64_t z = 0; z < chunks; ++z)
    for (std::int64_t k = 0; k < c; ++k) db[k] += part[static_cast<std::size_t>(z * c + k)];
}

}  // namespace

std::int64_t col_tiles(std::int64_t cols, std::int64_t items, std::int64_t min_cols) {
  if (items >= kTargetItems) return 1;
  return std::clamp<std::int64_t>((kTargetItems + items - 1) / std::max<std::int64_t>(items, 1), 1,
                                  std::max<std::int64_t>(1, cols / min_cols));
}

bool non_overlapping(const ConvGeom& g) {
  for (int a = 0; a < 3; ++a)
    if (g.K[a] != g.stride[a] || g.pad[a] != 0 || g.dil[a] != 1 || g.L[a] != g.S[a] * g.K[a]) return false;
  return true;
}

WgradSplit wgrad_split(const ConvGeom& g) {
  WgradSplit s;
  const std::int64_t width = g.taps * g.clg;
  s.tiles = col_tiles(width, g.groups, kMinWgradCols);
  const std::int64_t tw = tile_range(width, s.tiles, 0).second;
  s.rows = std::clamp<std::int64_t>(kBlockBytes * kWgradRowFactor / ((tw + g.csg) * 8), kMinRows,
                                    kMaxRows * kWgradRowFactor);
  const std::int64_t tiled = g.groups * s.tiles;
  if (tiled >= kTargetItems) return s;
  const std::int64_t chunks =
      std::clamp<std::int64_t>(std::min({(kTargetItems + tiled - 1) / tiled, kMaxSlots,
                                         kSlotBudgetBytes / std::max<std::int64_t>(1, g.cs * width * 8),
                                         g.n * g.s_pos / kMinChunkRows}),
                               1, kMaxSlots);
  // Blocks short enough that each chunk gets one (per batch: blocks do not
  // cross batches), down to kSplitRows.
  const std::int64_t per_batch = (chunks + g.n - 1) / g.n;
  s.rows = std::min(s.rows, std::max(kSplitRows, (g.s_pos + per_batch - 1) / per_batch));
  const std::int64_t nb = g.n * ((g.s_pos + s.rows - 1) / s.rows);
  s.chunks = std::min(chunks, nb);
  return s;
}

std::int64_t split_rows(std::int64_t rows, std::int64_t positions) {
  return std::clamp<std::int64_t>((positions + kTargetItems - 1) / kTargetItems, std::min(rows, kSplitRows), rows);
}

std::int64_t block_rows(std::int64_t width) {
  return std::clamp<std::int64_t>(kBlockBytes / std::max<std::int64_t>(1, width * 8), kMinRows, kMaxRows);
}

Outputs conv_fast(const ConvProblem& p, const Inputs& in) {
  const ConvGeom g = make_geom(p);
  const DirPlan plan = dir_plan(p);
  Outputs result;
  // Every element is written below, by the threads that compute it.
  for (const auto& s : p.outputs()) result.emplace(s.role, Tensor(DType::fp64, s.dims, Tensor::Unfilled{}));
  double* out = result.at(plan.out).as<double>();
  F64Vector bias;
  if (plan.bias_on_out) bias = to_f64(at(in, Role::b));
  const double* b = bias.empty() ? nullptr : bias.data();
  switch (plan.kind) {
    case Kind::contract: contract(g, at(in, plan.a), f64_copy(at(in, Role::w)).as<double>(), b, out); break;
    case Kind::scatter: {
      const Tensor w = f64_copy(at(in, Role::w));
      if (non_overlapping(g))
        scatter_non_overlapping(g, at(in, plan.a), w.as<double>(), b, out);
      else
        scatter(g, at(in, plan.a), w.as<double>(), b, out);
      break;
    }
    case Kind::wgrad: {
      // db with the fill where it sees dy once (wgrad), else a pass of its own.
      const bool fused = plan.db && (plan.dy_is_small || non_overlapping(g));
      wgrad(g, at(in, plan.a), at(in, plan.b), out, fused ? result.at(Role::db).as<double>() : nullptr, plan.dy_is_small);
      if (plan.db && !fused) sum_channels(at(in, Role::dy), result.at(Role::db).as<double>());
      break;
    }
  }
  return result;
}

}  // namespace kgate::ref::detail
