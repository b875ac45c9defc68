// single_read_skeleton (CUDA only): the memory traffic of a GroupNorm forward
// that reads x once, with no normalisation arithmetic, on the GPU it runs
// on. One cooperative launch: every block reads its chunks of bf16 x and sums
// them (the statistics pass), keeps its last S chunks in shared memory, waits
// at a grid barrier, then writes fp32 y in reverse chunk order, from shared
// memory for the kept chunks and re-reading x for the rest. Shared memory per
// block stays within the 64 KiB of gfx942 LDS that the real kernels may use.
//
//   single_read_skeleton [X_BYTES] [ITERS]
//
// Prints, per configuration, the time of the first phase alone (read, sum,
// grid barrier) and of the whole, as a share of the device-to-device copy
// bandwidth (bytes read plus written), next to the two-pass form (a read
// kernel, then a widening kernel in reverse order).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cg = cooperative_groups;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "single_read_skeleton: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

__device__ __forceinline__ float4 widen(uint2 u, float m) {
  return make_float4(__uint_as_float(u.x << 16) - m, __uint_as_float(u.x & 0xffff0000u) - m,
                     __uint_as_float(u.y << 16) - m, __uint_as_float(u.y & 0xffff0000u) - m);
}

__device__ __forceinline__ void accumulate(uint2 u, float& s, float& q) {
  const float a = __uint_as_float(u.x << 16), b = __uint_as_float(u.x & 0xffff0000u);
  const float c = __uint_as_float(u.y << 16), d = __uint_as_float(u.y & 0xffff0000u);
  s += (a + b) + (c + d);
  q = fmaf(a, a, fmaf(b, b, fmaf(c, c, fmaf(d, d, q))));
}

// A chunk is T x U units of 4 bf16 (8 bytes); block b takes chunks b, b + B,
// ... S of them (its last) stay in shared memory. phase1_only: stop after
// the grid barrier.
template <int T, int U, int S>
__global__ void __launch_bounds__(T) fused(const uint2* __restrict__ x, float4* __restrict__ y, float* part,
                                          long long nchunks, int phase1_only) {
  extern __shared__ uint2 kept[];
  const long long B = gridDim.x, b = blockIdx.x;
  const int t = threadIdx.x;
  const long long nb = (nchunks - b + B - 1) / B;
  float s = 0.f, q = 0.f;
  for (long long i = 0; i < nb; ++i) {
    const uint2* src = x + (b + i * B) * (T * U) + t;
    uint2 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = src[j * T];
#pragma unroll
    for (int j = 0; j < U; ++j) accumulate(v[j], s, q);
    if (S > 0 && i >= nb - S)
#pragma unroll
      for (int j = 0; j < U; ++j) kept[(i - (nb - S)) * T * U + j * T + t] = v[j];
  }
  part[2 * (b * T + t)] = s;
  part[2 * (b * T + t) + 1] = q;
  cg::this_grid().sync();
  if (phase1_only) return;
  const float m = part[0] * 1e-9f;
  for (long long i = nb - 1; i >= 0; --i) {
    float4* dst = y + (b + i * B) * (T * U) + t;
    uint2 v[U];
    if (S > 0 && i >= nb - S) {
#pragma unroll
      for (int j = 0; j < U; ++j) v[j] = kept[(i - (nb - S)) * T * U + j * T + t];
    } else {
      const uint2* src = x + (b + i * B) * (T * U) + t;
#pragma unroll
      for (int j = 0; j < U; ++j) v[j] = __ldcs(src + j * T);
    }
#pragma unroll
    for (int j = 0; j < U; ++j) __stcs(dst + j * T, widen(v[j], m));
  }
}

template <int T, int U>
__global__ void __launch_bounds__(T) read_sum(const uint2* __restrict__ x, float* part, long long nchunks) {
  float s = 0.f, q = 0.f;
  for (long long c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const uint2* src = x + c * (T * U) + threadIdx.x;
    uint2 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = src[j * T];
#pragma unroll
    for (int j = 0; j < U; ++j) accumulate(v[j], s, q);
  }
  part[2 * (blockIdx.x * T + threadIdx.x)] = s;
  part[2 * (blockIdx.x * T + threadIdx.x) + 1] = q;
}

template <int T, int U>
__global__ void __launch_bounds__(T) widen_reverse(const uint2* __restrict__ x, float4* __restrict__ y,
                                                   const float* part, long long nchunks) {
  const float m = part[0] * 1e-9f;
  for (long long c = nchunks - 1 - blockIdx.x; c >= 0; c -= gridDim.x) {
    const uint2* src = x + c * (T * U) + threadIdx.x;
    float4* dst = y + c * (T * U) + threadIdx.x;
    uint2 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = __ldcs(src + j * T);
#pragma unroll
    for (int j = 0; j < U; ++j) __stcs(dst + j * T, widen(v[j], m));
  }
}

int g_iters = 20;

