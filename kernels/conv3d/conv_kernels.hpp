// Convolution kernels for NDHWC tensors: the six operator-directions of
// conv3d and conv_transpose3d as three implicit GEMMs over one geometry
// (reference/conv3d/conv_geometry.hpp: a "small" side S, a "large" side L and
// a weight [small channel][KD][KH][KW][large channel per group]; conv3d's
// small side is its output, conv_transpose3d's its input). One source for
// every backend (kernels/runtime/runtime.hpp).
//
//   contract  out[n, i, cs]  = sum_{tap, q} large[n, j(i, tap), grp*clg + q] * w[cs, tap, q]
//             conv3d.fwd, conv_transpose3d.bwd_data.
//             GEMM: M = N*prod(S), N = cs/g, K = taps*clg.
//   scatter   out[n, j, cl]  = sum_{tap, q} small[n, i(j, tap), grp*csg + q] * w[grp*csg + q, tap, cl]
//             conv3d.bwd_data, conv_transpose3d.fwd.
//             GEMM: M = positions of one stride phase, N = cl/g, K = taps*csg.
//   wgrad     dw[cs, tap, q] = sum_{n, i} small[n, i, cs] * large[n, j(i, tap), grp*clg + q]
//             conv3d.bwd_weight (small = dy, large = x), conv_transpose3d.bwd_weight
//             (small = x, large = dy): the same kernel with the operands swapped.
//             GEMM: M = cs/g, N = taps*clg, K = N*prod(S), split into slices.
// where j(i, tap) = i*stride - pad_front + tap*dil per axis, and a term whose
// j falls outside L (padding) is absent.
//
// Backward-data for stride > 1 (the scatter family) is decomposed by stride
// phase: the large positions j with j mod stride = ph (per axis) form one
// GEMM (grid z = phase), and for that phase the taps k with
// (ph + pad - k*dil) mod stride = 0 are exactly the ones that contribute, the
// same for every position of the phase, with i = t + (ph + pad - k*dil)/stride
// for j = ph + stride*t. A workgroup therefore never evaluates a tap that
// does not land on the stride lattice and never branches per position on
// divisibility; stride 1 is one phase with every tap (the forward contraction
// on the flipped, channel-swapped weight). The non-overlapping case k = s,
// dil = 1 (the U-Net's k2 s2 up-sampling) has exactly one tap per phase,
// tap = (ph + pad) mod s: conv_scatter<.., true> runs it as a 1x1 GEMM per
// phase without the tap loop.
//
// Work decomposition: a workgroup is kThreads work-items (one gfx942 wave),
// bn of them along N and kThreads/bn along M; each owns a kTM x kTN register
// tile of the output and loops over K with fp32 accumulators, with no LDS and
// no barrier (cheap to emulate: a work-item runs to completion). Every output
// element is the sequential sum of its terms in the order taps (KD, KH, KW),
// then channels ascending; absent terms are skipped, not added as zero.
// Products and sums are separate IEEE operations (no contraction on any
// backend): bf16 and fp16 products are exact in fp32.
//
// Backward-weight is deterministic by construction: slice s of `splits`
// writes its fp32 partial of every dw element to ws[s][element], and
// conv_tree combines the partials of each element in a fixed pairwise tree
// (stride 1, 2, 4, ... ; depth ceil(log2 splits)); dbias is the same with
// conv_colsum's column sums of dy. No atomics; splits and slices are
// functions of the problem alone (kernels/conv3d/conv3d.cpp).
//
// Matrix cores (conv_contract_mma): the contract family for bf16 and fp16
// inputs runs on the runtime's MMA atoms (kernels/runtime/mma.hpp) where the
// channels fill an atom (plan: "mma-igemm"): gfx942 v_mfma_f32_32x32x8 on
// HIP and on the host emulator's default target, sm_90 mma.sync m16n8k16 on
// CUDA. A workgroup is one wave owning kWM x kWN atoms of output; per tap it
// writes the element offsets of its rows into LDS (one barrier each side),
// then walks the tap's channels Atom::K at a time, loading fragments by
// coordinate straight from global memory (absent terms and channels past
// the end load as +0, which adds nothing to an exact sum). Lane layouts come
// only from the atom's tables. fp32 inputs, the scatter and wgrad families,
// and channel counts an atom does not fill take the portable path.
//
// Indexing is 64-bit throughout (tensors may pass 2^31 elements).
#pragma once

