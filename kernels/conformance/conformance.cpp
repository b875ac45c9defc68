// The conformance runner: inputs, launches and the plain C++ versions.
// Compiled as C++ for the host backend, as CUDA by nvcc (conformance_cuda.cu)
// and as HIP for gfx942 (conformance_hip.hip).
#include "kernels/conformance/conformance.hpp"

#define XXH_INLINE_ALL  // header-only: the binary carries no libxxhash dependency
#include <xxhash.h>

#include <cstdio>
#include <cstring>

#include "kernels/conformance/kernels.hpp"

namespace kgate::conformance {

namespace {

constexpr int kGemmK = 64;

// Deterministic inputs from an integer hash (splitmix64): identical on every
// machine, no library random engine involved.
std::uint64_t mix(std::uint64_t x) { return rt::splitmix64(x); }
// A float in [-1, 1) with 24 significant bits (exact in fp32).
float input_float(std::uint64_t stream, std::uint64_t i) {
  const auto m = static_cast<std::int64_t>(mix(stream * 0x100000000ull + i) >> 40) - (std::int64_t{1} << 23);
  return static_cast<float>(m) * 0x1p-23f;
}
int input_int(std::uint64_t stream, std::uint64_t i) {
  return static_cast<int>(mix(stream * 0x100000000ull + i) % 2001) - 1000;
}
std::uint16_t input_small_bf16(std::uint64_t stream, std::uint64_t i) {
  return kgate::fp32_to_bf16_bits(static_cast<float>(static_cast<int>(mix(stream * 0x100000000ull + i) % 17) - 8));
}

struct Sizes {
  int reduce_n, wave_n, scan_n, rows, cols, gemm_m, gemm_n, copy_n;
};
Sizes sizes(int scale) {
  return Sizes{262144 * scale, 262144 * scale, 65536 * scale, 1000, 700 * scale, 64, 96, 1000 * scale};
}

// hinted_copy's input: 15 words per element (32, 16, 8 and 2 bytes, the last
// word holding two elements' 2-byte values in its first half).
std::vector<std::uint32_t> hinted_input(int n) {
  std::vector<std::uint32_t> v(static_cast<std::size_t>(n) * 15);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint32_t>(mix(7 * 0x100000000ull + i));
  return v;
}

template <class T>
Output as_output(const char* name, const std::vector<T>& v) {
  Output o{name, std::vector<unsigned char>(v.size() * sizeof(T))};
  if (!v.empty()) std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
  return o;
}

template <class F>
std::vector<float> floats(std::size_t n, F f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = f(i);
  return v;
}

}  // namespace

const char* backend_name() { return rt::backend_name(rt::backend); }

std::string digest_hex(const std::vector<unsigned char>& bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return buf;
}

std::vector<Output> run_device(int scale) {
  const Sizes s = sizes(scale);
  std::vector<Output> outs;

  {  // block_reduce
    const auto x = floats(s.reduce_n, [](std::size_t i) { return input_float(1, i); });
    const unsigned groups = static_cast<unsigned>((s.reduce_n + 1023) / 1024);
    rt::DeviceBuffer<float> dx(x.size()), dout(groups);
    dx.upload(x);
    KGATE_LAUNCH(block_reduce, (rt::LaunchConfig{groups, kReduceBlock}), dx.data(), dout.data(), s.reduce_n);
    outs.push_back(as_output("block_reduce", dout.download()));
  }
  {  // wave_reduce
    const auto x = floats(s.wave_n, [](std::size_t i) { return input_float(2, i); });
    rt::DeviceBuffer<float> dx(x.size()), dout(s.wave_n / 32);
    dx.upload(x);
    KGATE_LAUNCH(wave_reduce, (rt::LaunchConfig{static_cast<unsigned>(s.wave_n / 256), 256}), dx.data(), dout.data(),
                 s.wave_n);
    outs.push_back(as_output("wave_reduce", dout.download()));
  }
  {  // wave_scan
    std::vector<int> x(s.scan_n);
    for (int i = 0; i < s.scan_n; ++i) x[i] = input_int(3, i);
    rt::DeviceBuffer<int> dx(x.size()), dout(x.size()), dtot(x.size() / 32);
    dx.upload(x);
    KGATE_LAUNCH(wave_scan, (rt::LaunchConfig{static_cast<unsigned>(s.scan_n / 128), 128}), dx.data(), dout.data(),
                 dtot.data(), s.scan_n);
    auto o = dout.download();
    const auto t = dtot.download();
    o.insert(o.end(), t.begin(), t.end());
    outs.push_back(as_output("wave_scan", o));
  }
  {  // lds_transpose
    const auto in = floats(static_cast<std::size_t>(s.rows) * s.cols, [](std::size_t i) { return input_float(4, i); });
    rt::DeviceBuffer<float> din(in.size()), dout(in.size());
    din.upload(in);
    const rt::dim3 grid((s.cols + 31) / 32, (s.rows + 31) / 32);
    KGATE_LAUNCH(lds_transpose, (rt::LaunchConfig{grid, rt::dim3(32, 8)}), din.data(), dout.data(), s.rows, s.cols);
    outs.push_back(as_output("lds_transpose", dout.download()));
  }
  {  // tile_gemm
    std::vector<std::uint16_t> a(static_cast<std::size_t>(s.gemm_m) * kGemmK), b(static_cast<std::size_t>(kGemmK) * s.gemm_n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = input_small_bf16(5, i);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = input_small_bf16(6, i);
    rt::DeviceBuffer<std::uint16_t> da(a.size()), db(b.size());
    rt::DeviceBuffer<float> dc(static_cast<std::size_t>(s.gemm_m) * s.gemm_n);
    da.upload(a);
    db.upload(b);
    const rt::dim3 grid(s.gemm_n / 32, s.gemm_m / 32);
    rt::mma::with_default_atom<rt::MmaType::bf16>([&](auto atom) {
      using Atom = decltype(atom);
      KGATE_LAUNCH((tile_gemm<Atom, kGemmK>), (rt::LaunchConfig{grid, static_cast<unsigned>(Atom::lanes)}), da.data(),
                   db.data(), dc.data(), s.gemm_n);
    });
    outs.push_back(as_output("tile_gemm", dc.download()));
  }
  {  // hinted_copy
    const std::vector<std::uint32_t> src = hinted_input(s.copy_n);
    rt::DeviceBuffer<Bytes32> a(s.copy_n), b(s.copy_n);
    rt::DeviceBuffer<Bytes16> c(s.copy_n), d(s.copy_n);
    rt::DeviceBuffer<Bytes8> e(s.copy_n), f(s.copy_n);
    rt::DeviceBuffer<std::uint16_t> g(s.copy_n), h(s.copy_n);
    const std::size_t n = static_cast<std::size_t>(s.copy_n);
    rt::copy_h2d(a.data(), src.data(), n * 32);
    rt::copy_h2d(c.data(), src.data() + n * 8, n * 16);
    rt::copy_h2d(e.data(), src.data() + n * 12, n * 8);
    rt::copy_h2d(g.data(), src.data() + n * 14, n * 2);
    KGATE_LAUNCH(hinted_copy, (rt::LaunchConfig{static_cast<unsigned>((s.copy_n + 127) / 128), 128}), a.data(),
                 b.data(), c.data(), d.data(), e.data(), f.data(), g.data(), h.data(), s.copy_n);
    std::vector<std::uint32_t> out(src.size());
    rt::copy_d2h(out.data(), b.data(), n * 32);
    rt::copy_d2h(out.data() + n * 8, d.data(), n * 16);
    rt::copy_d2h(out.data() + n * 12, f.data(), n * 8);
    rt::copy_d2h(reinterpret_cast<unsigned char*>(out.data() + n * 14), h.data(), n * 2);
    outs.push_back(as_output("hinted_copy", out));
  }
  rt::device_synchronize();
  return outs;
}

std::vector<Output> run_plain_cpp(int scale) {
  const Sizes s = sizes(scale);
  std::vector<Output> outs;
  {  // block_reduce: per item 4 elements in order, then the same tree.
    const auto x = floats(s.reduce_n, [](std::size_t i) { return input_float(1, i); });
    const int groups = (s.reduce_n + 1023) / 1024;
    std::vector<float> out(groups);
    float part[kReduceBlock];
    for (int b = 0; b < groups; ++b) {
      for (unsigned t = 0; t < kReduceBlock; ++t) {
        float v = 0.0f;
        for (unsigned i = 0; i < kReducePerItem; ++i) {
          const long long idx = static_cast<long long>(b) * 1024 + t + 256ll * i;
          if (idx < s.reduce_n) v += x[idx];
        }
        part[t] = v;
      }
      for (unsigned stride = kReduceBlock / 2; stride > 0; stride /= 2)
        for (unsigned t = 0; t < stride; ++t) part[t] = part[t] + part[t + stride];
      out[b] = part[0];
    }
    outs.push_back(as_output("block_reduce", out));
  }
  {  // wave_reduce: xor butterfly 16, 8, 4, 2, 1 over each 32 elements.
    const auto x = floats(s.wave_n, [](std::size_t i) { return input_float(2, i); });
    std::vector<float> out(s.wave_n / 32);
    for (int seg = 0; seg < s.wave_n / 32; ++seg) {
      float v[32], w[32];
      for (int l = 0; l < 32; ++l) v[l] = x[seg * 32 + l];
      for (int m = 16; m >= 1; m /= 2) {
        for (int l = 0; l < 32; ++l) w[l] = v[l] + v[l ^ m];
        std::memcpy(v, w, sizeof v);
      }
      out[seg] = v[0];
    }
    outs.push_back(as_output("wave_reduce", out));
  }
  {  // wave_scan: inclusive prefix sums per 32, then the totals.
    std::vector<int> out(s.scan_n), tot(s.scan_n / 32);
    for (int seg = 0; seg < s.scan_n / 32; ++seg) {
      int acc = 0;
      for (int l = 0; l < 32; ++l) out[seg * 32 + l] = acc += input_int(3, seg * 32 + l);
      tot[seg] = acc;
    }
    out.insert(out.end(), tot.begin(), tot.end());
    outs.push_back(as_output("wave_scan", out));
  }
  {  // lds_transpose
    std::vector<float> out(static_cast<std::size_t>(s.rows) * s.cols);
    for (int r = 0; r < s.rows; ++r)
      for (int c = 0; c < s.cols; ++c)
        out[static_cast<std::size_t>(c) * s.rows + r] = input_float(4, static_cast<std::size_t>(r) * s.cols + c);
    outs.push_back(as_output("lds_transpose", out));
  }
  {  // tile_gemm: exact sums of small integers.
    std::vector<float> out(static_cast<std::size_t>(s.gemm_m) * s.gemm_n);
    for (int i = 0; i < s.gemm_m; ++i)
      for (int j = 0; j < s.gemm_n; ++j) {
        float acc = 0.0f;
        for (int k = 0; k < kGemmK; ++k)
          acc += kgate::bf16_bits_to_fp32(input_small_bf16(5, static_cast<std::size_t>(i) * kGemmK + k)) *
                 kgate::bf16_bits_to_fp32(input_small_bf16(6, static_cast<std::size_t>(k) * s.gemm_n + j));
        out[static_cast<std::size_t>(i) * s.gemm_n + j] = acc;
      }
    outs.push_back(as_output("tile_gemm", out));
  }
  {  // hinted_copy: the input, unchanged (the last 2-byte block is half used)
    std::vector<std::uint32_t> out = hinted_input(s.copy_n);
    const std::size_t n = static_cast<std::size_t>(s.copy_n);
    std::memset(reinterpret_cast<unsigned char*>(out.data() + n * 14) + n * 2, 0, n * 2);
    outs.push_back(as_output("hinted_copy", out));
  }
  return outs;
}

}  // namespace kgate::conformance
