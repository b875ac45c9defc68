// The MMA conformance runner (contract: mma_conformance.hpp). Compiled as
// C++ for the host backend (sm90 target) and by nvcc (mma_conformance_cuda.cu).
#include "kernels/conformance/mma_conformance.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "kernels/runtime/host/mma_numerics.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::conformance {

namespace {

namespace rt = kgate::rt;
namespace mma = kgate::rt::mma;

enum Matrix : std::uint64_t { kA = 1, kB = 2, kC = 3 };

KGATE_HD inline std::uint64_t draw(std::uint64_t seed, std::uint64_t instr, std::uint64_t m, int r, int c) {
  return rt::splitmix64(seed ^ rt::splitmix64(instr * 4 + m) ^ (static_cast<std::uint64_t>(r) << 40) ^
                        (static_cast<std::uint64_t>(c) << 52));
}

KGATE_HD inline int mode_of(std::uint64_t seed, std::uint64_t instr) {
  return static_cast<int>(rt::splitmix64(seed + 0x51ED270B27C2B6A5ull * (instr + 1)) % kMmaModes);
}

// An IEEE bit pattern with `eb` exponent and `fb` fraction bits drawn from x
// for operand family `mode`; `scale` shifts the moderate exponents (C sits
// above the products).
KGATE_HD inline std::uint32_t make_bits(int eb, int fb, std::uint64_t x, int mode, int scale) {
  const int bias = (1 << (eb - 1)) - 1, emax = (1 << eb) - 2;
  const std::uint32_t sign = static_cast<std::uint32_t>(x & 1u) << (eb + fb);
  x >>= 1;
  const std::uint32_t frac = static_cast<std::uint32_t>(x) & ((1u << fb) - 1u);
  x >>= fb;
  const std::uint32_t sel = static_cast<std::uint32_t>(x & 255u);
  x >>= 8;
  int e;
  switch (mode) {
    default:
    case 0: e = bias + scale - 8 + static_cast<int>(x % 17); break;                 // moderate
    case 1: e = static_cast<int>(x % static_cast<std::uint64_t>(emax + 1)); break;  // whole range (0: subnormal)
    case 2: e = (sel & 1) ? 0 : 1 + static_cast<int>(x % 3); break;                // subnormals, tiny normals
    case 3: e = bias + scale - 12 + static_cast<int>(x % 25); break;               // cancellation (see below)
    case 4:                                                                         // signed zeros
      if (sel & 1) return sign;
      e = bias + scale - 8 + static_cast<int>(x % 17);
      break;
    case 5:  // Inf and NaN (quiet and signalling, 1 in 64) among moderate values
      if (sel < 2) return sign | (static_cast<std::uint32_t>(emax + 1) << fb);
      if (sel == 2) return sign | (static_cast<std::uint32_t>(emax + 1) << fb) | (1u << (fb - 1)) | (frac >> 1);
      if (sel == 3) return sign | (static_cast<std::uint32_t>(emax + 1) << fb) | ((frac >> 1) | 1u);
      e = bias + scale - 8 + static_cast<int>(x % 17);
      break;
    case 6: e = bias + scale - 24 + static_cast<int>(x % 49); break;  // wide alignment spreads
    case 7: e = emax - static_cast<int>(x % 8); break;                // near overflow
  }
  e = e < 0 ? 0 : (e > emax ? emax : e);
  return sign | (static_cast<std::uint32_t>(e) << fb) | frac;
}

template <class Atom>
KGATE_HD inline std::uint16_t gen_a(std::uint64_t seed, std::uint64_t instr, int i, int k) {
  constexpr int eb = Atom::type == rt::MmaType::bf16 ? 8 : 5, fb = Atom::type == rt::MmaType::bf16 ? 7 : 10;
  const int mode = mode_of(seed, instr);
  if (mode == 3 && k >= Atom::K / 2) {  // the negation of the first half, some one ulp off
    const std::uint64_t x = draw(seed, instr, kA, i, k);
    return static_cast<std::uint16_t>(gen_a<Atom>(seed, instr, i, k - Atom::K / 2) ^ (1u << (eb + fb)) ^
                                      ((x & 3u) == 0 ? 1u : 0u));
  }
  return static_cast<std::uint16_t>(make_bits(eb, fb, draw(seed, instr, kA, i, k), mode, 0));
}

template <class Atom>
KGATE_HD inline std::uint16_t gen_b(std::uint64_t seed, std::uint64_t instr, int k, int j) {
  constexpr int eb = Atom::type == rt::MmaType::bf16 ? 8 : 5, fb = Atom::type == rt::MmaType::bf16 ? 7 : 10;
  const int mode = mode_of(seed, instr);
  if (mode == 3 && k >= Atom::K / 2) return gen_b<Atom>(seed, instr, k - Atom::K / 2, j);
  return static_cast<std::uint16_t>(make_bits(eb, fb, draw(seed, instr, kB, k, j), mode, 0));
}

// The chain's first accumulator (fp32 bits), 4 above the products' scale.
KGATE_HD inline float gen_c(std::uint64_t seed, std::uint64_t instr, int i, int j) {
  return kgate::bit_cast<float>(make_bits(8, 23, draw(seed, instr, kC, i, j), mode_of(seed, instr), 4));
}

KGATE_HD inline float next_c(std::uint64_t seed, std::uint64_t instr, int i, int j, float d) {
  return (kgate::bit_cast<std::uint32_t>(d) & 0x7f800000u) != 0x7f800000u ? d : gen_c(seed, instr, i, j);
}

// One warp per chain: out[(chain * len + t) * M*N + i*N + j] = D of step t.
template <class Atom>
KGATE_KERNEL(mma_chains, std::uint64_t seed, int len, float* out) {
  const std::uint64_t w = (static_cast<std::uint64_t>(rt::block_idx().x) * rt::block_dim().x + rt::thread_idx().x) /
                          Atom::lanes;
  const std::uint64_t first = w * static_cast<std::uint64_t>(len);
  mma::c_frag<Atom> acc = mma::load_c<Atom>([&](int i, int j) { return gen_c(seed, first, i, j); });
  for (int t = 0; t < len; ++t) {
    const std::uint64_t instr = first + static_cast<std::uint64_t>(t);
    const auto a = mma::load_a<Atom>([&](int i, int k) { return gen_a<Atom>(seed, instr, i, k); });
    const auto b = mma::load_b<Atom>([&](int k, int j) { return gen_b<Atom>(seed, instr, k, j); });
    acc = mma::mma<Atom>(a, b, acc);
    float* o = out + instr * (Atom::M * Atom::N);
    mma::visit_c<Atom>(acc, [&](int i, int j, float v) { o[i * Atom::N + j] = v; });
    // The next C: this D, or a fresh value where D is not finite (so that
    // one Inf or NaN does not decide the rest of the chain).
    acc = mma::load_c<Atom>([&](int i, int j) { return next_c(seed, instr + 1, i, j, o[i * Atom::N + j]); });
  }
}

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

template <class Atom>
std::string describe_mismatch(std::uint64_t seed, std::uint64_t instr, int i, int j, float c, float dev, float model,
                              const rt::numerics::Sm90Terms& t) {
  char buf[256];
  std::string s;
  std::snprintf(buf, sizeof buf, "%s instr %llu mode %d D[%d][%d]: device 0x%08x model 0x%08x C 0x%08x\n  a:",
                Atom::name, static_cast<unsigned long long>(instr), mode_of(seed, instr), i, j, bits(dev), bits(model),
                bits(c));
  s += buf;
  for (int k = 0; k < Atom::K; ++k) {
    std::snprintf(buf, sizeof buf, " %04x", gen_a<Atom>(seed, instr, i, k));
    s += buf;
  }
  s += "\n  b:";
  for (int k = 0; k < Atom::K; ++k) {
    std::snprintf(buf, sizeof buf, " %04x", gen_b<Atom>(seed, instr, k, j));
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "\n  model terms: special %d, E %d, units 2^(E-25): products", t.special ? 1 : 0,
                t.max_exp);
  s += buf;
  for (int k = 0; k < t.k; ++k) {
    std::snprintf(buf, sizeof buf, " %lld", static_cast<long long>(t.product[k]));
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "; C %lld; sum %lld", static_cast<long long>(t.c), static_cast<long long>(t.sum));
  return s + buf;
}

template <class Atom>
MmaReport run_atom(std::uint64_t n, int len, std::uint64_t seed) {
  constexpr int MN = Atom::M * Atom::N;
  MmaReport rep;
  rep.atom = Atom::name;
  rep.instructions = n;
  const std::uint64_t chains = n / static_cast<std::uint64_t>(len);
  rt::DeviceBuffer<float> dout(n * MN);
  constexpr unsigned block = 4 * Atom::lanes;
  const auto warps_per_block = block / Atom::lanes;
  const auto grid = static_cast<unsigned>((chains + warps_per_block - 1) / warps_per_block);
  if (chains % warps_per_block) throw rt::Error("mma conformance: chains must fill whole blocks");
  KGATE_LAUNCH((mma_chains<Atom>), (rt::LaunchConfig{grid, block}), seed, len, dout.data());
  const std::vector<float> out = dout.download();

  std::mutex m;
  const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned tid = 0; tid < nt; ++tid) {
    pool.emplace_back([&, tid] {
      MmaReport part;
      std::vector<std::string> mism;
      for (std::uint64_t ch = tid; ch < chains; ch += nt) {
        for (int t = 0; t < len; ++t) {
          const std::uint64_t instr = ch * static_cast<std::uint64_t>(len) + static_cast<std::uint64_t>(t);
          std::uint16_t a[Atom::M][Atom::K], b[Atom::N][Atom::K];
          for (int i = 0; i < Atom::M; ++i)
            for (int k = 0; k < Atom::K; ++k) a[i][k] = gen_a<Atom>(seed, instr, i, k);
          for (int j = 0; j < Atom::N; ++j)
            for (int k = 0; k < Atom::K; ++k) b[j][k] = gen_b<Atom>(seed, instr, k, j);
          for (int i = 0; i < Atom::M; ++i)
            for (int j = 0; j < Atom::N; ++j) {
              const float c =
                  t == 0 ? gen_c(seed, instr, i, j) : next_c(seed, instr, i, j, out[(instr - 1) * MN + i * Atom::N + j]);
              const float dev = out[instr * MN + i * Atom::N + j];
              rt::numerics::Sm90Terms terms;
              const float mod = rt::numerics::dot_bits(rt::MfmaModel::sm90, Atom::type, a[i], b[j], Atom::K, c, &terms);
              ++part.outputs;
              const std::uint32_t u = bits(dev);
              if (u == bits(mod)) ++part.identical;
              else if (mism.size() < 8) mism.push_back(describe_mismatch<Atom>(seed, instr, i, j, c, dev, mod, terms));
              if (dev != dev) ++part.nan;
              else if ((u & 0x7fffffffu) == 0x7f800000u) ++part.inf;
              else if ((u & 0x7fffffffu) == 0) (u ? part.neg_zero : part.zero)++;
              else if ((u & 0x7f800000u) == 0) ++part.subnormal;
            }
        }
      }
      std::lock_guard lk(m);
      rep.outputs += part.outputs;
      rep.identical += part.identical;
      rep.nan += part.nan;
      rep.inf += part.inf;
      rep.zero += part.zero;
      rep.neg_zero += part.neg_zero;
      rep.subnormal += part.subnormal;
      for (auto& s : mism)
        if (rep.mismatches.size() < 16) rep.mismatches.push_back(std::move(s));
    });
  }
  for (auto& th : pool) th.join();
  return rep;
}

}  // namespace

std::vector<MmaReport> run_mma_conformance(std::uint64_t instructions, int chain, std::uint64_t seed) {
  if (chain < 1 || instructions % static_cast<std::uint64_t>(chain)) throw rt::Error("mma conformance: bad chain length");
#if !defined(__CUDACC__) && !defined(__HIP__)
  rt::host::ScopedConfig sc(rt::host::config_for(rt::Target::sm90, rt::host::config()));
#endif
  return {run_atom<mma::sm90_m16n8k16_bf16>(instructions, chain, seed),
          run_atom<mma::sm90_m16n8k16_f16>(instructions, chain, seed),
          run_atom<mma::sm90_m16n8k8_bf16>(instructions, chain, seed),
          run_atom<mma::sm90_m16n8k8_f16>(instructions, chain, seed)};
}

}  // namespace kgate::conformance
