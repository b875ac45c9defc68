// Internal: the small/large geometry of ref_conv.hpp and the term enumeration
// the direct, dot2, mpfr and absolute references and the device reference
// (reference/device/, KGATE_HD) share. Not a public API.
#pragma once

#include <cstdint>

#include "reference/host_device.hpp"
#include "reference/problem.hpp"

// The geometry's axes are std::array, whose constexpr members device code
// may call on HIP, and on nvcc only with --expt-relaxed-constexpr (the
// device reference's CUDA build passes it). Elsewhere under nvcc (the
// production kernels' translation units, which carry their own device
// geometry) these functions stay host-only.
#if defined(__CUDACC__) && !defined(__HIP__) && !defined(__CUDACC_RELAXED_CONSTEXPR__)
#define KGATE_GEOM_HD
#else
#define KGATE_GEOM_HD KGATE_HD
#endif

namespace kgate::ref::detail {

enum class Kind : std::uint8_t { contract, scatter, wgrad };

struct ConvGeom {
  std::int64_t n = 1, groups = 1;
  std::int64_t cs = 1, cl = 1;    // channels of the small and the large side
  std::int64_t csg = 1, clg = 1;  // per group
  Axis3 S{}, L{}, K{}, stride{}, pad{}, dil{};
  std::int64_t s_pos = 1, l_pos = 1, taps = 1;  // products of S, L, K

