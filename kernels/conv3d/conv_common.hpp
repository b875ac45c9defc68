// Helpers every conv kernel shares: row decoding, stride phases and their
// tap lists, output rows, the bias epilogue and the portable tile's steps.
// One source for every backend (kernels/runtime/runtime.hpp); the
// design is conv_kernels.hpp's.
#pragma once

#include "kernels/conv3d/conv_args.hpp"

namespace kgate::kernels::cv {

// One K step of a portable register tile: acc[u][v] += x_u * b[v], x_u the
// channel-q element of row u's source (rows without a source at this tap,
// ap[u] null, take no term).
template <class Tin>
KGATE_DEVICE void tile_step(AccTile& acc, const Tin* const (&ap)[kTM], std::int32_t q, const ColVec& b) {
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (!ap[u]) continue;
    const float x = to_f32(ap[u][q]);
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v) acc[u][v] = acc[u][v] + x * b[v];
  }
}

// Row m of a GEMM over M = n * ext[0] * ext[1] * ext[2] positions: its batch
// index b and coordinates i.
[[gnu::always_inline]] KGATE_DEVICE void decode_row(std::int64_t m, const std::int32_t (&ext)[3], std::int64_t& b, std::int64_t (&i)[3]) {
  i[2] = m % ext[2]; m /= ext[2];
  i[1] = m % ext[1]; m /= ext[1];
  i[0] = m % ext[0];
  b = m / ext[0];
}

// Rows m0 .. m0 + kTM - 1: each row's batch index and coordinates; a row
// past M (valid false) decodes as row m0 so its loads stay in bounds.
KGATE_DEVICE void decode_rows(std::int64_t m0, std::int64_t M, const std::int32_t (&ext)[3], std::int64_t (&rb)[kTM],
                              std::int64_t (&ri)[kTM][3], bool (&rv)[kTM]) {
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    rv[u] = m0 + u < M;
    decode_row(rv[u] ? m0 + u : m0, ext, rb[u], ri[u]);
  }
}

// The helpers below are always inlined: called from several kernels, the
// gfx942 compiler otherwise may keep them as calls whose ABI costs scalar
// registers (spills in conv_scatter).

// (r mod s) for any sign of r, s > 0.
KGATE_HD constexpr std::int64_t pos_mod(std::int64_t r, std::int64_t s) { return ((r % s) + s) % s; }

// Stride phase z of the scatter family (grid z): per axis its residue ph and
// the number T of large positions on its lattice.
[[gnu::always_inline]] KGATE_DEVICE void phase_of(const Geom& g, std::int32_t z, std::int32_t (&ph)[3], std::int32_t (&T)[3]) {
  ph[2] = z % g.stride[2]; z /= g.stride[2];
  ph[1] = z % g.stride[1];
  ph[0] = z / g.stride[1];
KGATE_UNROLL
  for (int x = 0; x < 3; ++x) T[x] = ph[x] < g.L[x] ? static_cast<std::int32_t>(ceil_div(g.L[x] - ph[x], g.stride[x])) : 0;
}

// Whether kernel index k of an axis lands on stride phase ph's lattice, and
// then the source offset o = (ph + pad - k*dil) / stride of the lattice
// position. 32-bit (the operands stay below 2^31 within ConvProblem's
// limits), and no division on a stride-1 axis: one work-item runs this for
// every tap while its workgroup waits.
[[gnu::always_inline]] KGATE_DEVICE bool on_lattice(std::int32_t ph, std::int32_t pad, std::int32_t k, std::int32_t dil,
                                                    std::int32_t stride, std::int32_t& o) {
  const std::int32_t r = ph + pad - k * dil;
  if (stride == 1) {
    o = r;
    return true;
  }
  if (r % stride != 0) return false;  // divisible, whatever the sign of r
  o = r / stride;
  return true;
}

// The taps of stride phase ph, in (KD, KH, KW) order: per axis, k with
// (ph + pad - k*dil) divisible by the stride. Written as (tap, o0, o1, o2)
// quadruples, o = (ph + pad - k*dil) / stride the source offset of the
// lattice position (at most kMaxPhaseTaps: is_supported); returns the count.
// One work-item lists them for its workgroup.
[[gnu::always_inline]] KGATE_DEVICE std::int32_t list_phase_taps(const Geom& g, const std::int32_t (&ph)[3], const rt::lds_array<std::int32_t>& ptap) {
  std::int32_t count = 0, o0, o1, o2;
  for (std::int32_t k0 = 0; k0 < g.K[0]; ++k0) {
    if (!on_lattice(ph[0], g.pad[0], k0, g.dil[0], g.stride[0], o0)) continue;
    for (std::int32_t k1 = 0; k1 < g.K[1]; ++k1) {
      if (!on_lattice(ph[1], g.pad[1], k1, g.dil[1], g.stride[1], o1)) continue;
      for (std::int32_t k2 = 0; k2 < g.K[2]; ++k2) {
        if (!on_lattice(ph[2], g.pad[2], k2, g.dil[2], g.stride[2], o2)) continue;
        ptap[4 * count] = (k0 * g.K[1] + k1) * g.K[2] + k2;
        ptap[4 * count + 1] = o0;
        ptap[4 * count + 2] = o1;
        ptap[4 * count + 3] = o2;
        ++count;
      }
    }
  }
  return count;
}

