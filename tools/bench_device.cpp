#include "tools/bench_device.hpp"

#include <map>
#include <stdexcept>

#include "kernels/runtime/runtime.hpp"

namespace kgate::bench {

namespace {

constexpr bool kHost = rt::backend == rt::Backend::host;
constexpr int kBenchThreads = 256;
constexpr int kPerThread = 8;  // 16-byte units a work-item handles

struct U4 {
  std::uint32_t v[4];
};
struct alignas(8) Bf16x4 {
  kgate::bf16 v[4];
};
struct alignas(16) F32x4 {
  float v[4];
};

// Reads `units` 16-byte units; writes only if the xor of everything read is
// a value no input here produces, so the loads cannot be dropped.
KGATE_KERNEL_BOUNDS(read_ceiling, kBenchThreads, const U4* in, std::uint64_t units, std::uint32_t* out) {
  const std::uint64_t base = static_cast<std::uint64_t>(rt::block_idx().x) * kBenchThreads * kPerThread;
  std::uint32_t acc = 0;
  U4 v[kPerThread];
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    v[k] = i < units ? in[i] : U4{};
  }
  for (int k = 0; k < kPerThread; ++k) acc ^= v[k].v[0] ^ v[k].v[1] ^ v[k].v[2] ^ v[k].v[3];
  if (acc == 0x12345679u) out[0] = acc;
}

// bf16 -> fp32, 4 elements per unit (8-byte loads, 16-byte stores, read-once
// hints), units taken in reverse block order when `reverse` is set. Units
// below `held` are not loaded (they stand for data a single-read forward
// kept on chip: their values are made from the index).
KGATE_KERNEL_BOUNDS(widen_ceiling, kBenchThreads, const Bf16x4* in, std::uint64_t units, F32x4* out, int reverse,
                    std::uint64_t held) {
  const std::uint64_t b = reverse ? rt::grid_dim().x - 1 - rt::block_idx().x : rt::block_idx().x;
  const std::uint64_t base = b * kBenchThreads * kPerThread;
  Bf16x4 v[kPerThread] = {};
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    if (i < held)
      for (int e = 0; e < 4; ++e) v[k].v[e] = kgate::bf16::from_bits(static_cast<std::uint16_t>(i + e));
    else if (i < units)
      v[k] = rt::load_once(in + i);
  }
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    if (i >= units) continue;
    F32x4 o;
    for (int e = 0; e < 4; ++e) o.v[e] = v[k].v[e].to_float();
    rt::store_once(out + i, o);
  }
}

// fp32 stores only, 16 bytes per unit with the apply's pattern and hint.
KGATE_KERNEL_BOUNDS(write_ceiling, kBenchThreads, std::uint64_t units, F32x4* out) {
  const std::uint64_t base = static_cast<std::uint64_t>(rt::block_idx().x) * kBenchThreads * kPerThread;
  for (int k = 0; k < kPerThread; ++k) {
    const std::uint64_t i = base + rt::thread_idx().x + static_cast<std::uint64_t>(k) * kBenchThreads;
    if (i < units) rt::store_once(out + i, F32x4{{1.0f, 2.0f, static_cast<float>(k), 0.0f}});
  }
}

// Matrix-core peak: every wave runs kPeakChains independent accumulator
// chains of `iters` atoms each on constant operands (1/16: no overflow in any
// accumulation); the sum is stored only if it is a value no run produces, so
// the loop cannot be dropped.
constexpr int kPeakChains = 4;
constexpr int kPeakWaves = 4;  // per block
template <class Atom>
KGATE_KERNEL(mma_peak_loop, int iters, float* out) {
  namespace mma = rt::mma;
  using Op = rt::mma::operand_t<Atom>;
  constexpr bool kHalf = sizeof(Op) == 2;
  // 1/16 in the operand's format: bf16 0x3d80, fp16 0x2c00, fp32 0.0625f.
  const Op one16 = [] {
    if constexpr (kHalf) return static_cast<Op>(Atom::type == rt::MmaType::bf16 ? 0x3d80u : 0x2c00u);
    else return static_cast<Op>(0.0625f);
  }();
  const auto a = mma::load_a<Atom>([&](int, int) { return one16; });
  const auto b = mma::load_b<Atom>([&](int, int) { return one16; });
  mma::c_frag<Atom> acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = mma::zero_c<Atom>();
  for (int it = 0; it < iters; ++it)
    for (int c = 0; c < kPeakChains; ++c) acc[c] = mma::mma<Atom>(a, b, acc[c]);
  float s = 0.0f;
  for (int c = 0; c < kPeakChains; ++c)
    for (int r = 0; r < Atom::c().regs(); ++r) s += acc[c][r];
  if (s == -1.0f) out[0] = s;
}

