// MMA atoms: the matrix-core instructions of every target as data, and the
// kernel-facing API that makes a tile kernel independent of lane layouts.
//
// An atom is one instruction, in the style of CuTe's MMA_Traits: shape
// M x N x K, the lanes taking part, the input type, and for A (M x K),
// B (K x N) and C/D (M x N) the map (lane, register element) -> (row, col)
// as a linear layout (Triton's linear layouts: one basis vector per bit of
// the register index and of the lane index; the coordinate of (lane, reg) is
// the XOR of the basis vectors of its set bits). These tables are the one
// definition of the layouts in kgate: the host emulator, the device backends
// and the tests read them; nothing else writes a lane layout down.
//
// A tile kernel is written once against an atom type:
//
//   template <class Atom>
//   KGATE_KERNEL(gemm_tile, ...) {
//     namespace mma = kgate::rt::mma;
//     mma::c_frag<Atom> acc = mma::zero_c<Atom>();
//     for (k0 ...) {
//       const auto a = mma::load_a<Atom>([&](int i, int k) { return a_tile[(i0 + i) * lda + k0 + k]; });
//       const auto b = mma::load_b<Atom>([&](int k, int j) { return b_tile[(k0 + k) * ldb + j0 + j]; });
//       acc = mma::mma<Atom>(a, b, acc);
//     }
//     mma::visit_c<Atom>(acc, [&](int i, int j, float v) { c[(i0 + i) * ldc + j0 + j] = v; });
//   }
//
// and launched with the backend's default atom for a type:
//
//   rt::mma::with_default_atom<rt::MmaType::bf16>([&](auto atom) {
//     using Atom = decltype(atom);
//     KGATE_LAUNCH((gemm_tile<Atom>), (rt::LaunchConfig{grid, Atom::lanes * waves}), ...);
//   });
//
// gfx942 (HIP) runs the MFMA builtins, CUDA runs mma.sync (inline PTX), the
// host emulates the atom of its configured target (host::Config::target) with
// that vendor's numerics. An atom a backend does not have fails at compile
// time in mma(); on the host, an atom of the other target fails at run time
// (its lanes and numerics are not those of the emulated device).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/runtime/runtime.hpp"

namespace kgate::rt::mma {

// ===========================================================================
// Layouts

struct coord {
  int row, col;
};

// (lane, reg) -> (row, col): basis[0, reg_bits) for the bits of the register
// index, then basis[reg_bits, reg_bits + lane_bits) for the bits of the lane.
struct layout {
  int reg_bits;
  int lane_bits;
  coord basis[12];

