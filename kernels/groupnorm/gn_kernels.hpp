// GroupNorm kernels for NDHWC tensors: statistics (two-pass moments per
// batch of kRowBatch rows x V channels, Chan-combined within a work-item, a
// tree over a chunk's row lanes, and a tree across chunks: the pairwise
// Welford family of docs/NUMERICS.md), normalize + affine + fused ReLU, and the
// backward pass. One source for every backend (kernels/runtime/runtime.hpp).
//
// Determinism by construction: no floating-point atomics; each chunk of rows
// is reduced by one workgroup in a fixed order, and chunk partials are
// combined in a fixed tree; every size is a function of the problem alone.
// Only correctly rounded operations (+ - * / sqrt) are used, so the host and
// GPU backends agree bit for bit.
//
// Work decomposition (all kernels): a tensor of N x S rows of C channels; a
// row chunk is `chunk_rows` consecutive rows of one n. In a workgroup of
// kThreads work-items, a work-item owns column `col` (V consecutive channels,
// V divides C/G so a column lies in one group) at row offset `lane_row`, and
// strides over the chunk's rows by `rows_par`; when there are more than
// kThreads columns, it owns columns col, col + kThreads, ... (at most
// kMaxColIters). The forward apply splits columns its own way (kApplyV).
//
// Memory traffic: the forward reads x twice (statistics, then normalize),
// the second time in reverse chunk order with read-once hints so that the
// chunks the statistics read last are still cached. Reading x once instead
// would save only the part of x a GPU can hold on chip between the passes (a
// grid barrier apart), so the forward keeps the two reads; `kgate bench
// --ceilings` prints that single-read bound beside the two-read floor.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/elements.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels::gn {

inline constexpr int kThreads = 256;
inline constexpr int kMaxColIters = 4;
inline constexpr int kMaxV = 8;

struct Geometry {
  std::int64_t N, S, C, G, Cg;  // batch, rows per n, channels, groups, channels per group
  std::int64_t chunk_rows, chunks;
  int V;         // channels per column
  int width;     // columns handled per column-iteration (min(C/V, kThreads))
  int rows_par;  // rows handled in parallel (kThreads / width)
  int col_iters; // ceil((C/V) / width)
};

struct FwdArgs {
  Geometry g;
  const void* x;
  void* y;
  float* mean;        // [N][G]
  float* rstd;        // [N][G]
  const float* gamma; // [C] or null
  const float* beta;  // [C] or null
  float* partial;     // [N][chunks][G][3]: count, mean, M2
  float* moments;     // [N][G][3] or null: gn_fwd_finalize writes the combined
                      // moments here instead of mean and rstd (the first phase
                      // of groupnorm_partials)
  float eps;
  int relu;
};

struct BwdArgs {
  Geometry g;
  const void* x;
  const void* dy;
  const float* mean;   // [N][G]
  const float* rstd;   // [N][G]
  const float* gamma;  // [C] or null
  const float* beta;   // [C] or null
  void* dx;
  float* dgamma;       // [C] or null
  float* dbeta;        // [C] or null
  float* partial;      // [N][chunks][C][2]: sum dy, sum dy*(x - mean)
  float* sums;         // [N][C][2]
  float* coef;         // [N][G][2]: c2, c3
  std::int64_t group_elems;  // M: elements of one group of the whole volume
  int relu;
};

// Correctly rounded square root on every backend (fast-math is off; CUDA's
// and HIP's default sqrtf are IEEE-rounded).
KGATE_DEVICE float sqrt_rn(float v) { return sqrtf(v); }