template <class... A>
struct AtomList {};
#if defined(__HIP__)
using BackendAtoms = AtomList<rt::mma::gfx942_32x32x8_bf16, rt::mma::gfx942_32x32x8_f16, rt::mma::gfx942_16x16x16_bf16,
                              rt::mma::gfx942_16x16x16_f16, rt::mma::gfx942_32x32x2_f32, rt::mma::gfx942_16x16x4_f32,
                              rt::mma::gfx942_32x32x4_xf32, rt::mma::gfx942_16x16x8_xf32>;
#elif defined(__CUDACC__)
using BackendAtoms = AtomList<rt::mma::sm90_m16n8k16_bf16, rt::mma::sm90_m16n8k16_f16, rt::mma::sm90_m16n8k8_bf16,
                              rt::mma::sm90_m16n8k8_f16>;
#else
using BackendAtoms = AtomList<rt::mma::gfx942_32x32x8_bf16, rt::mma::gfx942_32x32x8_f16, rt::mma::gfx942_16x16x16_bf16,
                              rt::mma::gfx942_16x16x16_f16, rt::mma::gfx942_32x32x2_f32, rt::mma::gfx942_16x16x4_f32,
                              rt::mma::gfx942_32x32x4_xf32, rt::mma::gfx942_16x16x8_xf32, rt::mma::sm90_m16n8k16_bf16,
                              rt::mma::sm90_m16n8k16_f16, rt::mma::sm90_m16n8k8_bf16, rt::mma::sm90_m16n8k8_f16>;
#endif

// Whether this backend runs Atom (the host: only its configured target's).
template <class Atom>
bool runs_atom() {
#if !defined(__CUDACC__) && !defined(__HIP__)
  return Atom::target == rt::host::config().target;
#else
  return true;
#endif
}

template <class F>
double time_ms(F&& f, int iters);

template <class Atom>
MmaPeak measure_peak() {
  // Devices: enough blocks for several per compute unit on any current GPU,
  // a loop long enough that the launch is a small share; the emulator: one
  // block and a short loop (its rate is a few hundred M MAC/s per core).
  const unsigned blocks = kHost ? 1u : 8192u;
  const int iters = kHost ? 8 : 2048;
  rt::DeviceBuffer<float> out(1);
  rt::LaunchConfig cfg;
  cfg.grid = rt::dim3(blocks);
  cfg.block = rt::dim3(static_cast<unsigned>(Atom::lanes * kPeakWaves));
  const double ms = time_ms([&] { KGATE_LAUNCH((mma_peak_loop<Atom>), cfg, iters, out.data()); }, kHost ? 1 : 5);
  MmaPeak p;
  p.atom = Atom::name;
  p.ms = ms;
  p.instructions = static_cast<std::uint64_t>(blocks) * kPeakWaves * kPeakChains * static_cast<std::uint64_t>(iters);
  p.tflops = static_cast<double>(p.instructions) * 2.0 * Atom::M * Atom::N * Atom::K / (ms * 1e9);
  return p;
}

template <class... A>
std::vector<std::string> atom_names(AtomList<A...>) {
  std::vector<std::string> v;
  (
      [&] {
        if (runs_atom<A>()) v.emplace_back(A::name);
      }(),
      ...);
  return v;
}

template <class... A>
MmaPeak peak_of(AtomList<A...>, const std::string& name) {
  MmaPeak p;
  bool found = false;
  (
      [&] {
        if (!found && runs_atom<A>() && name == A::name) {
          p = measure_peak<A>();
          found = true;
        }
      }(),
      ...);
  if (!found) throw std::invalid_argument("mma peak: this backend runs no atom named '" + name + "'");
  return p;
}

template <class F>
double time_ms(F&& f, int iters) {
  f();
  rt::device_synchronize();
  rt::Event start, stop;
  start.record();
  for (int i = 0; i < iters; ++i) f();
  stop.record();
  stop.synchronize();
  return static_cast<double>(rt::elapsed_ms(start, stop)) / iters;
}

}  // namespace

