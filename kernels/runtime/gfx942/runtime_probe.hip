// Every operation of the runtime in kernels, plus the host API, so that the
// gfx942 gate compiles the whole HIP mapping (device ISA and host side).
// The same source also builds on the host backend (test_runtime_probe).
#include "kernels/runtime/runtime.hpp"

namespace rt = kgate::rt;

namespace kgate::probe {

KGATE_KERNEL_BOUNDS(probe_wave_ops, 256, int* out, std::uint64_t* masks, double* d) {
  const unsigned t = rt::flat_thread_idx();
  const int lane = rt::lane_id();
  int v = static_cast<int>(t);
  v += rt::shfl(v, 3);
  v += rt::shfl(v, 5, 16);
  v += rt::shfl_xor(v, 1);
  v += rt::shfl_xor(v, 2, 8);
  v += rt::shfl_up(v, 1u);
  v += rt::shfl_up(v, 2u, 32);
  v += rt::shfl_down(v, 1u);
  v += rt::shfl_down(v, 4u, 16);
  const double x = rt::shfl_xor(0.5 * lane, 4);
  const int first = rt::readfirstlane(v);
  const std::uint64_t b = rt::ballot(v > 0);
  const bool any = rt::wave_any(lane == 7), all = rt::wave_all(lane < 64);
  out[t] = v + first + (any ? 1 : 0) + (all ? 2 : 0) + rt::wave_id() * 0 + rt::wave_size() * 0;
  masks[t] = b;
  d[t] = x;
}

KGATE_KERNEL_BOUNDS(probe_atomics, 256, int* i32, unsigned* u32, std::uint64_t* u64, std::int64_t* i64, float* f) {
  const int t = static_cast<int>(rt::flat_thread_idx());
  rt::atomic_add(&i32[0], 1);
  rt::atomic_sub(&i32[1], 1);
  rt::atomic_min(&i32[2], t);
  rt::atomic_max(&i32[3], t);
  rt::atomic_and(&u32[0], 0xffu);
  rt::atomic_or(&u32[1], 1u << (t % 32));
  rt::atomic_xor(&u32[2], 1u);
  rt::atomic_exch(&i32[4], t);
  rt::atomic_cas(&i32[5], 0, t);
  rt::atomic_add(&u64[0], std::uint64_t{1});
  rt::atomic_max(&i64[0], static_cast<std::int64_t>(t));
  rt::atomic_min(&i64[1], static_cast<std::int64_t>(-t));
  rt::atomic_add_unordered(&f[0], 1.0f);
}

KGATE_KERNEL_BOUNDS(probe_lds, 256, float* out) {
  KGATE_LDS(stat, float, 256 * 4);
  KGATE_LDS_DYNAMIC(dyn, float);
  const unsigned t = rt::flat_thread_idx();
  struct alignas(16) f4 {
    float v[4];
  };
  KGATE_LDS(copied, float, 256 * 4);
  stat.store<f4>(4 * t, f4{{1.0f, 2.0f, 3.0f, static_cast<float>(t)}});
  dyn[t] = static_cast<float>(t);
  copied.copy_async<f4>(4 * t, reinterpret_cast<const f4*>(out) + t, t % 2 == 0);
  rt::async_commit();
  rt::async_wait<0>();
  rt::barrier();
  const f4 y = stat.load<f4>(4 * (255 - t));
  const float z = dyn[255 - t];
  const float w = copied[4 * (255 - t)];
  out[t] = y.v[3] + z + w;
}

KGATE_KERNEL_BOUNDS(probe_mfma, 64, const float* in, float* out) {
  const int l = rt::lane_id();
  rt::bf16x4 a16{}, b16{};
  rt::f16x4 ah{}, bh{};
  rt::f32x2 ax{}, bx{};
  for (int e = 0; e < 4; ++e) {
    a16[e] = static_cast<short>(kgate::fp32_to_bf16_bits(in[4 * l + e]));
    b16[e] = static_cast<short>(kgate::fp32_to_bf16_bits(in[256 + 4 * l + e]));
    ah[e] = static_cast<short>(kgate::fp32_to_fp16_bits(in[4 * l + e]));
    bh[e] = static_cast<short>(kgate::fp32_to_fp16_bits(in[256 + 4 * l + e]));
  }
  for (int e = 0; e < 2; ++e) {
    ax[e] = in[2 * l + e];
    bx[e] = in[128 + 2 * l + e];
  }
  rt::f32x16 c16{};
  rt::f32x4 c4{};
  c16 = rt::mfma_32x32x8bf16_1k(a16, b16, c16);
  c16 = rt::mfma_32x32x8f16(ah, bh, c16);
  c16 = rt::mfma_32x32x2f32(in[l], in[64 + l], c16);
  c16 = rt::mfma_32x32x4xf32(ax, bx, c16);
  c4 = rt::mfma_16x16x16bf16_1k(a16, b16, c4);
  c4 = rt::mfma_16x16x16f16(ah, bh, c4);
  c4 = rt::mfma_16x16x4f32(in[l], in[64 + l], c4);
  c4 = rt::mfma_16x16x8xf32(ax, bx, c4);
  for (int r = 0; r < 16; ++r) out[16 * l + r] = c16[r];
  for (int r = 0; r < 4; ++r) out[1024 + 4 * l + r] = c4[r];
}

// Host side: every memory, stream, event and launch call.
float launch_all() {
  rt::Stream s;
  rt::Event start, stop;
  rt::DeviceBuffer<int> i32(256);
  rt::DeviceBuffer<unsigned> u32(4);
  rt::DeviceBuffer<std::uint64_t> u64(256);
  rt::DeviceBuffer<std::int64_t> i64(2);
  rt::DeviceBuffer<float> f(2048);
  rt::DeviceBuffer<double> d(256);
  rt::device_memset(i32.data(), 0, i32.bytes(), &s);
  rt::device_memset(u32.data(), 0, u32.bytes());
  rt::device_memset(u64.data(), 0, u64.bytes());
  rt::device_memset(i64.data(), 0, i64.bytes());
  std::vector<float> host(2048, 0.5f);
  rt::copy_h2d(f.data(), host.data(), f.bytes(), &s);
  start.record(&s);
  KGATE_LAUNCH(probe_wave_ops, (rt::LaunchConfig{1, 256, 0, &s}), i32.data(), u64.data(), d.data());
  KGATE_LAUNCH(probe_atomics, (rt::LaunchConfig{1, 256, 0, &s}), i32.data(), u32.data(), u64.data(), i64.data(),
               f.data());
  KGATE_LAUNCH(probe_lds, (rt::LaunchConfig{1, 256, 256 * sizeof(float), &s}), f.data());
  KGATE_LAUNCH(probe_mfma, (rt::LaunchConfig{1, 64, 0, &s}), static_cast<const float*>(f.data()), f.data() + 512);
  stop.record(&s);
  stop.synchronize();
  rt::copy_d2d(f.data(), f.data() + 1024, 16, &s);
  rt::copy_d2h(host.data(), f.data(), f.bytes(), &s);
  s.synchronize();
  rt::device_synchronize();
  return rt::elapsed_ms(start, stop);
}

}  // namespace kgate::probe