  KGATE_HD constexpr coord operator()(int lane, int reg) const {
    coord c{0, 0};
    for (int b = 0; b < reg_bits; ++b)
      if ((reg >> b) & 1) {
        c.row ^= basis[b].row;
        c.col ^= basis[b].col;
      }
    for (int b = 0; b < lane_bits; ++b)
      if ((lane >> b) & 1) {
        c.row ^= basis[reg_bits + b].row;
        c.col ^= basis[reg_bits + b].col;
      }
    return c;
  }
  KGATE_HD constexpr int regs() const { return 1 << reg_bits; }
  KGATE_HD constexpr int lanes() const { return 1 << lane_bits; }
};

// ===========================================================================
// Atoms. Layouts: gfx942 from AMD's matrix instruction calculator (CDNA3
// ISA, "dependent arithmetic" MFMA operand layouts), sm90 from the PTX ISA
// ("matrix fragments for mma.m16n8k16 / mma.m16n8k8", groupID = lane / 4,
// threadID_in_group = lane % 4).

// What every atom states besides its name and layouts.
template <Target T, MmaType E, int M_, int N_, int K_>
struct atom_shape {
  static constexpr Target target = T;
  static constexpr MmaType type = E;
  static constexpr int M = M_, N = N_, K = K_;
  static constexpr int lanes = T == Target::gfx942 ? 64 : 32;
};

// gfx942 32x32 outputs: D[i][j] = lane j + 32*((i/4)%2), element (i%4) + 4*(i/8).
#define KGATE_GFX942_C32 \
  { 4, 6, { {1, 0}, {2, 0}, {8, 0}, {16, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {4, 0} } }
// gfx942 16x16 outputs: D[i][j] = lane j + 16*(i/4), element i%4.
#define KGATE_GFX942_C16 \
  { 2, 6, { {1, 0}, {2, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 8}, {4, 0}, {8, 0} } }

// v_mfma_f32_32x32x8_bf16 / _f16: A[i][k] = lane i + 32*(k/4), element k%4;
// B[k][j] = lane j + 32*(k/4), element k%4.
#define KGATE_GFX942_32x32x8(Name, Type, Instr)                                                          \
  struct Name : atom_shape<Target::gfx942, Type, 32, 32, 8> {                                           \
    static constexpr const char* name = Instr;                                                           \
    KGATE_HD static constexpr layout a() {                                                               \
      return {2, 6, {{0, 1}, {0, 2}, {1, 0}, {2, 0}, {4, 0}, {8, 0}, {16, 0}, {0, 4}}};                  \
    }                                                                                                    \
    KGATE_HD static constexpr layout b() {                                                               \
      return {2, 6, {{1, 0}, {2, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {4, 0}}};                  \
    }                                                                                                    \
    KGATE_HD static constexpr layout c() { return KGATE_GFX942_C32; }                                   \
  };
// v_mfma_f32_16x16x16_bf16 / _f16: A[i][k] = lane i + 16*(k/4), element k%4;
// B[k][j] = lane j + 16*(k/4), element k%4.
#define KGATE_GFX942_16x16x16(Name, Type, Instr)                                                         \
  struct Name : atom_shape<Target::gfx942, Type, 16, 16, 16> {                                          \
    static constexpr const char* name = Instr;                                                           \
    KGATE_HD static constexpr layout a() {                                                               \
      return {2, 6, {{0, 1}, {0, 2}, {1, 0}, {2, 0}, {4, 0}, {8, 0}, {0, 4}, {0, 8}}};                   \
    }                                                                                                    \
    KGATE_HD static constexpr layout b() {                                                               \
      return {2, 6, {{1, 0}, {2, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 8}, {4, 0}, {8, 0}}};                   \
    }                                                                                                    \
    KGATE_HD static constexpr layout c() { return KGATE_GFX942_C16; }                                   \
  };

KGATE_GFX942_32x32x8(gfx942_32x32x8_bf16, MmaType::bf16, "v_mfma_f32_32x32x8_bf16")
KGATE_GFX942_32x32x8(gfx942_32x32x8_f16, MmaType::f16, "v_mfma_f32_32x32x8_f16")
KGATE_GFX942_16x16x16(gfx942_16x16x16_bf16, MmaType::bf16, "v_mfma_f32_16x16x16_bf16")
KGATE_GFX942_16x16x16(gfx942_16x16x16_f16, MmaType::f16, "v_mfma_f32_16x16x16_f16")
#undef KGATE_GFX942_32x32x8
#undef KGATE_GFX942_16x16x16

// v_mfma_f32_32x32x2_f32: A[i][k] = lane i + 32k; B[k][j] = lane j + 32k.
struct gfx942_32x32x2_f32 : atom_shape<Target::gfx942, MmaType::f32, 32, 32, 2> {
  static constexpr const char* name = "v_mfma_f32_32x32x2_f32";
  KGATE_HD static constexpr layout a() { return {0, 6, {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {16, 0}, {0, 1}}}; }
  KGATE_HD static constexpr layout b() { return {0, 6, {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {1, 0}}}; }
  KGATE_HD static constexpr layout c() { return KGATE_GFX942_C32; }
};
// v_mfma_f32_16x16x4_f32: A[i][k] = lane i + 16k; B[k][j] = lane j + 16k.
struct gfx942_16x16x4_f32 : atom_shape<Target::gfx942, MmaType::f32, 16, 16, 4> {
  static constexpr const char* name = "v_mfma_f32_16x16x4_f32";
  KGATE_HD static constexpr layout a() { return {0, 6, {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {0, 1}, {0, 2}}}; }
  KGATE_HD static constexpr layout b() { return {0, 6, {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {1, 0}, {2, 0}}}; }
  KGATE_HD static constexpr layout c() { return KGATE_GFX942_C16; }
};
// v_mfma_f32_32x32x4_xf32: A[i][k] = lane i + 32*(k/2), element k%2; B alike.
struct gfx942_32x32x4_xf32 : atom_shape<Target::gfx942, MmaType::xf32, 32, 32, 4> {
  static constexpr const char* name = "v_mfma_f32_32x32x4_xf32";
  KGATE_HD static constexpr layout a() { return {1, 6, {{0, 1}, {1, 0}, {2, 0}, {4, 0}, {8, 0}, {16, 0}, {0, 2}}}; }
  KGATE_HD static constexpr layout b() { return {1, 6, {{1, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {2, 0}}}; }
  KGATE_HD static constexpr layout c() { return KGATE_GFX942_C32; }
};
// v_mfma_f32_16x16x8_xf32: A[i][k] = lane i + 16*(k/2), element k%2; B alike.
struct gfx942_16x16x8_xf32 : atom_shape<Target::gfx942, MmaType::xf32, 16, 16, 8> {
  static constexpr const char* name = "v_mfma_f32_16x16x8_xf32";
  KGATE_HD static constexpr layout a() { return {1, 6, {{0, 1}, {1, 0}, {2, 0}, {4, 0}, {8, 0}, {0, 2}, {0, 4}}}; }
  KGATE_HD static constexpr layout b() { return {1, 6, {{1, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 8}, {2, 0}, {4, 0}}}; }
  KGATE_HD static constexpr layout c() { return KGATE_GFX942_C16; }
};
#undef KGATE_GFX942_C32
#undef KGATE_GFX942_C16

// sm90 accumulators (m16n8, .f32): c_i at row g (+8 for i >= 2), column
// 2t + (i & 1).
#define KGATE_SM90_C16x8 \
  { 2, 5, { {0, 1}, {8, 0}, {0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0} } }

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: a_i at row g (+8 for
// i % 4 >= 2), column 2t + (i & 1) (+8 for i >= 4); b_i at row 2t + (i & 1)
// (+8 for i >= 2), column g.
#define KGATE_SM90_M16N8K16(Name, Type, Instr)                                                    \
  struct Name : atom_shape<Target::sm90, Type, 16, 8, 16> {                                       \
    static constexpr const char* name = Instr;                                                    \
    KGATE_HD static constexpr layout a() {                                                        \
      return {3, 5, {{0, 1}, {8, 0}, {0, 8}, {0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}}};            \
    }                                                                                             \
    KGATE_HD static constexpr layout b() {                                                        \
      return {2, 5, {{1, 0}, {8, 0}, {2, 0}, {4, 0}, {0, 1}, {0, 2}, {0, 4}}};                    \
    }                                                                                             \
    KGATE_HD static constexpr layout c() { return KGATE_SM90_C16x8; }                            \
  };
// mma.sync.aligned.m16n8k8.row.col.f32.{bf16,f16}: a_i at row g (+8 for
// i >= 2), column 2t + (i & 1); b_i at row 2t + i, column g.
#define KGATE_SM90_M16N8K8(Name, Type, Instr)                                                     \
  struct Name : atom_shape<Target::sm90, Type, 16, 8, 8> {                                        \
    static constexpr const char* name = Instr;                                                    \
    KGATE_HD static constexpr layout a() { return KGATE_SM90_C16x8; }                            \
    KGATE_HD static constexpr layout b() {                                                        \
      return {1, 5, {{1, 0}, {2, 0}, {4, 0}, {0, 1}, {0, 2}, {0, 4}}};                            \
    }                                                                                             \
    KGATE_HD static constexpr layout c() { return KGATE_SM90_C16x8; }                            \
  };

KGATE_SM90_M16N8K16(sm90_m16n8k16_bf16, MmaType::bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
KGATE_SM90_M16N8K16(sm90_m16n8k16_f16, MmaType::f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
KGATE_SM90_M16N8K8(sm90_m16n8k8_bf16, MmaType::bf16, "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32")
KGATE_SM90_M16N8K8(sm90_m16n8k8_f16, MmaType::f16, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32")
#undef KGATE_SM90_M16N8K16
#undef KGATE_SM90_M16N8K8
#undef KGATE_SM90_C16x8

// Every atom, for tests and tables: F(atom) for each.
#define KGATE_MMA_ATOMS(F)                                                                               \
  F(gfx942_32x32x8_bf16) F(gfx942_16x16x16_bf16) F(gfx942_32x32x8_f16) F(gfx942_16x16x16_f16)          \
  F(gfx942_32x32x2_f32) F(gfx942_16x16x4_f32) F(gfx942_32x32x4_xf32) F(gfx942_16x16x8_xf32)             \
  F(sm90_m16n8k16_bf16) F(sm90_m16n8k16_f16) F(sm90_m16n8k8_bf16) F(sm90_m16n8k8_f16)

// The default atom of a target for an input type (void: the target has none).
template <Target T, MmaType E>
struct default_atom {
  using type = void;
};
template <> struct default_atom<Target::gfx942, MmaType::bf16> { using type = gfx942_32x32x8_bf16; };
template <> struct default_atom<Target::gfx942, MmaType::f16> { using type = gfx942_32x32x8_f16; };
template <> struct default_atom<Target::gfx942, MmaType::f32> { using type = gfx942_32x32x2_f32; };
template <> struct default_atom<Target::gfx942, MmaType::xf32> { using type = gfx942_32x32x4_xf32; };
template <> struct default_atom<Target::sm90, MmaType::bf16> { using type = sm90_m16n8k16_bf16; };
template <> struct default_atom<Target::sm90, MmaType::f16> { using type = sm90_m16n8k16_f16; };

// ===========================================================================
// Fragments: the registers one lane holds of an operand. Element r of a
// fragment is register element r of the atom's layout; bf16 / f16 operands
// are bit patterns.
template <class T, int N>
struct frag {
  T v[N];
  KGATE_HD T& operator[](int i) { return v[i]; }
  KGATE_HD const T& operator[](int i) const { return v[i]; }
};

template <class Atom>
using operand_t = std::conditional_t<Atom::type == MmaType::bf16 || Atom::type == MmaType::f16, std::uint16_t, float>;
template <class Atom>
using a_frag = frag<operand_t<Atom>, Atom::a().regs()>;
template <class Atom>
using b_frag = frag<operand_t<Atom>, Atom::b().regs()>;
template <class Atom>
using c_frag = frag<float, Atom::c().regs()>;

// Whether this backend can run the atom: gfx942 atoms on HIP, sm90 atoms on
// CUDA, every atom on the host (the configured target's at run time).
template <class Atom>
inline constexpr bool available = backend == Backend::host ||
                                  (backend == Backend::hip && Atom::target == Target::gfx942) ||
                                  (backend == Backend::cuda && Atom::target == Target::sm90);

// ===========================================================================
// Moving fragments by coordinate. (The register loops are unrolled on the
// GPUs; GCC warns about the pragma on loops it has already folded.)
#if defined(__HIP__) || defined(__CUDACC__)
#define KGATE_MMA_UNROLL KGATE_UNROLL
#else
#define KGATE_MMA_UNROLL
#endif
// `at(row, col)` returns the element of the
// operand's tile (A: row i, column k; B: row k, column j) relative to the
// atom's origin; anything convertible to operand_t (an LDS element, a
// global load, a register) works.

namespace detail {
enum Operand { opA, opB, opC };
template <class Atom, int Op>
KGATE_HD constexpr layout layout_of() {
  return Op == opA ? Atom::a() : Op == opB ? Atom::b() : Atom::c();
}
#if !defined(__HIP__) && !defined(__CUDACC__)
// The host evaluates a layout once per atom into a (lane, reg) table; the
// GPUs fold the XORs of the unrolled register loop instead.
template <class Atom, int Op>
struct coord_table {
  static constexpr layout L = layout_of<Atom, Op>();
  struct table {
    coord v[1 << (layout_of<Atom, Op>().reg_bits + layout_of<Atom, Op>().lane_bits)];
  };
  static constexpr table make() {
    table t{};
    for (int l = 0; l < L.lanes(); ++l)
      for (int r = 0; r < L.regs(); ++r) t.v[l * L.regs() + r] = L(l, r);
    return t;
  }
  static constexpr table value = make();
};
#endif
// The (row, col) of register r of this lane.
template <class Atom, int Op>
KGATE_HD inline coord at(int lane, int r) {
#if !defined(__HIP__) && !defined(__CUDACC__)
  return coord_table<Atom, Op>::value.v[lane * layout_of<Atom, Op>().regs() + r];
#else
  constexpr layout L = layout_of<Atom, Op>();
  return L(lane, r);
#endif
}
}  // namespace detail

template <class Atom, class F>
KGATE_DEVICE a_frag<Atom> load_a(F&& at) {
  const int lane = lane_id() % Atom::lanes;
  a_frag<Atom> f;
  KGATE_MMA_UNROLL
  for (int r = 0; r < Atom::a().regs(); ++r) {
    const coord x = detail::at<Atom, detail::opA>(lane, r);
    f[r] = static_cast<operand_t<Atom>>(at(x.row, x.col));
  }
  return f;
}

template <class Atom, class F>
KGATE_DEVICE b_frag<Atom> load_b(F&& at) {
  const int lane = lane_id() % Atom::lanes;
  b_frag<Atom> f;
  KGATE_MMA_UNROLL
  for (int r = 0; r < Atom::b().regs(); ++r) {
    const coord x = detail::at<Atom, detail::opB>(lane, r);
    f[r] = static_cast<operand_t<Atom>>(at(x.row, x.col));
  }
  return f;
}

// Runs along K: the number of consecutive register elements of an operand
// that hold consecutive K at one row (A) or column (B) of the atom: 2^b where
// register basis vectors 0 .. b-1 are the K steps 1, 2, 4, ... (sm90
// m16n8k16: 2; gfx942 32x32x8 bf16: 4; f32 atoms: 1).
namespace detail {
template <class Atom, int Op>
KGATE_HD constexpr int k_run() {
  constexpr layout L = layout_of<Atom, Op>();
  int run = 1;
  for (int b = 0; b < L.reg_bits; ++b) {
    const coord step = Op == opA ? coord{0, 1 << b} : coord{1 << b, 0};
    if (L.basis[b].row != step.row || L.basis[b].col != step.col) break;
    run *= 2;
  }
  return run;
}
}  // namespace detail
template <class Atom>
inline constexpr int a_k_run = detail::k_run<Atom, detail::opA>();
template <class Atom>
inline constexpr int b_k_run = detail::k_run<Atom, detail::opB>();

// As load_a / load_b, V registers per call: `at(row, col)` returns the V
// elements from (row, col) on along K (A: columns col .. col + V - 1 of row
// `row`; B: rows row .. row + V - 1 of column `col`) as frag<operand_t, V>,
// e.g. one aligned vector LDS read; V divides the operand's K run (checked
// at compile time), so every call starts on a multiple of V along K.
namespace detail {
template <class Atom, int Op, int V, class Frag, class F>
KGATE_DEVICE Frag load_run(F&& at) {
  const int lane = lane_id() % Atom::lanes;
  Frag f;
  KGATE_MMA_UNROLL
  for (int r = 0; r < layout_of<Atom, Op>().regs(); r += V) {
    const coord x = detail::at<Atom, Op>(lane, r);
    const frag<operand_t<Atom>, V> v = at(x.row, x.col);
    KGATE_MMA_UNROLL
    for (int e = 0; e < V; ++e) f[r + e] = v[e];
  }
  return f;
}
}  // namespace detail

template <class Atom, int V, class F>
KGATE_DEVICE a_frag<Atom> load_a_run(F&& at) {
  static_assert(V >= 1 && a_k_run<Atom> % V == 0, "V must divide the A operand's K run");
  return detail::load_run<Atom, detail::opA, V, a_frag<Atom>>(at);
}

template <class Atom, int V, class F>
KGATE_DEVICE b_frag<Atom> load_b_run(F&& at) {
  static_assert(V >= 1 && b_k_run<Atom> % V == 0, "V must divide the B operand's K run");
  return detail::load_run<Atom, detail::opB, V, b_frag<Atom>>(at);
}

// ===========================================================================
// Fragments of 16-bit operands from LDS tiles (the inner loop of a tiled
// GEMM): load_a_lds<Atom>(l, base, pitch) is load_a with
// at(i, k) = l[base + i*pitch + k] (A stored by row, K contiguous), and
// load_b_lds<Atom>(l, base, pitch) is load_b with
// at(k, j) = l[base + j*pitch + k] (B stored by column, K contiguous).
// The K-major forms take tiles stored the other way, as operands often
// arrive from memory: load_a_lds_kmajor<Atom>(l, base, pitch) is load_a with
// at(i, k) = l[base + k*pitch + i] (M contiguous), load_b_lds_kmajor with
// at(k, j) = l[base + k*pitch + j] (N contiguous). base and pitch are
// multiples of 8 elements (16-byte rows; the host checks).
// CUDA reads an atom whose layout ldmatrix produces (ldmatrix_fits) with one
// ldmatrix per fragment (.trans for the K-major forms; the instruction is the
// CUDA backend's rt::ldmatrix, as every instruction is a backend's); the other backends,
// and CUDA for other atoms, read the atom's K runs by coordinate, at most 8
// bytes at a time (K-major: element by element). Every backend returns the
// same values.
namespace detail {
template <int V>
struct alignas(2 * V) lds_run {
  std::uint16_t v[V];
};
// A position of operand Op as stored in LDS: (row, K) for A, (column, K)
// for B; K-major: (K, row) for A, (K, column) for B.
template <int Op, bool KMajor = false>
KGATE_HD constexpr coord stored(coord x) {
  return (Op == opA) != KMajor ? x : coord{x.col, x.row};
}
// ldmatrix.m8n8.b16 gives lane l, in its register w, elements (l/4, 2(l%4))
// and (l/4, 2(l%4) + 1) of the 8x8 matrix whose rows lanes 8w .. 8w+7
// address (x1, x2, x4: 1, 2, 4 matrices; the lower-column element in the
// low half); with .trans, elements (2(l%4), l/4) and (2(l%4) + 1, l/4). An
// operand fits when its register elements 2w and 2w + 1 lie there relative
// to lane 0's element 2w, in stored orientation, with that origin on a
// multiple of 8 along the stored rows.
template <class Atom, int Op, bool KMajor = false>
KGATE_HD constexpr bool ldmatrix_fits() {
  constexpr layout L = layout_of<Atom, Op>();
  constexpr int n = L.regs() / 2;
  bool fits = Atom::lanes == 32 && (n == 1 || n == 2 || n == 4) &&
              (Atom::type == MmaType::bf16 || Atom::type == MmaType::f16);
  for (int w = 0; fits && w < n; ++w) {
    const coord o = stored<Op, KMajor>(L(0, 2 * w));
    fits = o.col % 8 == 0;
    for (int l = 0; l < 32; ++l)
      for (int h = 0; h < 2; ++h) {
        const coord c = stored<Op, KMajor>(L(l, 2 * w + h));
        const int dr = KMajor ? 2 * (l % 4) + h : l / 4, dc = KMajor ? l / 4 : 2 * (l % 4) + h;
        fits = fits && c.row == o.row + dr && c.col == o.col + dc;
      }
  }
  return fits;
}

template <class Atom, int Op, class Frag, bool KMajor = false>
KGATE_DEVICE Frag load_lds(const lds_array<std::uint16_t>& l, int base, int pitch) {
  static_assert(std::is_same_v<operand_t<Atom>, std::uint16_t>, "LDS fragment loads are for 16-bit operands");
#if defined(__CUDACC__)
  constexpr bool kLdmatrix = ldmatrix_fits<Atom, Op, KMajor>();
#else
  constexpr bool kLdmatrix = false;
#endif
  if constexpr (kLdmatrix) {
#if defined(__CUDACC__)
    constexpr layout L = layout_of<Atom, Op>();
    constexpr int n = L.regs() / 2;
    const int lane = lane_id();
    const coord o = stored<Op, KMajor>(L(0, 2 * ((lane / 8) % n)));
    unsigned r[n];
    kgate::rt::ldmatrix<n, KMajor>(r, l.data() + base + (o.row + lane % 8) * pitch + o.col);
    Frag f;
    memcpy(f.v, r, sizeof r);
    return f;
#endif
  } else {
#if !defined(__HIP__) && !defined(__CUDACC__)
    if (base % 8 != 0 || pitch % 8 != 0)
      throw Error("mma LDS fragment load: base " + std::to_string(base) + " and pitch " + std::to_string(pitch) +
                  " must be multiples of 8 elements");
#endif
    constexpr int V = KMajor ? 1 : k_run<Atom, Op>() < 4 ? k_run<Atom, Op>() : 4;
    return load_run<Atom, Op, V, Frag>([&](int row, int col) {
      const coord x = stored<Op, KMajor>(coord{row, col});
      const lds_run<V> p = l.template load<lds_run<V>>(base + x.row * pitch + x.col);
      frag<std::uint16_t, V> f;
      KGATE_MMA_UNROLL
      for (int e = 0; e < V; ++e) f[e] = p.v[e];
      return f;
    });
  }
}
}  // namespace detail

template <class Atom>
KGATE_DEVICE a_frag<Atom> load_a_lds(const lds_array<std::uint16_t>& l, int base, int pitch) {
  return detail::load_lds<Atom, detail::opA, a_frag<Atom>>(l, base, pitch);
}

template <class Atom>
KGATE_DEVICE b_frag<Atom> load_b_lds(const lds_array<std::uint16_t>& l, int base, int pitch) {
  return detail::load_lds<Atom, detail::opB, b_frag<Atom>>(l, base, pitch);
}

template <class Atom>
KGATE_DEVICE a_frag<Atom> load_a_lds_kmajor(const lds_array<std::uint16_t>& l, int base, int pitch) {
  return detail::load_lds<Atom, detail::opA, a_frag<Atom>, true>(l, base, pitch);
}

template <class Atom>
KGATE_DEVICE b_frag<Atom> load_b_lds_kmajor(const lds_array<std::uint16_t>& l, int base, int pitch) {
  return detail::load_lds<Atom, detail::opB, b_frag<Atom>, true>(l, base, pitch);
}

// The sm_90 atoms' fragments are ldmatrix's: their LDS loads are one
// instruction each on CUDA.
static_assert(detail::ldmatrix_fits<sm90_m16n8k16_bf16, detail::opA>() &&
              detail::ldmatrix_fits<sm90_m16n8k16_bf16, detail::opB>() &&
              detail::ldmatrix_fits<sm90_m16n8k8_bf16, detail::opA>() &&
              detail::ldmatrix_fits<sm90_m16n8k8_bf16, detail::opB>() &&
              detail::ldmatrix_fits<sm90_m16n8k16_bf16, detail::opA, true>() &&
              detail::ldmatrix_fits<sm90_m16n8k16_bf16, detail::opB, true>() &&
              !detail::ldmatrix_fits<gfx942_32x32x8_bf16, detail::opA>());

template <class Atom>
KGATE_DEVICE c_frag<Atom> zero_c() {
  c_frag<Atom> f;
  KGATE_MMA_UNROLL
  for (int r = 0; r < Atom::c().regs(); ++r) f[r] = 0.0f;
  return f;
}

template <class Atom, class F>
KGATE_DEVICE c_frag<Atom> load_c(F&& at) {
  const int lane = lane_id() % Atom::lanes;
  c_frag<Atom> f;
  KGATE_MMA_UNROLL
  for (int r = 0; r < Atom::c().regs(); ++r) {
    const coord x = detail::at<Atom, detail::opC>(lane, r);
    f[r] = static_cast<float>(at(x.row, x.col));
  }
  return f;
}

// Calls f(row, col, value) for every accumulator element this lane holds.
template <class Atom, class F>
KGATE_DEVICE void visit_c(const c_frag<Atom>& c, F&& f) {
  const int lane = lane_id() % Atom::lanes;
  KGATE_MMA_UNROLL
  for (int r = 0; r < Atom::c().regs(); ++r) {
    const coord x = detail::at<Atom, detail::opC>(lane, r);
    f(x.row, x.col, c[r]);
  }
}

// ===========================================================================
// D = A * B + C for one atom; every lane of the wave (warp) takes part.
namespace detail {
template <class>
inline constexpr bool always_false = false;
}

#if defined(__HIP__)
template <class Atom>
__device__ inline c_frag<Atom> mma(const a_frag<Atom>& a, const b_frag<Atom>& b, const c_frag<Atom>& c) {
  static_assert(available<Atom>, "this MMA atom does not exist on gfx942 (an sm90 atom in a HIP kernel)");
  using namespace kgate::rt;
  using acc_t = std::conditional_t<Atom::M == 32, f32x16, f32x4>;
  const acc_t cv = __builtin_bit_cast(acc_t, c);
  acc_t d;
  if constexpr (Atom::type == MmaType::bf16 || Atom::type == MmaType::f16) {
    const bf16x4 av = __builtin_bit_cast(bf16x4, a), bv = __builtin_bit_cast(bf16x4, b);
    if constexpr (std::is_same_v<Atom, gfx942_32x32x8_bf16>) d = mfma_32x32x8bf16_1k(av, bv, cv);
    else if constexpr (std::is_same_v<Atom, gfx942_16x16x16_bf16>) d = mfma_16x16x16bf16_1k(av, bv, cv);
    else if constexpr (std::is_same_v<Atom, gfx942_32x32x8_f16>) d = mfma_32x32x8f16(av, bv, cv);
    else d = mfma_16x16x16f16(av, bv, cv);
  } else if constexpr (Atom::type == MmaType::f32) {
    if constexpr (Atom::M == 32) d = mfma_32x32x2f32(a[0], b[0], cv);
    else d = mfma_16x16x4f32(a[0], b[0], cv);
  } else {
    const f32x2 av = __builtin_bit_cast(f32x2, a), bv = __builtin_bit_cast(f32x2, b);
    if constexpr (Atom::M == 32) d = mfma_32x32x4xf32(av, bv, cv);
    else d = mfma_16x16x8xf32(av, bv, cv);
  }
  return __builtin_bit_cast(c_frag<Atom>, d);
}
#elif defined(__CUDACC__)
template <class Atom>
__device__ inline c_frag<Atom> mma(const a_frag<Atom>& a, const b_frag<Atom>& b, const c_frag<Atom>& c) {
  static_assert(available<Atom>, "this MMA atom does not exist on the CUDA backend (a gfx942 atom in a CUDA kernel)");
  c_frag<Atom> d;
  if constexpr (available<Atom>) {
    unsigned ar[Atom::a().regs() / 2], br[Atom::b().regs() / 2];
    memcpy(ar, a.v, sizeof ar);  // two 16-bit elements per register, element 2w in the low half
    memcpy(br, b.v, sizeof br);
    if constexpr (std::is_same_v<Atom, sm90_m16n8k16_bf16>) mma_m16n8k16_bf16(d.v, ar, br, c.v);
    else if constexpr (std::is_same_v<Atom, sm90_m16n8k16_f16>) mma_m16n8k16_f16(d.v, ar, br, c.v);
    else if constexpr (std::is_same_v<Atom, sm90_m16n8k8_bf16>) mma_m16n8k8_bf16(d.v, ar, br, c.v);
    else mma_m16n8k8_f16(d.v, ar, br, c.v);
  }
  return d;
}
#else
template <class Atom>
c_frag<Atom> mma(const a_frag<Atom>& a, const b_frag<Atom>& b, const c_frag<Atom>& c,
                 std::source_location site = std::source_location::current()) {
  static_assert(sizeof(a_frag<Atom>) <= 16 && sizeof(b_frag<Atom>) <= 16 && sizeof(c_frag<Atom>) <= 64);
  host::detail::Lane* l = host::detail::current;
  std::memcpy(l->in, &a, sizeof a);
  std::memcpy(l->in + 16, &b, sizeof b);
  std::memcpy(l->in + 32, &c, sizeof c);
  host::detail::wave_collective(&host::detail::exec_atom<Atom>, Atom::name, site);
  c_frag<Atom> d;
  std::memcpy(&d, l->out, sizeof d);
  return d;
}
#endif

// ===========================================================================
// The backend's default atom for an input type: calls fn(Atom{}) with the
// atom of the device this code runs on (HIP: gfx942; CUDA: sm90; host: the
// configured target). A type the target has no atom for fails to compile on
// HIP and CUDA and throws on the host.
template <MmaType E, class Fn>
void with_default_atom(Fn&& fn) {
#if defined(__HIP__)
  using A = typename default_atom<Target::gfx942, E>::type;
  static_assert(!std::is_void_v<A>, "gfx942 has no MMA atom for this type");
  fn(A{});
#elif defined(__CUDACC__)
  using A = typename default_atom<Target::sm90, E>::type;
  static_assert(!std::is_void_v<A>, "sm90 has no MMA atom for this type");
  fn(A{});
#else
  using G = typename default_atom<Target::gfx942, E>::type;
  using S = typename default_atom<Target::sm90, E>::type;
  if (host::config().target == Target::sm90) {
    if constexpr (std::is_void_v<S>) throw Error("with_default_atom: the sm90 target has no MMA atom for this type");
    else fn(S{});
  } else {
    fn(G{});
  }
#endif
}

}  // namespace kgate::rt::mma
