// MMA emulation for the host backend: one wave collective per instruction.
// The lanes' fragments are placed into A, B and C by the atom's layout
// tables (mma.hpp), every output element is computed by the numeric model
// (mma_numerics.hpp) and scattered back by the same tables.
//
// Checks: the wave size must be the atom's (64 for gfx942, 32 for sm90), the
// configured target must be the atom's, and every lane takes part (on the
// device inactive lanes still execute the instruction with whatever their
// registers hold; a kernel that relies on that is not portable).
#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/runtime/host/mma_numerics.hpp"
#include "kernels/runtime/mma.hpp"

namespace kgate::rt::host::detail {

namespace {

namespace nm = kgate::rt::numerics;

template <class Atom>
nm::Operand decode(const unsigned char* p, int r, MfmaModel model) {
  if constexpr (Atom::type == MmaType::bf16 || Atom::type == MmaType::f16) {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * r, 2);
    return Atom::type == MmaType::bf16 ? nm::decode_bf16(h) : nm::decode_f16(h);
  } else {
    float f;
    std::memcpy(&f, p + 4 * r, 4);
    // xf32 truncates its inputs to tf32, except in the exact model.
    return Atom::type == MmaType::xf32 && model != MfmaModel::exact ? nm::decode_tf32(f) : nm::decode_f32(f);
  }
}

template <class Atom>
constexpr int frac_bits(MfmaModel model) {
  switch (Atom::type) {
    case MmaType::bf16: return nm::kFracBf16;
    case MmaType::f16: return nm::kFracF16;
    case MmaType::xf32: return model == MfmaModel::exact ? nm::kFracF32 : nm::kFracTf32;
    case MmaType::f32: return nm::kFracF32;
  }
  return 0;
}

[[noreturn]] void misuse(const char* name, const std::string& what) { throw Error(std::string(name) + ": " + what); }

}  // namespace