std::vector<std::string> mma_atoms() { return atom_names(BackendAtoms{}); }

MmaPeak mma_peak(const std::string& atom) {
  static std::map<std::string, MmaPeak> cache;
  auto it = cache.find(atom);
  if (it == cache.end()) it = cache.emplace(atom, peak_of(BackendAtoms{}, atom)).first;
  return it->second;
}

std::string atom_of_variant(const std::string& variant) {
  for (const auto& a : mma_atoms())
    if (variant.find(a) != std::string::npos) return a;
  return "";
}

bool has_graphs() { return rt::has_graphs; }

double copy_gbps(std::size_t bytes, int iters) {
  rt::DeviceBuffer<std::byte> a(bytes), b(bytes);
  rt::device_memset(a.data(), 0, bytes);
  const double ms = time_ms([&] { rt::copy_d2d(b.data(), a.data(), bytes); }, iters);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}

std::vector<Ceiling> streaming_ceilings(std::size_t bytes, int iters, double copy) {
  const std::uint64_t units16 = bytes / 16, units8 = bytes / 8;
  const std::uint64_t per_block = kBenchThreads * kPerThread;
  rt::DeviceBuffer<std::byte> in(units16 * 16), out(units16 * 32);
  rt::device_memset(in.data(), 0, units16 * 16);
  rt::LaunchConfig rcfg, wcfg;
  rcfg.grid = rt::dim3(static_cast<std::uint32_t>((units16 + per_block - 1) / per_block));
  wcfg.grid = rt::dim3(static_cast<std::uint32_t>((units8 + per_block - 1) / per_block));
  rcfg.block = wcfg.block = rt::dim3(kBenchThreads);
  auto read = [&] {
    KGATE_LAUNCH(read_ceiling, rcfg, reinterpret_cast<const U4*>(in.data()), units16,
                 reinterpret_cast<std::uint32_t*>(out.data()));
  };
  auto widen = [&](int reverse, std::uint64_t held) {
    KGATE_LAUNCH(widen_ceiling, wcfg, reinterpret_cast<const Bf16x4*>(in.data()), units8,
                 reinterpret_cast<F32x4*>(out.data()), reverse, held);
  };
  const double b = static_cast<double>(units16 * 16);
  // GB/s of the forward's traffic (x read once, fp32 y written) in `ms`.
  const auto fwd_gbps = [&](double ms) { return 3 * b / (ms * 1e6); };
  std::vector<Ceiling> c;
  auto add = [&](std::string name, double ms, double gbps) { c.push_back({std::move(name), ms, gbps, gbps / copy}); };
  const double r = time_ms(read, iters);
  add("read-only (x)", r, b / (r * 1e6));
  const double wr =
      time_ms([&] { KGATE_LAUNCH(write_ceiling, wcfg, units8, reinterpret_cast<F32x4*>(out.data())); }, iters);
  add("write-only (fp32 y)", wr, 2 * b / (wr * 1e6));
  const double w = time_ms([&] { widen(0, 0); }, iters);
  add("bf16->fp32 widening (x read once + y)", w, fwd_gbps(w));
  const double both = time_ms([&] { read(); widen(1, 0); }, iters);
  add("two-read floor: read, then widening reversed", both, fwd_gbps(both));
  for (int quarter = 0; quarter <= 4; ++quarter) {
    const std::uint64_t held = units8 * static_cast<std::uint64_t>(quarter) / 4;
    const double t = held == 0 ? w : time_ms([&] { widen(0, held); }, iters);
    add("single-read bound, f = " + std::to_string(quarter) + "/4 of x on chip", r + t, fwd_gbps(r + t));
  }
  return c;
}

CacheFlush::CacheFlush(std::size_t bytes) : bytes_(bytes) {
  if (bytes_) buf_ = rt::device_malloc(bytes_);
}
CacheFlush::~CacheFlush() {
  if (buf_) rt::device_free(buf_);
}
void CacheFlush::operator()() const {
  if (buf_) rt::device_memset(buf_, 0x5a, bytes_);
}

std::size_t default_flush_bytes() { return kHost ? (64u << 20) : (256u << 20); }
std::size_t default_copy_bytes() { return kHost ? (64u << 20) : (1u << 30); }

}  // namespace kgate::bench