// PyTorch's relu: NaN stays NaN, -0 and negatives become +0.
KGATE_DEVICE float relu(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

// ---------------------------------------------------------------------------
// Welford / Chan

struct Moments {
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
};

// Chan et al.'s pairwise combine. Exact counts (integers below 2^24).
KGATE_DEVICE Moments chan(const Moments& a, const Moments& b) {
  if (b.n == 0.0f) return a;
  if (a.n == 0.0f) return b;
  Moments r;
  r.n = a.n + b.n;
  const float d = b.mean - a.mean;
  const float fb = b.n / r.n;
  r.mean = a.mean + d * fb;
  r.m2 = (a.m2 + b.m2) + (d * d) * (a.n * fb);
  return r;
}

// The row range of (chunk) and this work-item's first row and column slot.
struct Slot {
  std::int64_t row_begin, row_end;
  int col0, lane_row;
  bool active;
};

KGATE_DEVICE Slot slot_of(const Geometry& g, std::int64_t chunk) {
  Slot s;
  const int t = static_cast<int>(rt::thread_idx().x);
  s.row_begin = chunk * g.chunk_rows;
  s.row_end = s.row_begin + g.chunk_rows < g.S ? s.row_begin + g.chunk_rows : g.S;
  s.col0 = t % g.width;
  s.lane_row = t / g.width;
  s.active = s.lane_row < g.rows_par;
  return s;
}

// Forward y of one element, the one definition the backward's ReLU mask
// recomputes: ((x - mean) * rstd) * gamma + beta, then ReLU.
KGATE_DEVICE float gn_forward_value(float x, float mean, float rstd, bool affine, float gamma, float beta,
                                    int relu_on) {
  float y = (x - mean) * rstd;
  if (affine) y = y * gamma + beta;
  return relu_on ? relu(y) : y;
}

// dy under the fused ReLU's mask: zero where the forward's output, recomputed
// exactly as the forward computes it and rounded to its stored dtype Ty, is
// not > 0. The backward's reduce and apply passes share this one definition.
template <class Ty>
KGATE_DEVICE float relu_masked(float dy, float x, float mean, float rstd, const float* gamma, const float* beta,
                               std::int64_t c) {
  const bool affine = gamma != nullptr;
  const float y = to_f32(from_f32<Ty>(
      gn_forward_value(x, mean, rstd, affine, affine ? gamma[c] : 1.0f, affine ? beta[c] : 0.0f, 1)));
  return y > 0.0f ? dy : 0.0f;
}

// ---------------------------------------------------------------------------
// Forward 1: per-chunk, per-group moments.

// Rows a work-item loads before it uses any of them (memory-level
// parallelism); a batch of kRowBatch rows x V channels is one two-pass
// moment, Chan-combined into the work-item's running moments.
inline constexpr int kRowBatch = 4;

// A work-item's per-row partials of one batch.
using RowParts = rt::regs<float, kRowBatch>;

// The N partials from `first` in a pairwise tree: (p[0] + p[1]) + (p[2] + p[3]), ...
template <int N>
KGATE_DEVICE float pair_tree(const RowParts& p, int first) {
  if constexpr (N == 1) return p[first];
  else return pair_tree<N / 2>(p, first) + pair_tree<N / 2>(p, first + N / 2);
}
KGATE_DEVICE float row_tree(const RowParts& p) { return pair_tree<kRowBatch>(p, 0); }
static_assert((kRowBatch & (kRowBatch - 1)) == 0, "row_tree needs a power of two");

// Two-pass moments of a batch's first `rows` rows of V values: each row in
// sequence, the rows in a pairwise tree (short dependency chains; absent rows
// add exact zeros). The division is exact when rows * V is a power of two,
// correctly rounded otherwise.
template <int V>
KGATE_DEVICE Moments batch_moments(const rt::regs<rt::regs<float, V>, kRowBatch>& xv, int rows) {
  Moments m;
  m.n = static_cast<float>(rows * V);
  RowParts part;
KGATE_UNROLL
  for (int u = 0; u < kRowBatch; ++u) {
    part[u] = 0.0f;
    if (u < rows)
KGATE_UNROLL
      for (int i = 0; i < V; ++i) part[u] = part[u] + xv[u][i];
  }
  m.mean = row_tree(part) / m.n;
KGATE_UNROLL
  for (int u = 0; u < kRowBatch; ++u) {
    part[u] = 0.0f;
    if (u < rows)
KGATE_UNROLL
      for (int i = 0; i < V; ++i) {
        const float d = xv[u][i] - m.mean;
        part[u] = part[u] + d * d;
      }
  }
  m.m2 = row_tree(part);
  return m;
}

// The first stride of a pairwise tree over n lanes: the largest power of two
// below n (0 when n is 1).
KGATE_HD constexpr int tree_top(int n) {
  int t = 1;
  while (t * 2 < n) t *= 2;
  return n > 1 ? t : 0;
}

template <class Tin, int V>
KGATE_KERNEL_BOUNDS(gn_fwd_stats, kThreads, FwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t chunk = rt::block_idx().x, n = rt::block_idx().y;
  const Slot s = slot_of(g, chunk);
  const std::int64_t cols = g.C / V;
  KGATE_LDS(lds_n, float, kThreads * kMaxColIters);
  KGATE_LDS(lds_mean, float, kThreads * kMaxColIters);
  KGATE_LDS(lds_m2, float, kThreads * kMaxColIters);
  const std::int64_t step = static_cast<std::int64_t>(g.rows_par) * kRowBatch;
  const std::int64_t first = s.row_begin + s.lane_row;
  for (int ci = 0; s.active && ci < g.col_iters; ++ci) {
    const std::int64_t col = s.col0 + static_cast<std::int64_t>(ci) * g.width;
    Moments acc;
    if (col < cols) {
      // p: the batch's first row; its rows lie row_stride elements apart.
      const std::int64_t row_stride = static_cast<std::int64_t>(g.rows_par) * g.C;
      const Tin* p = static_cast<const Tin*>(a.x) + (n * g.S + first) * g.C + col * V;
      for (std::int64_t r0 = first; r0 < s.row_end; r0 += step, p += kRowBatch * row_stride) {
        // The rows of the batch that lie in the chunk: a prefix, all of it
        // except in a chunk's last batch.
        const std::int64_t left = s.row_end - r0;
        int rows = kRowBatch;
        rt::regs<Pack<Tin, V>, kRowBatch> pk = {};
        if (left > static_cast<std::int64_t>(kRowBatch - 1) * g.rows_par) {
KGATE_UNROLL
          for (int u = 0; u < kRowBatch; ++u)
            pk[u] = rt::load_wide(reinterpret_cast<const Pack<Tin, V>*>(p + u * row_stride));
        } else {
          rows = 0;
KGATE_UNROLL
          for (int u = 0; u < kRowBatch; ++u)
            if (static_cast<std::int64_t>(u) * g.rows_par < left) {
              pk[u] = rt::load_wide(reinterpret_cast<const Pack<Tin, V>*>(p + u * row_stride));
              rows = u + 1;
            }
        }
        rt::regs<rt::regs<float, V>, kRowBatch> xv;
KGATE_UNROLL
        for (int u = 0; u < kRowBatch; ++u) unpack_f32<Tin, V>(pk[u], xv[u]);
        // Full batches (all but a chunk's last) take the branch-free copy.
        acc = chan(acc, rows == kRowBatch ? batch_moments<V>(xv, kRowBatch) : batch_moments<V>(xv, rows));
      }
    }
    // The work-item's moments to LDS, [lane_row][ci][col0].
    const int e = (s.lane_row * g.col_iters + ci) * g.width + s.col0;
    lds_n[e] = acc.n;
    lds_mean[e] = acc.mean;
    lds_m2[e] = acc.m2;
  }
  // A tree over the row lanes (lane r combines lane r + stride, strides
  // halving from the largest power of two below rows_par); then one work-item
  // per group combines its columns in order.
  for (int stride = tree_top(g.rows_par); stride > 0; stride /= 2) {
    rt::barrier();
    if (s.active && s.lane_row < stride && s.lane_row + stride < g.rows_par) {
KGATE_UNROLL
      for (int ci = 0; ci < kMaxColIters; ++ci) {
        if (ci >= g.col_iters) continue;
        const int e = (s.lane_row * g.col_iters + ci) * g.width + s.col0;
        const int f = ((s.lane_row + stride) * g.col_iters + ci) * g.width + s.col0;
        Moments l, r;
        l.n = lds_n[e];
        l.mean = lds_mean[e];
        l.m2 = lds_m2[e];
        r.n = lds_n[f];
        r.mean = lds_mean[f];
        r.m2 = lds_m2[f];
        const Moments c = chan(l, r);
        lds_n[e] = c.n;
        lds_mean[e] = c.mean;
        lds_m2[e] = c.m2;
      }
    }
  }
  rt::barrier();
  const std::int64_t cols_per_group = g.Cg / V;
  for (std::int64_t grp = rt::thread_idx().x; grp < g.G; grp += kThreads) {
    Moments acc;
    for (std::int64_t col = grp * cols_per_group; col < (grp + 1) * cols_per_group; ++col) {
      const int ci = static_cast<int>(col / g.width), c0 = static_cast<int>(col % g.width);
      const int e = ci * g.width + c0;  // lane row 0
      Moments m;
      m.n = lds_n[e];
      m.mean = lds_mean[e];
      m.m2 = lds_m2[e];
      acc = chan(acc, m);
    }
    float* out = a.partial + ((n * g.chunks + chunk) * g.G + grp) * 3;
    out[0] = acc.n;
    out[1] = acc.mean;
    out[2] = acc.m2;
  }
}

// ---------------------------------------------------------------------------
// Forward 2: per (n, group), chunk partials combined in a fixed tree.

// Partials a work-item loads before it combines them (latency hiding).
inline constexpr int kFinalizeBatch = 8;

KGATE_KERNEL_BOUNDS(gn_fwd_finalize, kThreads, FwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t grp = rt::block_idx().x, n = rt::block_idx().y;
  const int t = static_cast<int>(rt::thread_idx().x);
  // Work-item t combines partials t, t + kThreads, ... in that order.
  Moments acc;
  for (std::int64_t k0 = t; k0 < g.chunks; k0 += static_cast<std::int64_t>(kThreads) * kFinalizeBatch) {
    rt::regs<Moments, kFinalizeBatch> m;
KGATE_UNROLL
    for (int b = 0; b < kFinalizeBatch; ++b) {
      const std::int64_t k = k0 + static_cast<std::int64_t>(b) * kThreads;
      if (k < g.chunks) {
        const float* p = a.partial + ((n * g.chunks + k) * g.G + grp) * 3;
        m[b].n = p[0];
        m[b].mean = p[1];
        m[b].m2 = p[2];
      }
    }
KGATE_UNROLL
    for (int b = 0; b < kFinalizeBatch; ++b) acc = chan(acc, m[b]);  // chan skips empty partials
  }
  KGATE_LDS(lds_n, float, kThreads);
  KGATE_LDS(lds_mean, float, kThreads);
  KGATE_LDS(lds_m2, float, kThreads);
  lds_n[t] = acc.n;
  lds_mean[t] = acc.mean;
  lds_m2[t] = acc.m2;
  rt::barrier();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      Moments l, r;
      l.n = lds_n[t];
      l.mean = lds_mean[t];
      l.m2 = lds_m2[t];
      r.n = lds_n[t + stride];
      r.mean = lds_mean[t + stride];
      r.m2 = lds_m2[t + stride];
      const Moments c = chan(l, r);
      lds_n[t] = c.n;
      lds_mean[t] = c.mean;
      lds_m2[t] = c.m2;
    }
    rt::barrier();
  }
  if (t == 0 && a.moments) {
    float* m = a.moments + (n * g.G + grp) * 3;
    m[0] = lds_n[0];
    m[1] = lds_mean[0];
    m[2] = lds_m2[0];
  } else if (t == 0) {
    const float count = lds_n[0];
    const float mean = lds_mean[0];
    const float var = static_cast<float>(lds_m2[0]) / count;  // biased, as PyTorch
    a.mean[n * g.G + grp] = mean;
    a.rstd[n * g.G + grp] = 1.0f / sqrt_rn(var + a.eps);
  }
}