#include <cstdint>

#include "kernels/elements.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels::cv {

inline constexpr int kThreads = 64;  // work-items per workgroup
inline constexpr int kTM = 4;        // register tile rows (M) per work-item
inline constexpr int kTN = 4;        // register tile columns (N) per work-item
inline constexpr int kMaxPhaseTaps = 256;  // taps one stride phase of the scatter family may have (4 KiB of LDS)

// The geometry of reference/conv3d/conv_geometry.hpp as plain device data.
// Extents and channel counts are at most 2^24 (ConvProblem::validate), so
// they are 32-bit (half the scalar registers of a uniform 64-bit copy);
// every offset and product of them is formed in 64 bits.
struct Geom {
  std::int32_t n, groups, cs, cl, csg, clg;
  std::int32_t S[3], L[3], K[3], stride[3], pad[3], dil[3];
  std::int64_t s_pos, l_pos, taps;
};

struct GemmArgs {
  Geom g;
  const void* a;     // contract: the large operand; scatter: the small operand
  const void* w;     // [cs][KD][KH][KW][clg]
  const void* bias;  // [output channels] or null
  void* out;
  int bn;            // work-items along N (a power of two dividing kThreads)
};

struct WgradArgs {
  Geom g;
  const void* small;
  const void* large;
  float* ws;           // [splits][cs*taps*clg]
  int bn;
  std::int64_t slice;  // rows (n, i) per split
};

struct ColsumArgs {
  const void* x;       // [rows][cols]
  std::int64_t rows, cols, slice;
  float* ws;           // [splits][cols]
};

struct TreeArgs {
  float* ws;  // [splits][numel], combined in place
  std::int64_t numel, splits;
  void* out;
};

KGATE_HD constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// One K step of a portable register tile: acc[u][v] += x_u * b[v], x_u the
// channel-q element of row u's source (rows without a source at this tap,
// ap[u] null, take no term).
template <class Tin>
KGATE_DEVICE void tile_step(float (&acc)[kTM][kTN], const Tin* const (&ap)[kTM], std::int32_t q,
                            const float (&b)[kTN]) {
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (!ap[u]) continue;
    const float x = to_f32(ap[u][q]);
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v) acc[u][v] = acc[u][v] + x * b[v];
  }
}

// Rows m0 .. m0 + kTM - 1 of a GEMM over M = n * E0 * E1 * E2 positions:
// each row's batch index and coordinates; a row past M (valid false)
// decodes as row m0 so its loads stay in bounds.
KGATE_DEVICE void decode_rows(std::int64_t m0, std::int64_t M, const std::int32_t (&ext)[3], std::int64_t (&rb)[kTM],
                              std::int64_t (&ri)[kTM][3], bool (&rv)[kTM]) {
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    const std::int64_t m = m0 + u;
    rv[u] = m < M;
    std::int64_t r = rv[u] ? m : m0;
    ri[u][2] = r % ext[2]; r /= ext[2];
    ri[u][1] = r % ext[1]; r /= ext[1];
    ri[u][0] = r % ext[0];
    rb[u] = r / ext[0];
  }
}

// ---------------------------------------------------------------------------
// contract: out on the small side.

