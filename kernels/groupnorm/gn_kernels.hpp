// GroupNorm kernels for NDHWC tensors: statistics (two-pass moments per
// vector of V channels, Chan-combined within a work-item, a chunk and across
// chunks: the pairwise Welford family of ORACLES.md), normalize + affine +
// fused ReLU, and the backward pass. One source for every backend
// (kernels/runtime/runtime.hpp).
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
// kMaxColIters).
#pragma once

#include <math.h>

#include <cstdint>

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
  int relu;
};

// ---------------------------------------------------------------------------
// Element conversions

KGATE_DEVICE float to_f32(float v) { return v; }
KGATE_DEVICE float to_f32(kgate::bf16 v) { return v.to_float(); }
KGATE_DEVICE float to_f32(kgate::fp16 v) { return v.to_float(); }
template <class T> KGATE_DEVICE T from_f32(float v);
template <> KGATE_DEVICE float from_f32<float>(float v) { return v; }
template <> KGATE_DEVICE kgate::bf16 from_f32<kgate::bf16>(float v) { return kgate::bf16::from_float(v); }
template <> KGATE_DEVICE kgate::fp16 from_f32<kgate::fp16>(float v) { return kgate::fp16::from_float(v); }

// Correctly rounded square root on every backend (fast-math is off; CUDA's
// and HIP's default sqrtf are IEEE-rounded).
KGATE_DEVICE float sqrt_rn(float v) { return sqrtf(v); }