  KGATE_GEOM_HD std::int64_t small_at(std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t c) const {
    return (((b * S[0] + i0) * S[1] + i1) * S[2] + i2) * cs + c;
  }
  KGATE_GEOM_HD std::int64_t large_at(std::int64_t b, std::int64_t j0, std::int64_t j1, std::int64_t j2, std::int64_t c) const {
    return (((b * L[0] + j0) * L[1] + j1) * L[2] + j2) * cl + c;
  }
  KGATE_GEOM_HD std::int64_t w_at(std::int64_t c_small, std::int64_t k0, std::int64_t k1, std::int64_t k2, std::int64_t c_large_local) const {
    return (((c_small * K[0] + k0) * K[1] + k1) * K[2] + k2) * clg + c_large_local;
  }
};

// What each operator-direction is in the geometry.
struct DirPlan {
  Kind kind;
  Role a;    // contract: the large operand; scatter: the small operand; wgrad: small
  Role b;    // contract/scatter: w; wgrad: the large operand
  Role out;  // y, dx or dw
  bool bias_on_out = false;  // forward with bias: out += b[c]
  bool db = false;           // bwd_weight with bias: db = sum of dy
  bool dy_is_small = false;  // which side dy is on (for db)
};

inline ConvGeom make_geom(const ConvProblem& p) {
  ConvGeom g;
  const bool t = p.op == ConvOp::conv_transpose3d;
  g.n = p.n;
  g.groups = p.groups;
  g.cs = t ? p.cin : p.cout;
  g.cl = t ? p.cout : p.cin;
  g.csg = g.cs / p.groups;
  g.clg = g.cl / p.groups;
  g.S = t ? p.in : p.out();
  g.L = t ? p.out() : p.in;
  g.K = p.kernel;
  g.stride = p.stride;
  g.pad = p.pad_front;
  g.dil = p.dilation;
  g.s_pos = g.S[0] * g.S[1] * g.S[2];
  g.l_pos = g.L[0] * g.L[1] * g.L[2];
  g.taps = g.K[0] * g.K[1] * g.K[2];
  return g;
}

inline DirPlan dir_plan(const ConvProblem& p) {
  const bool t = p.op == ConvOp::conv_transpose3d;
  switch (p.dir) {
    case ConvDir::fwd:
      return t ? DirPlan{Kind::scatter, Role::x, Role::w, Role::y, p.bias, false, false}
               : DirPlan{Kind::contract, Role::x, Role::w, Role::y, p.bias, false, false};
    case ConvDir::bwd_data:
      return t ? DirPlan{Kind::contract, Role::dy, Role::w, Role::dx, false, false, false}
               : DirPlan{Kind::scatter, Role::dy, Role::w, Role::dx, false, false, true};
    case ConvDir::bwd_weight:
      return t ? DirPlan{Kind::wgrad, Role::x, Role::dy, Role::dw, false, p.bias, false}
               : DirPlan{Kind::wgrad, Role::dy, Role::x, Role::dw, false, p.bias, true};
  }
  return {};
}

// Calls f(a[ia], b[ib]) for every term of output element `out` (a linear
// index into the output tensor of `kind`), in a fixed order: taps outermost,
// then channels (contract, scatter), or batch then positions (wgrad).
// contract only: `bt`, when given, is b transposed to [tap][clg][cs] (tap =
// (k0 K1 + k1) K2 + k2), the same values read from where neighbouring
// outputs' weights are neighbours (the device reference's coalesced layout);
// the terms and their order do not change.
template <class F>
KGATE_GEOM_HD void for_each_term(const ConvGeom& g, Kind kind, const double* a, const double* b, std::int64_t out, F&& f,
                                 const double* bt = nullptr) {
  switch (kind) {
    case Kind::contract: {
      const std::int64_t c = out % g.cs;
      std::int64_t r = out / g.cs;
      const std::int64_t i2 = r % g.S[2]; r /= g.S[2];
      const std::int64_t i1 = r % g.S[1]; r /= g.S[1];
      const std::int64_t i0 = r % g.S[0];
      const std::int64_t bn = r / g.S[0];
      const std::int64_t grp = c / g.csg;
      for (std::int64_t k0 = 0; k0 < g.K[0]; ++k0) {
        const std::int64_t j0 = i0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
        if (j0 < 0 || j0 >= g.L[0]) continue;
        for (std::int64_t k1 = 0; k1 < g.K[1]; ++k1) {
          const std::int64_t j1 = i1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
          if (j1 < 0 || j1 >= g.L[1]) continue;
          for (std::int64_t k2 = 0; k2 < g.K[2]; ++k2) {
            const std::int64_t j2 = i2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
            if (j2 < 0 || j2 >= g.L[2]) continue;
            const double* ap = a + g.large_at(bn, j0, j1, j2, grp * g.clg);
            if (bt) {
              const double* bq = bt + ((k0 * g.K[1] + k1) * g.K[2] + k2) * g.clg * g.cs + c;
              for (std::int64_t q = 0; q < g.clg; ++q) f(ap[q], bq[q * g.cs]);
            } else {
              const double* bp = b + g.w_at(c, k0, k1, k2, 0);
              for (std::int64_t q = 0; q < g.clg; ++q) f(ap[q], bp[q]);
            }
          }
        }
      }
      return;
    }
    case Kind::scatter: {
      const std::int64_t c = out % g.cl;
      std::int64_t r = out / g.cl;
      const std::int64_t j2 = r % g.L[2]; r /= g.L[2];
      const std::int64_t j1 = r % g.L[1]; r /= g.L[1];
      const std::int64_t j0 = r % g.L[0];
      const std::int64_t bn = r / g.L[0];
      const std::int64_t grp = c / g.clg, cll = c % g.clg;
      // i = (j + pad - k*dil) / stride when that divides exactly and 0 <= i < S.
      auto src = [&](int ax, std::int64_t j, std::int64_t k, std::int64_t& i) {
        const std::int64_t t = j + g.pad[ax] - k * g.dil[ax];
        if (t < 0 || t % g.stride[ax] != 0) return false;
        i = t / g.stride[ax];
        return i < g.S[ax];
      };
      for (std::int64_t k0 = 0; k0 < g.K[0]; ++k0) {
        std::int64_t i0, i1, i2;
        if (!src(0, j0, k0, i0)) continue;
        for (std::int64_t k1 = 0; k1 < g.K[1]; ++k1) {
          if (!src(1, j1, k1, i1)) continue;
          for (std::int64_t k2 = 0; k2 < g.K[2]; ++k2) {
            if (!src(2, j2, k2, i2)) continue;
            const double* ap = a + g.small_at(bn, i0, i1, i2, grp * g.csg);
            for (std::int64_t q = 0; q < g.csg; ++q) f(ap[q], b[g.w_at(grp * g.csg + q, k0, k1, k2, cll)]);
          }
        }
      }
      return;
    }
    case Kind::wgrad: {
      const std::int64_t cll = out % g.clg;
      std::int64_t r = out / g.clg;
      const std::int64_t k2 = r % g.K[2]; r /= g.K[2];
      const std::int64_t k1 = r % g.K[1]; r /= g.K[1];
      const std::int64_t k0 = r % g.K[0];
      const std::int64_t c = r / g.K[0];  // small channel
      const std::int64_t grp = c / g.csg;
      for (std::int64_t bn = 0; bn < g.n; ++bn)
        for (std::int64_t i0 = 0; i0 < g.S[0]; ++i0) {
          const std::int64_t j0 = i0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
          if (j0 < 0 || j0 >= g.L[0]) continue;
          for (std::int64_t i1 = 0; i1 < g.S[1]; ++i1) {
            const std::int64_t j1 = i1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
            if (j1 < 0 || j1 >= g.L[1]) continue;
            for (std::int64_t i2 = 0; i2 < g.S[2]; ++i2) {
              const std::int64_t j2 = i2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
              if (j2 < 0 || j2 >= g.L[2]) continue;
              f(a[g.small_at(bn, i0, i1, i2, c)], b[g.large_at(bn, j0, j1, j2, grp * g.clg + cll)]);
            }
          }
        }
      return;
    }
  }
}

}  // namespace kgate::ref::detail