template <class Tin, class Tout>
KGATE_KERNEL_BOUNDS(conv_contract, kThreads, GemmArgs a) {
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const int bm = kThreads / a.bn;
  const std::int64_t col_tiles = ceil_div(g.csg, static_cast<std::int64_t>(kTN) * a.bn);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * kTN * a.bn + (t % a.bn) * kTN;
  const std::int64_t m0 = static_cast<std::int64_t>(rt::block_idx().x) * kTM * bm + (t / a.bn) * kTM;
  const std::int64_t M = g.n * g.s_pos;
  if (m0 >= M || c0 >= g.csg) return;
  const Tin* A = static_cast<const Tin*>(a.a);
  const Tin* W = static_cast<const Tin*>(a.w);

  std::int64_t rb[kTM], ri[kTM][3];
  bool rv[kTM];
  decode_rows(m0, M, g.S, rb, ri, rv);
  const Tin* wrow[kTN];
KGATE_UNROLL
  for (int v = 0; v < kTN; ++v) {
    const std::int64_t c = c0 + v < g.csg ? c0 + v : c0;  // a column past csg computes a copy, never stored
    wrow[v] = W + (grp * g.csg + c) * g.taps * g.clg;
  }
  float acc[kTM][kTN] = {};
  // One flat loop over the taps (KD, KH, KW order): few live counters.
  const std::int32_t taps = static_cast<std::int32_t>(g.taps);
  for (std::int32_t tap = 0; tap < taps; ++tap) {
    const std::int32_t k2 = tap % g.K[2], k1 = (tap / g.K[2]) % g.K[1], k0 = tap / (g.K[2] * g.K[1]);
    const Tin* ap[kTM];
KGATE_UNROLL
    for (int u = 0; u < kTM; ++u) {
      const std::int64_t j0 = ri[u][0] * g.stride[0] - g.pad[0] + k0 * g.dil[0];
      const std::int64_t j1 = ri[u][1] * g.stride[1] - g.pad[1] + k1 * g.dil[1];
      const std::int64_t j2 = ri[u][2] * g.stride[2] - g.pad[2] + k2 * g.dil[2];
      const bool in = rv[u] && j0 >= 0 && j0 < g.L[0] && j1 >= 0 && j1 < g.L[1] && j2 >= 0 && j2 < g.L[2];
      ap[u] = in ? A + ((((rb[u] * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl + grp * g.clg) : nullptr;
    }
    const std::int64_t woff = std::int64_t{tap} * g.clg;
    for (std::int32_t q = 0; q < g.clg; ++q) {
      float b[kTN];
KGATE_UNROLL
      for (int v = 0; v < kTN; ++v) b[v] = to_f32(wrow[v][woff + q]);
      tile_step<Tin>(acc, ap, q, b);
    }
  }
  Tout* O = static_cast<Tout*>(a.out);
  const Tin* B = static_cast<const Tin*>(a.bias);
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (!rv[u]) continue;
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v) {
      const std::int64_t c = grp * g.csg + c0 + v;
      if (c0 + v >= g.csg) continue;
      float y = acc[u][v];
      if (B) y = y + to_f32(B[c]);
      O[(m0 + u) * g.cs + c] = from_f32<Tout>(y);
    }
  }
}

// ---------------------------------------------------------------------------
// contract on matrix cores.

inline constexpr int kWM = 2, kWN = 2;  // atoms per wave along M and N

template <class T>
KGATE_DEVICE std::uint16_t bits_of(T v) { return v.bits; }

template <class Atom, class Tin, class Tout>
KGATE_KERNEL_BOUNDS(conv_contract_mma, 64, GemmArgs a) {
  namespace mma = kgate::rt::mma;
  constexpr int TM = kWM * Atom::M, TN = kWN * Atom::N;
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const std::int64_t col_tiles = ceil_div(g.csg, TN);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * TN;
  const std::int64_t m0 = static_cast<std::int64_t>(rt::block_idx().x) * TM;
  const std::int64_t M = g.n * g.s_pos;
  const Tin* A = static_cast<const Tin*>(a.a);
  const Tin* W = static_cast<const Tin*>(a.w);
  KGATE_LDS(off, std::int64_t, TM);  // per tap: offset of row r's channel 0 in A, or -1
  mma::c_frag<Atom> acc[kWM][kWN];
KGATE_UNROLL
  for (int u = 0; u < kWM; ++u)
KGATE_UNROLL
    for (int v = 0; v < kWN; ++v) acc[u][v] = mma::zero_c<Atom>();
  std::int64_t tap = 0;
  for (std::int32_t k0 = 0; k0 < g.K[0]; ++k0)
    for (std::int32_t k1 = 0; k1 < g.K[1]; ++k1)
      for (std::int32_t k2 = 0; k2 < g.K[2]; ++k2, ++tap) {
        for (int r = t; r < TM; r += Atom::lanes) {
          std::int64_t m = m0 + r, o = -1;
          if (m < M) {
            const std::int64_t i2 = m % g.S[2]; m /= g.S[2];
            const std::int64_t i1 = m % g.S[1]; m /= g.S[1];
            const std::int64_t i0 = m % g.S[0];
            const std::int64_t b = m / g.S[0];
            const std::int64_t j0 = i0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
            const std::int64_t j1 = i1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
            const std::int64_t j2 = i2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
            if (j0 >= 0 && j0 < g.L[0] && j1 >= 0 && j1 < g.L[1] && j2 >= 0 && j2 < g.L[2])
              o = (((b * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl + grp * g.clg;
          }
          off[r] = o;
        }
        rt::barrier();
        for (std::int64_t q0 = 0; q0 < g.clg; q0 += Atom::K) {
          mma::a_frag<Atom> af[kWM];
          mma::b_frag<Atom> bf[kWN];
KGATE_UNROLL
          for (int u = 0; u < kWM; ++u)
            af[u] = mma::load_a<Atom>([&](int i, int k) -> std::uint16_t {
              const std::int64_t o = off[u * Atom::M + i];
              const std::int64_t q = q0 + k;
              return o >= 0 && q < g.clg ? bits_of(A[o + q]) : std::uint16_t{0};
            });
KGATE_UNROLL
          for (int v = 0; v < kWN; ++v)
            bf[v] = mma::load_b<Atom>([&](int k, int j) -> std::uint16_t {
              const std::int64_t c = c0 + v * Atom::N + j, q = q0 + k;
              return c < g.csg && q < g.clg ? bits_of(W[((grp * g.csg + c) * g.taps + tap) * g.clg + q])
                                            : std::uint16_t{0};
            });
KGATE_UNROLL
          for (int u = 0; u < kWM; ++u)
KGATE_UNROLL
            for (int v = 0; v < kWN; ++v) acc[u][v] = mma::mma<Atom>(af[u], bf[v], acc[u][v]);
        }
        rt::barrier();  // every lane is done with off[] before the next tap rewrites it
      }
  Tout* O = static_cast<Tout*>(a.out);
  const Tin* B = static_cast<const Tin*>(a.bias);
KGATE_UNROLL
  for (int u = 0; u < kWM; ++u)
KGATE_UNROLL
    for (int v = 0; v < kWN; ++v)
      mma::visit_c<Atom>(acc[u][v], [&](int i, int j, float y) {
        const std::int64_t m = m0 + u * Atom::M + i, c = c0 + v * Atom::N + j;
        if (m >= M || c >= g.csg) return;
        if (B) y = y + to_f32(B[grp * g.csg + c]);
        O[m * g.cs + grp * g.csg + c] = from_f32<Tout>(y);
      });
}

// ---------------------------------------------------------------------------
// scatter: out on the large side, one stride phase per grid z.

// (r mod s) for any sign of r, s > 0.
KGATE_HD constexpr std::int64_t pos_mod(std::int64_t r, std::int64_t s) { return ((r % s) + s) % s; }

template <class Tin, class Tout, bool kOneTap>
KGATE_KERNEL_BOUNDS(conv_scatter, kThreads, GemmArgs a) {
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const int bm = kThreads / a.bn;
  // Phase coordinates, tap bounds and tap offsets are 32-bit (extents,
  // strides and dilations are at most 2^24, 1024 and 1024).
  std::int32_t ph[3], T[3];
  {
    std::int32_t z = static_cast<std::int32_t>(rt::block_idx().z);
    ph[2] = z % g.stride[2]; z /= g.stride[2];
    ph[1] = z % g.stride[1];
    ph[0] = z / g.stride[1];
  }
KGATE_UNROLL
  for (int x = 0; x < 3; ++x) T[x] = ph[x] < g.L[x] ? static_cast<std::int32_t>(ceil_div(g.L[x] - ph[x], g.stride[x])) : 0;
  const std::int64_t M = std::int64_t{g.n} * T[0] * T[1] * T[2];
  const std::int64_t col_tiles = ceil_div(g.clg, static_cast<std::int64_t>(kTN) * a.bn);
  const std::int64_t grp = rt::block_idx().y / col_tiles;
  const std::int64_t c0 = (rt::block_idx().y % col_tiles) * kTN * a.bn + (t % a.bn) * kTN;
  const std::int64_t m0 = static_cast<std::int64_t>(rt::block_idx().x) * kTM * bm + (t / a.bn) * kTM;
  // The phase's taps, in (KD, KH, KW) order: per axis, k with
  // (ph + pad - k*dil) divisible by the stride (with kOneTap, k = s and
  // dil = 1, exactly k = (ph + pad) mod s, computed in place). Otherwise
  // work-item 0 lists each tap and its source offsets (ph + pad - k*dil) /
  // stride in LDS for the workgroup (at most kMaxPhaseTaps: is_supported).
  KGATE_LDS(ptap, std::int32_t, 4 * kMaxPhaseTaps);
  KGATE_LDS(pcount, std::int32_t, 1);
  std::int32_t ntaps = 1;
  if constexpr (!kOneTap) {
    if (t == 0) {
      std::int32_t count = 0;
      for (std::int32_t k0 = 0; k0 < g.K[0]; ++k0) {
        const std::int32_t r0 = ph[0] + g.pad[0] - k0 * g.dil[0];
        if (pos_mod(r0, g.stride[0]) != 0) continue;
        for (std::int32_t k1 = 0; k1 < g.K[1]; ++k1) {
          const std::int32_t r1 = ph[1] + g.pad[1] - k1 * g.dil[1];
          if (pos_mod(r1, g.stride[1]) != 0) continue;
          for (std::int32_t k2 = 0; k2 < g.K[2]; ++k2) {
            const std::int32_t r2 = ph[2] + g.pad[2] - k2 * g.dil[2];
            if (pos_mod(r2, g.stride[2]) != 0) continue;
            ptap[4 * count] = (k0 * g.K[1] + k1) * g.K[2] + k2;
            ptap[4 * count + 1] = r0 / g.stride[0];
            ptap[4 * count + 2] = r1 / g.stride[1];
            ptap[4 * count + 3] = r2 / g.stride[2];
            ++count;
          }
        }
      }
      pcount[0] = count;
    }
    rt::barrier();
    ntaps = pcount[0];
  }
  if (m0 >= M || c0 >= g.clg) return;
  const Tin* A = static_cast<const Tin*>(a.a);
  const Tin* W = static_cast<const Tin*>(a.w);

  std::int64_t rb[kTM], rt_[kTM][3];
  bool rv[kTM];
  decode_rows(m0, M, T, rb, rt_, rv);
  std::int64_t cc[kTN];
KGATE_UNROLL
  for (int v = 0; v < kTN; ++v) cc[v] = grp * g.clg + (c0 + v < g.clg ? c0 + v : c0);
  float acc[kTM][kTN] = {};
  for (std::int32_t e = 0; e < ntaps; ++e) {
    std::int64_t tap;
    std::int32_t o0, o1, o2;
    if constexpr (kOneTap) {
      const std::int32_t k0 = static_cast<std::int32_t>(pos_mod(ph[0] + g.pad[0], g.stride[0]));
      const std::int32_t k1 = static_cast<std::int32_t>(pos_mod(ph[1] + g.pad[1], g.stride[1]));
      const std::int32_t k2 = static_cast<std::int32_t>(pos_mod(ph[2] + g.pad[2], g.stride[2]));
      tap = (std::int64_t{k0} * g.K[1] + k1) * g.K[2] + k2;
      o0 = (ph[0] + g.pad[0] - k0) / g.stride[0];
      o1 = (ph[1] + g.pad[1] - k1) / g.stride[1];
      o2 = (ph[2] + g.pad[2] - k2) / g.stride[2];
    } else {
      tap = ptap[4 * e];
      o0 = ptap[4 * e + 1];
      o1 = ptap[4 * e + 2];
      o2 = ptap[4 * e + 3];
    }
    const Tin* ap[kTM];
KGATE_UNROLL
    for (int u = 0; u < kTM; ++u) {
      const std::int64_t i0 = rt_[u][0] + o0, i1 = rt_[u][1] + o1, i2 = rt_[u][2] + o2;
      const bool in = rv[u] && i0 >= 0 && i0 < g.S[0] && i1 >= 0 && i1 < g.S[1] && i2 >= 0 && i2 < g.S[2];
      ap[u] = in ? A + ((((rb[u] * g.S[0] + i0) * g.S[1] + i1) * g.S[2] + i2) * g.cs + grp * g.csg) : nullptr;
    }
    const Tin* wq = W + (grp * g.csg * g.taps + tap) * g.clg;
    const std::int64_t wstride = g.taps * g.clg;
    for (std::int32_t q = 0; q < g.csg; ++q, wq += wstride) {
      float b[kTN];
KGATE_UNROLL
      for (int v = 0; v < kTN; ++v) b[v] = to_f32(wq[cc[v] - grp * g.clg]);
      tile_step<Tin>(acc, ap, q, b);
    }
  }
  Tout* O = static_cast<Tout*>(a.out);
  const Tin* B = static_cast<const Tin*>(a.bias);
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (!rv[u]) continue;
    const std::int64_t j0 = ph[0] + g.stride[0] * rt_[u][0];
    const std::int64_t j1 = ph[1] + g.stride[1] * rt_[u][1];
    const std::int64_t j2 = ph[2] + g.stride[2] * rt_[u][2];
    const std::int64_t base = (((rb[u] * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl;
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v) {
      if (c0 + v >= g.clg) continue;
      const std::int64_t c = grp * g.clg + c0 + v;
      float y = acc[u][v];
      if (B) y = y + to_f32(B[c]);
      O[base + c] = from_f32<Tout>(y);
    }
  }
}

// ---------------------------------------------------------------------------
// wgrad: one slice of K per grid z; partials to the workspace.

template <class Tin>
KGATE_KERNEL_BOUNDS(conv_wgrad, kThreads, WgradArgs a) {
  const Geom& g = a.g;
  const int t = static_cast<int>(rt::thread_idx().x);
  const int bm = kThreads / a.bn;
  const std::int64_t col_tiles = ceil_div(g.clg, static_cast<std::int64_t>(kTN) * a.bn);
  const std::int64_t row_tiles = ceil_div(g.csg, static_cast<std::int64_t>(kTM) * bm);
  const std::int64_t tap = rt::block_idx().x / col_tiles;
  const std::int64_t l0 = (rt::block_idx().x % col_tiles) * kTN * a.bn + (t % a.bn) * kTN;
  const std::int64_t grp = rt::block_idx().y / row_tiles;
  const std::int64_t c0 = (rt::block_idx().y % row_tiles) * kTM * bm + (t / a.bn) * kTM;
  if (c0 >= g.csg || l0 >= g.clg) return;
  const std::int64_t split = rt::block_idx().z;
  const std::int64_t K = g.n * g.s_pos;
  const std::int64_t r_begin = split * a.slice;
  const std::int64_t r_end = r_begin + a.slice < K ? r_begin + a.slice : K;
  const std::int64_t k2 = tap % g.K[2], k1 = (tap / g.K[2]) % g.K[1], k0 = tap / (g.K[2] * g.K[1]);
  const std::int64_t d0 = k0 * g.dil[0] - g.pad[0], d1 = k1 * g.dil[1] - g.pad[1], d2 = k2 * g.dil[2] - g.pad[2];
  const Tin* Sm = static_cast<const Tin*>(a.small);
  const Tin* Lg = static_cast<const Tin*>(a.large);
  // Columns past the tile's end read a valid copy, never stored.
  int cu[kTM], lv[kTN];
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) cu[u] = c0 + u < g.csg ? u : 0;
KGATE_UNROLL
  for (int v = 0; v < kTN; ++v) lv[v] = l0 + v < g.clg ? v : 0;
  float acc[kTM][kTN] = {};
  // (bn, i0, i1, i2) of row r_begin, then advanced row by row.
  std::int64_t r = r_begin;
  std::int64_t i2 = r % g.S[2], i1 = (r / g.S[2]) % g.S[1], i0 = (r / (std::int64_t{g.S[2]} * g.S[1])) % g.S[0];
  std::int64_t bn = r / g.s_pos;
  for (; r < r_end; ++r) {
    const std::int64_t j0 = i0 * g.stride[0] + d0, j1 = i1 * g.stride[1] + d1, j2 = i2 * g.stride[2] + d2;
    if (j0 >= 0 && j0 < g.L[0] && j1 >= 0 && j1 < g.L[1] && j2 >= 0 && j2 < g.L[2]) {
      const Tin* sp = Sm + r * g.cs + grp * g.csg + c0;
      const Tin* lp = Lg + ((((bn * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl + grp * g.clg + l0);
      float x[kTM], y[kTN];
KGATE_UNROLL
      for (int u = 0; u < kTM; ++u) x[u] = to_f32(sp[cu[u]]);
KGATE_UNROLL
      for (int v = 0; v < kTN; ++v) y[v] = to_f32(lp[lv[v]]);
KGATE_UNROLL
      for (int u = 0; u < kTM; ++u)
KGATE_UNROLL
        for (int v = 0; v < kTN; ++v) acc[u][v] = acc[u][v] + x[u] * y[v];
    }
    if (++i2 == g.S[2]) {
      i2 = 0;
      if (++i1 == g.S[1]) {
        i1 = 0;
        if (++i0 == g.S[0]) {
          i0 = 0;
          ++bn;
        }
      }
    }
  }
  const std::int64_t numel = g.cs * g.taps * g.clg;
  float* out = a.ws + split * numel;
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (c0 + u >= g.csg) continue;
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v) {
      if (l0 + v >= g.clg) continue;
      out[((grp * g.csg + c0 + u) * g.taps + tap) * g.clg + l0 + v] = acc[u][v];
    }
  }
}

// ---------------------------------------------------------------------------
// Column sums of a [rows][cols] tensor (dbias), one slice of rows per grid y.

template <class Tin>
KGATE_KERNEL_BOUNDS(conv_colsum, kThreads, ColsumArgs a) {
  const std::int64_t c = static_cast<std::int64_t>(rt::block_idx().x) * kThreads + rt::thread_idx().x;
  if (c >= a.cols) return;
  const std::int64_t split = rt::block_idx().y;
  const std::int64_t r_begin = split * a.slice;
  const std::int64_t r_end = r_begin + a.slice < a.rows ? r_begin + a.slice : a.rows;
  const Tin* x = static_cast<const Tin*>(a.x);
  float acc = 0.0f;
  for (std::int64_t r = r_begin; r < r_end; ++r) acc = acc + to_f32(x[r * a.cols + c]);
  a.ws[split * a.cols + c] = acc;
}

// ---------------------------------------------------------------------------
// The fixed tree over split partials: level w adds partial s + w into s for
// s = 0, 2w, 4w, ... (w = 1, 2, 4, ...), then element e of partial 0 is the
// result, rounded once to Tout.

template <class Tout>
KGATE_KERNEL_BOUNDS(conv_tree, kThreads, TreeArgs a) {
  const std::int64_t e = static_cast<std::int64_t>(rt::block_idx().x) * kThreads + rt::thread_idx().x;
  if (e >= a.numel) return;
  float* p = a.ws + e;
  for (std::int64_t w = 1; w < a.splits; w *= 2)
    for (std::int64_t s = 0; s + w < a.splits; s += 2 * w) {
      const float l = p[s * a.numel], r = p[(s + w) * a.numel];
      p[s * a.numel] = l + r;
    }
  static_cast<Tout*>(a.out)[e] = from_f32<Tout>(p[0]);
}

}  // namespace kgate::kernels::cv