// PyTorch's relu: NaN stays NaN, -0 and negatives become +0.
KGATE_DEVICE float relu(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

// V elements loaded at once (one 16-byte access for V = 8 bf16).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <class T, int V>
KGATE_DEVICE void load_f32(const T* p, float (&out)[V]) {
  const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
  for (int i = 0; i < V; ++i) out[i] = to_f32(pk.v[i]);
}

template <class T, int V>
KGATE_DEVICE void store_f32(T* p, const float (&in)[V]) {
  Pack<T, V> pk;
  for (int i = 0; i < V; ++i) pk.v[i] = from_f32<T>(in[i]);
  *reinterpret_cast<Pack<T, V>*>(p) = pk;
}

// ---------------------------------------------------------------------------
// Welford / Chan

struct Moments {
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
};

// Two-pass moments of V values (V a power of two, so the division is exact):
// combined into a running accumulator with Chan's formula, one division per
// V elements instead of Welford's one per element.
template <int V>
KGATE_DEVICE Moments vector_moments(const float (&v)[V]) {
  float sum = 0.0f;
KGATE_UNROLL
  for (int i = 0; i < V; ++i) sum = sum + v[i];
  Moments m;
  m.n = static_cast<float>(V);
  m.mean = sum * (1.0f / static_cast<float>(V));
KGATE_UNROLL
  for (int i = 0; i < V; ++i) {
    const float d = v[i] - m.mean;
    m.m2 = m.m2 + d * d;
  }
  return m;
}

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
KGATE_DEVICE float gn_forward_value(float x, float mean, float rstd, const float* gamma, const float* beta,
                                    std::int64_t c, int relu_on) {
  float y = (x - mean) * rstd;
  if (gamma) y = y * gamma[c] + beta[c];
  return relu_on ? relu(y) : y;
}

// dy under the fused ReLU's mask: zero where the forward's output, recomputed
// exactly as the forward computes it and rounded to its stored dtype Ty, is
// not > 0. The backward's reduce and apply passes share this one definition.
template <class Ty>
KGATE_DEVICE float relu_masked(float dy, float x, float mean, float rstd, const float* gamma, const float* beta,
                               std::int64_t c) {
  const float y = to_f32(from_f32<Ty>(gn_forward_value(x, mean, rstd, gamma, beta, c, 1)));
  return y > 0.0f ? dy : 0.0f;
}

// ---------------------------------------------------------------------------
// Forward 1: per-chunk, per-group moments.

template <class Tin, int V>
KGATE_KERNEL_BOUNDS(gn_fwd_stats, kThreads, FwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t chunk = rt::block_idx().x, n = rt::block_idx().y;
  const Slot s = slot_of(g, chunk);
  const std::int64_t cols = g.C / V;
  // Fully unrolled over the column slots so st[] stays in registers.
  Moments st[kMaxColIters];
  if (s.active) {
    for (std::int64_t r = s.row_begin + s.lane_row; r < s.row_end; r += g.rows_par) {
KGATE_UNROLL
      for (int ci = 0; ci < kMaxColIters; ++ci) {
        const std::int64_t col = s.col0 + static_cast<std::int64_t>(ci) * g.width;
        if (ci >= g.col_iters || col >= cols) continue;
        float v[V];
        load_f32<Tin, V>(static_cast<const Tin*>(a.x) + (n * g.S + r) * g.C + col * V, v);
        st[ci] = chan(st[ci], vector_moments<V>(v));
      }
    }
  }
  // Slot partials to LDS, [lane_row][ci][col0].
  KGATE_LDS(lds_n, float, kThreads * kMaxColIters);
  KGATE_LDS(lds_mean, float, kThreads * kMaxColIters);
  KGATE_LDS(lds_m2, float, kThreads * kMaxColIters);
  if (s.active) {
KGATE_UNROLL
    for (int ci = 0; ci < kMaxColIters; ++ci) {
      if (ci >= g.col_iters) continue;
      const int e = (s.lane_row * g.col_iters + ci) * g.width + s.col0;
      lds_n[e] = st[ci].n;
      lds_mean[e] = st[ci].mean;
      lds_m2[e] = st[ci].m2;
    }
  }
  rt::barrier();
  // One work-item per group combines its slots: columns in order, then rows.
  const std::int64_t cols_per_group = g.Cg / V;
  for (std::int64_t grp = rt::thread_idx().x; grp < g.G; grp += kThreads) {
    Moments acc;
    for (std::int64_t col = grp * cols_per_group; col < (grp + 1) * cols_per_group; ++col) {
      const int ci = static_cast<int>(col / g.width), c0 = static_cast<int>(col % g.width);
      for (int lr = 0; lr < g.rows_par; ++lr) {
        const int e = (lr * g.col_iters + ci) * g.width + c0;
        Moments m;
        m.n = lds_n[e];
        m.mean = lds_mean[e];
        m.m2 = lds_m2[e];
        acc = chan(acc, m);
      }
    }
    float* out = a.partial + ((n * g.chunks + chunk) * g.G + grp) * 3;
    out[0] = acc.n;
    out[1] = acc.mean;
    out[2] = acc.m2;
  }
}

// ---------------------------------------------------------------------------
// Forward 2: per (n, group), chunk partials combined in a fixed tree.

KGATE_KERNEL_BOUNDS(gn_fwd_finalize, kThreads, FwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t grp = rt::block_idx().x, n = rt::block_idx().y;
  const int t = static_cast<int>(rt::thread_idx().x);
  Moments acc;
  for (std::int64_t k = t; k < g.chunks; k += kThreads) {
    const float* p = a.partial + ((n * g.chunks + k) * g.G + grp) * 3;
    Moments m;
    m.n = p[0];
    m.mean = p[1];
    m.m2 = p[2];
    acc = chan(acc, m);
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
  if (t == 0) {
    const float count = lds_n[0];
    const float mean = lds_mean[0];
    const float var = static_cast<float>(lds_m2[0]) / count;  // biased, as PyTorch
    a.mean[n * g.G + grp] = mean;
    a.rstd[n * g.G + grp] = 1.0f / sqrt_rn(var + a.eps);
  }
}

// ---------------------------------------------------------------------------
// Forward 3: normalize + affine + ReLU, one pass.

// Chunks run in the reverse of the statistics pass's order, so that on a GPU
// the chunks read last by the statistics (still in the L2 cache) are read first.
template <class Tin, class Tout, int V>
KGATE_KERNEL_BOUNDS(gn_fwd_apply, kThreads, FwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t chunk = g.chunks - 1 - rt::block_idx().x, n = g.N - 1 - rt::block_idx().y;
  const Slot s = slot_of(g, chunk);
  if (!s.active) return;
  const std::int64_t cols = g.C / V;
  for (int ci = 0; ci < g.col_iters; ++ci) {
    const std::int64_t col = s.col0 + static_cast<std::int64_t>(ci) * g.width;
    if (col >= cols) break;
    const std::int64_t grp = col * V / g.Cg;
    const float mean = a.mean[n * g.G + grp], rstd = a.rstd[n * g.G + grp];
    for (std::int64_t r = s.row_begin + s.lane_row; r < s.row_end; r += g.rows_par) {
      const std::int64_t off = (n * g.S + r) * g.C + col * V;
      float v[V];
      load_f32<Tin, V>(static_cast<const Tin*>(a.x) + off, v);
      for (int i = 0; i < V; ++i) v[i] = gn_forward_value(v[i], mean, rstd, a.gamma, a.beta, col * V + i, a.relu);
      store_f32<Tout, V>(static_cast<Tout*>(a.y) + off, v);
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
    float sdy[V], sdyx[V];
    for (int i = 0; i < V; ++i) sdy[i] = sdyx[i] = 0.0f;
    if (mine) {
      const std::int64_t grp = col * V / g.Cg;
      const float mean = a.mean[n * g.G + grp], rstd = a.rstd[n * g.G + grp];
      for (std::int64_t r = s.row_begin + s.lane_row; r < s.row_end; r += g.rows_par) {
        const std::int64_t off = (n * g.S + r) * g.C + col * V;
        float x[V], dy[V];
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

// Backward 2: per (n, group): each channel's chunk partials in a fixed tree,
// then the group's coefficients.
KGATE_KERNEL_BOUNDS(gn_bwd_finalize, kThreads, BwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t grp = rt::block_idx().x, n = rt::block_idx().y;
  const int t = static_cast<int>(rt::thread_idx().x);
  KGATE_LDS(lds_dy, float, kThreads);
  KGATE_LDS(lds_dyx, float, kThreads);
  for (std::int64_t c = grp * g.Cg; c < (grp + 1) * g.Cg; ++c) {
    float sdy = 0.0f, sdyx = 0.0f;
    for (std::int64_t k = t; k < g.chunks; k += kThreads) {
      const float* p = a.partial + ((n * g.chunks + k) * g.C + c) * 2;
      sdy = sdy + p[0];
      sdyx = sdyx + p[1];
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
    rt::barrier();
  }
  if (t == 0) {
    // A = sum_c gamma_c * sum(dy*(x-mean)), B = sum_c gamma_c * sum(dy);
    // dx = rstd*gamma*dy + c2*(x - mean) + c3, c2 = -A*rstd^3/M, c3 = -B*rstd/M.
    float A = 0.0f, B = 0.0f;
    for (std::int64_t c = grp * g.Cg; c < (grp + 1) * g.Cg; ++c) {
      const float gm = a.gamma ? a.gamma[c] : 1.0f;
      B = B + gm * a.sums[(n * g.C + c) * 2 + 0];
      A = A + gm * a.sums[(n * g.C + c) * 2 + 1];
    }
    const float r = a.rstd[n * g.G + grp];
    const float M = static_cast<float>(g.Cg * g.S);
    a.coef[(n * g.G + grp) * 2 + 0] = -(A * ((r * r) * r)) / M;
    a.coef[(n * g.G + grp) * 2 + 1] = -(B * r) / M;
  }
}

// Backward 3: dgamma_c = sum_n sum(dy*(x-mean)) * rstd, dbeta_c = sum_n sum(dy).
KGATE_KERNEL_BOUNDS(gn_bwd_params, kThreads, BwdArgs a) {
  const Geometry& g = a.g;
  const std::int64_t c = static_cast<std::int64_t>(rt::block_idx().x) * kThreads + rt::thread_idx().x;
  if (c >= g.C) return;
  float dgamma = 0.0f, dbeta = 0.0f;
  for (std::int64_t n = 0; n < g.N; ++n) {
    dbeta = dbeta + a.sums[(n * g.C + c) * 2 + 0];
    dgamma = dgamma + a.sums[(n * g.C + c) * 2 + 1] * a.rstd[n * g.G + c / g.Cg];
  }
  a.dgamma[c] = dgamma;
  a.dbeta[c] = dbeta;
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
      float x[V], dy[V];
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