template <class Atom>
void exec_atom(const WaveGroup& g) {
  constexpr int M = Atom::M, N = Atom::N, K = Atom::K, lanes = Atom::lanes;
  constexpr int ra = Atom::a().regs(), rb = Atom::b().regs(), rc = Atom::c().regs();
  static_assert(ra * lanes == M * K && rb * lanes == K * N && rc * lanes == M * N, "layout does not cover the tile");
  if (g.wave_size != lanes)
    misuse(Atom::name, std::string("needs a ") + std::to_string(lanes) + "-wide wave (emulated wave size is " +
                           std::to_string(g.wave_size) + ")");
  if (g.target != Atom::target)
    misuse(Atom::name, std::string("an ") + target_name(Atom::target) + " atom on the emulated " +
                           target_name(g.target) + " target");
  const lane_mask full = lanes == 64 ? ~lane_mask{0} : (lane_mask{1} << lanes) - 1;
  if (g.active != full) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(g.active));
    misuse(Atom::name, "all " + std::to_string(lanes) + " lanes must take part (active lanes " + buf + ")");
  }
  const mma::coord* amap = mma::detail::coord_table<Atom, mma::detail::opA>::value.v;  // lane-major
  const mma::coord* bmap = mma::detail::coord_table<Atom, mma::detail::opB>::value.v;
  const mma::coord* cmap = mma::detail::coord_table<Atom, mma::detail::opC>::value.v;
  const MfmaModel model = g.mfma;
  constexpr bool is_f32 = Atom::type == MmaType::f32;
  constexpr int F = frac_bits<Atom>(MfmaModel::cdna3);
  constexpr int group = Atom::type == MmaType::xf32 ? 4 : 8;
  constexpr bool cdna3_rows = !is_f32 && Atom::target == Target::gfx942;
  // The cdna3 bf16/f16 fast path: operands gathered as bits and decoded
  // branch-free, every row by cdna3_group_cols; an instruction with any Inf
  // or NaN operand goes on to the general path below.
  if constexpr (cdna3_rows && Atom::type != MmaType::xf32) {
    if (model == MfmaModel::cdna3) {
      constexpr int eb = Atom::type == MmaType::bf16 ? 8 : 5;
      std::uint16_t Ab[M][K], Bb[K][N];
      float Cf[M][N];
      for (int l = 0; l < lanes; ++l) {
        const Lane* lane = g.lanes[l];
        for (int r = 0; r < ra; ++r) {
          const mma::coord x = amap[l * ra + r];
          std::memcpy(&Ab[x.row][x.col], lane->in + 2 * r, 2);
        }
        for (int r = 0; r < rb; ++r) {
          const mma::coord x = bmap[l * rb + r];
          std::memcpy(&Bb[x.row][x.col], lane->in + 16 + 2 * r, 2);
        }
        for (int r = 0; r < rc; ++r) {
          const mma::coord x = cmap[l * rc + r];
          std::memcpy(&Cf[x.row][x.col], lane->in + 32 + 4 * r, 4);
        }
      }
      std::int32_t Am[M][K], Ae[M][K], BmT[K][N], BeT[K][N];
      bool special = false;
      for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k) special |= nm::detail::decode_ieee_finite<eb, F>(Ab[i][k], Am[i][k], Ae[i][k]);
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) special |= nm::detail::decode_ieee_finite<eb, F>(Bb[k][j], BmT[k][j], BeT[k][j]);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) special |= (kgate::bit_cast<std::uint32_t>(Cf[i][j]) & 0x7f800000u) == 0x7f800000u;
      if (!special) {
        for (int i = 0; i < M; ++i)
          for (int k0 = 0; k0 < K; k0 += group)
            nm::detail::cdna3_group_cols<group, F, N>(Am[i] + k0, Ae[i] + k0, &BmT[k0][0], &BeT[k0][0], Cf[i]);
        for (int l = 0; l < lanes; ++l) {
          Lane* lane = g.lanes[l];
          for (int r = 0; r < rc; ++r) {
            const mma::coord x = cmap[l * rc + r];
            std::memcpy(lane->out + 4 * r, &Cf[x.row][x.col], 4);
          }
        }
        return;
      }
    }
  }
  // Operands as decoded structs (the general paths) and as significand /
  // exponent arrays (the finite fast paths); B by column.
  nm::Operand A[M][K], B[N][K];
  std::int32_t Am[M][K], Ae[M][K], Bm[N][K], Be[N][K];
  float Af[is_f32 ? M : 1][K], Bf[is_f32 ? N : 1][K];
  float C[M][N], D[M][N];
  for (int l = 0; l < lanes; ++l) {
    const Lane* lane = g.lanes[l];
    for (int r = 0; r < ra; ++r) {
      const mma::coord x = amap[l * ra + r];
      A[x.row][x.col] = decode<Atom>(lane->in, r, model);
      if constexpr (is_f32) std::memcpy(&Af[x.row][x.col], lane->in + 4 * r, 4);
    }
    for (int r = 0; r < rb; ++r) {
      const mma::coord x = bmap[l * rb + r];
      B[x.col][x.row] = decode<Atom>(lane->in + 16, r, model);
      if constexpr (is_f32) std::memcpy(&Bf[x.col][x.row], lane->in + 16 + 4 * r, 4);
    }
    for (int r = 0; r < rc; ++r) {
      const mma::coord x = cmap[l * rc + r];
      std::memcpy(&C[x.row][x.col], lane->in + 32 + 4 * r, 4);
    }
  }
  // Rows of A and columns of B holding an Inf or NaN take the general path.
  bool a_special[M] = {}, b_special[N] = {};
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) {
      Am[i][k] = A[i][k].m;
      Ae[i][k] = A[i][k].e;
      a_special[i] |= A[i][k].cls != 0;
    }
  // B also k-major for the cdna3 rows (nm::detail::cdna3_group_cols).
  std::int32_t BmT[K][N], BeT[K][N];
  for (int j = 0; j < N; ++j)
    for (int k = 0; k < K; ++k) {
      Bm[j][k] = BmT[k][j] = B[j][k].m;
      Be[j][k] = BeT[k][j] = B[j][k].e;
      b_special[j] |= B[j][k].cls != 0;
    }
  for (int i = 0; i < M; ++i) {
    // A finite row: every column's groups at once; the columns that hold an
    // Inf or NaN (in B or C) are redone by the general path below.
    bool row_done = false;
    if constexpr (cdna3_rows) {
      if (model == MfmaModel::cdna3 && !a_special[i]) {
        for (int j = 0; j < N; ++j) D[i][j] = C[i][j];
        for (int k0 = 0; k0 < K; k0 += group)
          nm::detail::cdna3_group_cols<group, F, N>(Am[i] + k0, Ae[i] + k0, &BmT[k0][0], &BeT[k0][0], D[i]);
        row_done = true;
      }
    }
    for (int j = 0; j < N; ++j) {
      if (row_done) {
        if (b_special[j] || nm::decode_f32(C[i][j]).cls != 0)
          D[i][j] = nm::cdna3_dot(A[i], B[j], K, group, F, C[i][j]);
        continue;
      }
      if (model == MfmaModel::exact) {
        D[i][j] = nm::exact_dot(A[i], B[j], K, frac_bits<Atom>(MfmaModel::exact), C[i][j]);
        continue;
      }
      if constexpr (is_f32) {
        D[i][j] = nm::fma_chain(Af[i], Bf[j], K, C[i][j]);
      } else {
        const nm::Operand cc = nm::decode_f32(C[i][j]);
        const bool special = a_special[i] || b_special[j] || cc.cls != 0;
        if constexpr (Atom::target == Target::sm90) {
          D[i][j] = special ? nm::sm90_dot(A[i], B[j], K, F, C[i][j])
                            : nm::sm90_finite<K, F>(Am[i], Ae[i], Bm[j], Be[j], cc);
        } else if (special) {
          D[i][j] = nm::cdna3_dot(A[i], B[j], K, group, F, C[i][j]);
        } else {
          float acc = C[i][j];
          for (int k0 = 0; k0 < K; k0 += group)
            acc = nm::detail::cdna3_group<group, F>(Am[i] + k0, Ae[i] + k0, Bm[j] + k0, Be[j] + k0, acc);
          D[i][j] = acc;
        }
      }
    }
  }
  for (int l = 0; l < lanes; ++l) {
    Lane* lane = g.lanes[l];
    for (int r = 0; r < rc; ++r) {
      const mma::coord x = cmap[l * rc + r];
      std::memcpy(lane->out + 4 * r, &D[x.row][x.col], 4);
    }
  }
}