// list_phase_taps for a workgroup of `threads` work-items, work-item t of
// them: with stride 1 on every axis (one phase, every tap on it) the
// work-items write the entries in parallel, entry e for tap e; otherwise
// work-item 0 lists them. The caller's barrier makes
// ptap and pcount[0] (the count) visible.
[[gnu::always_inline]] KGATE_DEVICE void list_phase_taps(const Geom& g, const std::int32_t (&ph)[3], const rt::lds_array<std::int32_t>& ptap,
                                                         const rt::lds_array<std::int32_t>& pcount, int t, int threads) {
  if (g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1) {
    const std::int32_t taps = static_cast<std::int32_t>(g.taps);
    for (std::int32_t e = t; e < taps; e += threads) {
      const std::int32_t k[3] = {e / (g.K[2] * g.K[1]), (e / g.K[2]) % g.K[1], e % g.K[2]};
      ptap[4 * e] = e;
KGATE_UNROLL
      for (int x = 0; x < 3; ++x) {
        std::int32_t o;
        on_lattice(ph[x], g.pad[x], k[x], g.dil[x], 1, o);  // stride 1: every k is on the lattice
        ptap[4 * e + 1 + x] = o;
      }
    }
    if (t == 0) pcount[0] = taps;
  } else if (t == 0) {
    pcount[0] = list_phase_taps(g, ph, ptap);
  }
}

// The element offset of channel 0 of the large position ph + stride * t of
// batch b (a scatter output row with phase coordinates t).
[[gnu::always_inline]] KGATE_DEVICE std::int64_t lattice_offset(const Geom& g, const std::int32_t (&ph)[3], std::int64_t b, const std::int64_t (&t)[3]) {
  const std::int64_t j0 = ph[0] + g.stride[0] * t[0], j1 = ph[1] + g.stride[1] * t[1], j2 = ph[2] + g.stride[2] * t[2];
  return (((b * g.L[0] + j0) * g.L[1] + j1) * g.L[2] + j2) * g.cl;
}

// The element offset of channel 0 of output row m: on the small side
// (contract) row m itself; on the large side (scatter) the lattice position
// of row m's phase coordinates (extents T).
template <bool kScatter>
KGATE_DEVICE std::int64_t out_row(const Geom& g, const std::int32_t (&ph)[3], const std::int32_t (&T)[3], std::int64_t m) {
  if constexpr (!kScatter) {
    return m * g.cs;
  } else {
    std::int64_t b, i[3];
    decode_row(m, T, b, i);
    return lattice_offset(g, ph, b, i);
  }
}

// The epilogue of the contract and scatter families: the fp32 sum y of
// output channel c (counted over all groups) plus the bias, if any; the
// result is rounded once to Tout.
template <class Tin>
KGATE_DEVICE float with_bias(const Tin* B, std::int64_t c, float y) {
  return B ? y + to_f32(B[c]) : y;
}
// One output element: channel c of the row at element offset `row`.
template <class Tin, class Tout>
KGATE_DEVICE void put_output(Tout* O, const Tin* B, std::int64_t row, std::int64_t c, float y) {
  O[row + c] = from_f32<Tout>(with_bias(B, c, y));
}

// A portable register tile's outputs: the rows that exist (rv) at element
// offsets row_of(u), columns c0 + v below ncols of group grp.
template <class Tin, class Tout, class RowOf>
KGATE_DEVICE void store_tile(const GemmArgs& a, RowOf&& row_of, const bool (&rv)[kTM], std::int64_t grp, std::int64_t c0,
                             std::int64_t ncols, const AccTile& acc) {
  Tout* O = static_cast<Tout*>(a.out);
  const Tin* B = static_cast<const Tin*>(a.bias);
KGATE_UNROLL
  for (int u = 0; u < kTM; ++u) {
    if (!rv[u]) continue;
    const std::int64_t row = row_of(u);
KGATE_UNROLL
    for (int v = 0; v < kTN; ++v)
      if (c0 + v < ncols) put_output<Tin, Tout>(O, B, row, grp * ncols + c0 + v, acc[u][v]);
  }
}

}  // namespace kgate::kernels::cv