template <class F>
float time_ms(F f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) f();
  check(cudaDeviceSynchronize(), "warm-up");
  check(cudaEventRecord(a), "cudaEventRecord");
  for (int i = 0; i < g_iters; ++i) f();
  check(cudaEventRecord(b), "cudaEventRecord");
  check(cudaEventSynchronize(b), "timed runs");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  check(cudaEventDestroy(a), "cudaEventDestroy");
  check(cudaEventDestroy(b), "cudaEventDestroy");
  return ms / g_iters;
}

struct Bench {
  const uint2* x;
  float4* y;
  float* part;
  size_t xbytes;
  double copy;  // GB/s
  int sms;
  double share(float ms) const { return 100.0 * 3.0 * xbytes / (ms * 1e6) / copy; }
};

template <int T, int U, int S>
void run_fused(const Bench& k, int blocks_per_sm) {
  auto kernel = fused<T, U, S>;
  const size_t smem = static_cast<size_t>(S) * T * U * sizeof(uint2);
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute");
  int occ = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, T, smem), "occupancy");
  if (occ < blocks_per_sm) {
    std::printf("  T=%d U=%d S=%d: only %d blocks per SM fit\n", T, U, S, occ);
    return;
  }
  const int blocks = k.sms * blocks_per_sm;
  long long nchunks = static_cast<long long>(k.xbytes / 8) / (T * U);
  float ms[2];
  for (int phase1_only : {1, 0}) {
    void* args[] = {(void*)&k.x, (void*)&k.y, (void*)&k.part, (void*)&nchunks, (void*)&phase1_only};
    ms[phase1_only] = time_ms([&] {
      check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel), blocks, T, args, smem, nullptr),
            "cudaLaunchCooperativeKernel");
    });
  }
  std::printf("  single read, %4d blocks of %4d, %2d KiB of x per block kept (%5.1f MB): phase 1 %.4f ms, "
              "whole %.4f ms, %.1f%% of copy\n",
              blocks, T, static_cast<int>(smem / 1024), static_cast<double>(smem) * blocks / 1e6, ms[1], ms[0],
              k.share(ms[0]));
}

template <int T, int U>
void run_two_pass(const Bench& k) {
  const long long nchunks = static_cast<long long>(k.xbytes / 8) / (T * U);
  const int grid = k.sms * (2048 / T);
  const float ms = time_ms([&] {
    read_sum<T, U><<<grid, T>>>(k.x, k.part, nchunks);
    widen_reverse<T, U><<<grid, T>>>(k.x, k.y, k.part, nchunks);
  });
  check(cudaGetLastError(), "two-pass launch");
  std::printf("  two passes, %4d blocks of %4d: %.4f ms, %.1f%% of copy\n", grid, T, ms, k.share(ms));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("usage: single_read_skeleton [X_BYTES] [ITERS]\n  the single-read GroupNorm forward's traffic "
                "(see single_read_skeleton.cu)\n");
    return 0;
  }
  const size_t xbytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 268435456ull;
  if (argc > 2) g_iters = std::atoi(argv[2]);
  if (xbytes < (1u << 20) || xbytes % (1u << 16) != 0 || g_iters < 1) {
    std::fprintf(stderr, "single_read_skeleton: X_BYTES must be a multiple of 65536 of at least 1 MiB; ITERS >= 1\n");
    return 2;
  }
  cudaDeviceProp p;
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  Bench k{};
  k.xbytes = xbytes;
  k.sms = p.multiProcessorCount;
  void *a = nullptr, *b = nullptr;
  const size_t cb = 1ull << 30;
  check(cudaMalloc(&a, cb), "cudaMalloc");
  check(cudaMalloc(&b, cb), "cudaMalloc");
  check(cudaMemset(a, 0, cb), "cudaMemset");
  const float cms = time_ms([&] { check(cudaMemcpy(b, a, cb, cudaMemcpyDeviceToDevice), "cudaMemcpy"); });
  k.copy = 2.0 * cb / (cms * 1e6);
  check(cudaFree(a), "cudaFree");
  check(cudaFree(b), "cudaFree");
  uint2* x = nullptr;
  float4* y = nullptr;
  check(cudaMalloc(&x, xbytes), "cudaMalloc(x)");
  check(cudaMalloc(&y, 2 * xbytes), "cudaMalloc(y)");
  check(cudaMalloc(&k.part, 2 * sizeof(float) * 2048 * k.sms), "cudaMalloc(partials)");
  check(cudaMemset(x, 0x3f, xbytes), "cudaMemset(x)");
  k.x = x;
  k.y = y;
  std::printf("%s: %d SMs, L2 %d MB, %zu KiB shared memory per SM; copy (1 GiB) %.1f GB/s\n", p.name, k.sms,
              p.l2CacheSize >> 20, p.sharedMemPerMultiprocessor >> 10, k.copy);
  std::printf("x: %zu bytes of bf16 read, %zu bytes of fp32 written\n", xbytes, 2 * xbytes);
  run_two_pass<512, 2>(k);
  run_two_pass<256, 8>(k);
  run_fused<512, 2, 0>(k, 3);
  run_fused<512, 2, 8>(k, 3);
  run_fused<1024, 2, 0>(k, 2);
  run_fused<1024, 2, 4>(k, 2);
  run_fused<256, 8, 4>(k, 3);
  return 0;
}