#define KGATE_INSTANTIATE(atom) template void exec_atom<mma::atom>(const WaveGroup&);
KGATE_MMA_ATOMS(KGATE_INSTANTIATE)
#undef KGATE_INSTANTIATE

// The raw gfx942 builtins are their atoms.
void exec_mfma_32x32x8bf16_1k(const WaveGroup& g) { exec_atom<mma::gfx942_32x32x8_bf16>(g); }
void exec_mfma_16x16x16bf16_1k(const WaveGroup& g) { exec_atom<mma::gfx942_16x16x16_bf16>(g); }
void exec_mfma_32x32x8f16(const WaveGroup& g) { exec_atom<mma::gfx942_32x32x8_f16>(g); }
void exec_mfma_16x16x16f16(const WaveGroup& g) { exec_atom<mma::gfx942_16x16x16_f16>(g); }
void exec_mfma_32x32x2f32(const WaveGroup& g) { exec_atom<mma::gfx942_32x32x2_f32>(g); }
void exec_mfma_16x16x4f32(const WaveGroup& g) { exec_atom<mma::gfx942_16x16x4_f32>(g); }
void exec_mfma_32x32x4xf32(const WaveGroup& g) { exec_atom<mma::gfx942_32x32x4_xf32>(g); }
void exec_mfma_16x16x8xf32(const WaveGroup& g) { exec_atom<mma::gfx942_16x16x8_xf32>(g); }

}  // namespace kgate::rt::host::detail