// ---------------------------------------------------------------------------
// Forward 3: normalize + affine + ReLU, one pass.

// Rows per batch in the apply pass: with fp16 output, kRowBatch rows spill
// scalar registers on gfx942 (the gfx942 gate rejects it); 2 rows do not.
template <class Tout>
inline constexpr int kApplyBatch = sizeof(Tout) == 2 && !std::is_same_v<Tout, kgate::bf16> ? 2 : kRowBatch;

// Channels per access in the apply pass: at most 16 bytes of output, so that
// each store instruction of a wave writes one contiguous span (with 32 bytes
// per work-item, each instruction would write every other 16 bytes, so two
// instructions would share every line; `kgate bench --ceilings` times the
// contiguous form in its write-only and widening ceilings). Divides V, so a
// column lies in one group.
template <class Tout, int V>
inline constexpr int kApplyV = V * static_cast<int>(sizeof(Tout)) > 16 ? 16 / static_cast<int>(sizeof(Tout)) : V;

// Chunks run in the reverse of the statistics pass's order, so that on a GPU
// the chunks read last by the statistics (still in the L2 cache) are read
// first; x and y are accessed with the read-once hints so that y's lines and
// x's used lines leave the cache before x's unread ones.
template <class Tin, class Tout, int V>
KGATE_KERNEL_BOUNDS(gn_fwd_apply, kThreads, FwdArgs a) {
  constexpr int B = kApplyBatch<Tout>;
  constexpr int VA = kApplyV<Tout, V>;
  const Geometry& g = a.g;
  const std::int64_t chunk = g.chunks - 1 - rt::block_idx().x, n = g.N - 1 - rt::block_idx().y;
  // This pass's own column split (VA channels per column).
  const std::int64_t cols = g.C / VA;
  const int width = static_cast<int>(cols < kThreads ? cols : kThreads);
  const int rows_par = kThreads / width;
  const int t = static_cast<int>(rt::thread_idx().x);
  const int col0 = t % width, lane_row = t / width;
  if (lane_row >= rows_par) return;
  const std::int64_t row_begin = chunk * g.chunk_rows;
  const std::int64_t row_end = row_begin + g.chunk_rows < g.S ? row_begin + g.chunk_rows : g.S;
  const bool affine = a.gamma != nullptr;
  for (std::int64_t col = col0; col < cols; col += width) {
    const std::int64_t grp = col * VA / g.Cg;
    const float mean = a.mean[n * g.G + grp], rstd = a.rstd[n * g.G + grp];
    rt::regs<float, VA> gm, bt;
KGATE_UNROLL
    for (int i = 0; i < VA; ++i) {
      gm[i] = affine ? a.gamma[col * VA + i] : 1.0f;
      bt[i] = affine ? a.beta[col * VA + i] : 0.0f;
    }
    const std::int64_t step = static_cast<std::int64_t>(rows_par) * B;
    // x and y at the batch's first row; its rows lie row_stride elements apart.
    const std::int64_t row_stride = static_cast<std::int64_t>(rows_par) * g.C;
    const std::int64_t off0 = (n * g.S + row_begin + lane_row) * g.C + col * VA;
    const Tin* px = static_cast<const Tin*>(a.x) + off0;
    Tout* py = static_cast<Tout*>(a.y) + off0;
    for (std::int64_t r0 = row_begin + lane_row; r0 < row_end; r0 += step, px += B * row_stride, py += B * row_stride) {
      const std::int64_t left = row_end - r0;
      const bool full = left > static_cast<std::int64_t>(B - 1) * rows_par;
      rt::regs<Pack<Tin, VA>, B> pk = {};
KGATE_UNROLL
      for (int u = 0; u < B; ++u)
        if (full || static_cast<std::int64_t>(u) * rows_par < left)
          pk[u] = rt::load_once(reinterpret_cast<const Pack<Tin, VA>*>(px + u * row_stride));
KGATE_UNROLL
      for (int u = 0; u < B; ++u) {
        if (!full && static_cast<std::int64_t>(u) * rows_par >= left) continue;
        rt::regs<float, VA> xv;
        unpack_f32<Tin, VA>(pk[u], xv);
        Pack<Tout, VA> out;
KGATE_UNROLL
        for (int i = 0; i < VA; ++i)
          out.v[i] = from_f32<Tout>(gn_forward_value(xv[i], mean, rstd, affine, gm[i], bt[i], a.relu));
        rt::store_once(reinterpret_cast<Pack<Tout, VA>*>(py + u * row_stride), out);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Backward 1: per chunk and channel, sum dy and sum dy*(x - mean), with dy
// masked by [y > 0] when the forward fused a ReLU (y recomputed exactly as
// the forward computed it, rounded to y's dtype as the forward stored it).

template <class Tin, class Tdy, int V>
KGATE_KERNEL_BOUNDS(gn_bwd_reduce, kThreads, BwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t chunk = rt::block_idx().x, n = rt::block_idx().y;
  const Slot s = slot_of(g, chunk);
  const std::int64_t cols = g.C / V;
  KGATE_LDS(lds_dy, float, kThreads * kMaxV);
  KGATE_LDS(lds_dyx, float, kThreads * kMaxV);
  for (int ci = 0; ci < g.col_iters; ++ci) {
    const std::int64_t col = s.col0 + static_cast<std::int64_t>(ci) * g.width;
    const bool mine = s.active && col < cols;
    rt::regs<float, V> sdy, sdyx;
    for (int i = 0; i < V; ++i) sdy[i] = sdyx[i] = 0.0f;
    if (mine) {
      const std::int64_t grp = col * V / g.Cg;
      const float mean = a.mean[n * g.G + grp], rstd = a.rstd[n * g.G + grp];
      for (std::int64_t r = s.row_begin + s.lane_row; r < s.row_end; r += g.rows_par) {
        const std::int64_t off = (n * g.S + r) * g.C + col * V;
        rt::regs<float, V> x, dy;
        load_f32<Tin, V>(static_cast<const Tin*>(a.x) + off, x);
        load_f32<Tdy, V>(static_cast<const Tdy*>(a.dy) + off, dy);
        for (int i = 0; i < V; ++i) {
          const float d = a.relu ? relu_masked<Tdy>(dy[i], x[i], mean, rstd, a.gamma, a.beta, col * V + i) : dy[i];
          sdy[i] = sdy[i] + d;
          sdyx[i] = sdyx[i] + d * (x[i] - mean);
        }
      }
    }
    if (s.active) {
      for (int i = 0; i < V; ++i) {
        lds_dy[(s.lane_row * g.width + s.col0) * V + i] = sdy[i];
        lds_dyx[(s.lane_row * g.width + s.col0) * V + i] = sdyx[i];
      }
    }
    rt::barrier();
    // One work-item per channel of this column-iteration sums the rows in order.
    for (int k = static_cast<int>(rt::thread_idx().x); k < g.width * V; k += kThreads) {
      const std::int64_t c = (static_cast<std::int64_t>(ci) * g.width) * V + k;
      if (c >= g.C) continue;
      float tdy = 0.0f, tdyx = 0.0f;
      for (int lr = 0; lr < g.rows_par; ++lr) {
        tdy = tdy + static_cast<float>(lds_dy[lr * g.width * V + k]);
        tdyx = tdyx + static_cast<float>(lds_dyx[lr * g.width * V + k]);
      }
      float* out = a.partial + ((n * g.chunks + chunk) * g.C + c) * 2;
      out[0] = tdy;
      out[1] = tdyx;
    }
    rt::barrier();
  }
}

// Backward 2: per (n, channel): the channel's chunk partials in a fixed tree
// (work-item t adds partials t, t + kThreads, ... in order, then a tree over
// the workgroup).
KGATE_KERNEL_BOUNDS(gn_bwd_finalize, kThreads, BwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t c = rt::block_idx().x, n = rt::block_idx().y;
  const int t = static_cast<int>(rt::thread_idx().x);
  KGATE_LDS(lds_dy, float, kThreads);
  KGATE_LDS(lds_dyx, float, kThreads);
  float sdy = 0.0f, sdyx = 0.0f;
  for (std::int64_t k0 = t; k0 < g.chunks; k0 += static_cast<std::int64_t>(kThreads) * kFinalizeBatch) {
    rt::regs<float, kFinalizeBatch> pdy, pdyx;
KGATE_UNROLL
    for (int b = 0; b < kFinalizeBatch; ++b) {
      const std::int64_t k = k0 + static_cast<std::int64_t>(b) * kThreads;
      pdy[b] = pdyx[b] = 0.0f;
      if (k < g.chunks) {
        const float* p = a.partial + ((n * g.chunks + k) * g.C + c) * 2;
        pdy[b] = p[0];
        pdyx[b] = p[1];
      }
    }
KGATE_UNROLL
    for (int b = 0; b < kFinalizeBatch; ++b) {
      if (k0 + static_cast<std::int64_t>(b) * kThreads >= g.chunks) continue;
      sdy = sdy + pdy[b];
      sdyx = sdyx + pdyx[b];
    }
  }
  lds_dy[t] = sdy;
  lds_dyx[t] = sdyx;
  rt::barrier();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      lds_dy[t] = static_cast<float>(lds_dy[t]) + static_cast<float>(lds_dy[t + stride]);
      lds_dyx[t] = static_cast<float>(lds_dyx[t]) + static_cast<float>(lds_dyx[t + stride]);
    }
    rt::barrier();
  }
  if (t == 0) {
    a.sums[(n * g.C + c) * 2 + 0] = lds_dy[0];
    a.sums[(n * g.C + c) * 2 + 1] = lds_dyx[0];
  }
}

// Backward 3: one work-item per (n, group) and per channel.
// Per (n, group): A = sum_c gamma_c * sum(dy*(x-mean)), B = sum_c gamma_c *
// sum(dy), channels in order; dx = rstd*gamma*dy + c2*(x - mean) + c3 with
// c2 = -A*rstd^3/M, c3 = -B*rstd/M.
// Per channel (affine): dgamma_c = sum_n sum(dy*(x-mean)) * rstd,
// dbeta_c = sum_n sum(dy), n in order.
KGATE_KERNEL_BOUNDS(gn_bwd_params, kThreads, BwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t i = static_cast<std::int64_t>(rt::block_idx().x) * kThreads + rt::thread_idx().x;
  if (i < g.N * g.G) {
    const std::int64_t n = i / g.G, grp = i % g.G;
    float A = 0.0f, B = 0.0f;
    for (std::int64_t c = grp * g.Cg; c < (grp + 1) * g.Cg; ++c) {
      const float gm = a.gamma ? a.gamma[c] : 1.0f;
      B = B + gm * a.sums[(n * g.C + c) * 2 + 0];
      A = A + gm * a.sums[(n * g.C + c) * 2 + 1];
    }
    const float r = a.rstd[n * g.G + grp];
    const float M = static_cast<float>(a.group_elems);
    a.coef[(n * g.G + grp) * 2 + 0] = -(A * ((r * r) * r)) / M;
    a.coef[(n * g.G + grp) * 2 + 1] = -(B * r) / M;
  }
  if (a.dgamma && i < g.C) {
    float dgamma = 0.0f, dbeta = 0.0f;
    for (std::int64_t n = 0; n < g.N; ++n) {
      dbeta = dbeta + a.sums[(n * g.C + i) * 2 + 0];
      dgamma = dgamma + a.sums[(n * g.C + i) * 2 + 1] * a.rstd[n * g.G + i / g.Cg];
    }
    a.dgamma[i] = dgamma;
    a.dbeta[i] = dbeta;
  }
}

// Backward 4: dx, elementwise.
template <class Tin, class Tdy, int V>
KGATE_KERNEL_BOUNDS(gn_bwd_apply, kThreads, BwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t chunk = rt::block_idx().x, n = rt::block_idx().y;
  const Slot s = slot_of(g, chunk);
  if (!s.active) return;
  const std::int64_t cols = g.C / V;
  for (int ci = 0; ci < g.col_iters; ++ci) {
    const std::int64_t col = s.col0 + static_cast<std::int64_t>(ci) * g.width;
    if (col >= cols) break;
    const std::int64_t grp = col * V / g.Cg;
    const float mean = a.mean[n * g.G + grp], rstd = a.rstd[n * g.G + grp];
    const float c2 = a.coef[(n * g.G + grp) * 2 + 0], c3 = a.coef[(n * g.G + grp) * 2 + 1];
    for (std::int64_t r = s.row_begin + s.lane_row; r < s.row_end; r += g.rows_par) {
      const std::int64_t off = (n * g.S + r) * g.C + col * V;
      rt::regs<float, V> x, dy;
      load_f32<Tin, V>(static_cast<const Tin*>(a.x) + off, x);
      load_f32<Tdy, V>(static_cast<const Tdy*>(a.dy) + off, dy);
      for (int i = 0; i < V; ++i) {
        const std::int64_t c = col * V + i;
        const float d = a.relu ? relu_masked<Tdy>(dy[i], x[i], mean, rstd, a.gamma, a.beta, c) : dy[i];
        const float gm = a.gamma ? a.gamma[c] : 1.0f;
        x[i] = ((rstd * gm) * d + c2 * (x[i] - mean)) + c3;
      }
      store_f32<Tin, V>(static_cast<Tin*>(a.dx) + off, x);
    }
  }
}

}  // namespace kgate::kernels::gn
