// The backend half of the audit (audit_env.hpp). Host-only parts are behind
// rt::backend checks at compile time so that this file compiles unchanged
// for every backend.
#include "determinism/audit_env.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "kernels/runtime/runtime.hpp"

namespace kgate::determinism {

namespace {

constexpr bool kHost = rt::backend == rt::Backend::host;

#if !defined(__CUDACC__) && !defined(__HIP__)
struct HostEnv {
  std::string name;
  int threads;
  rt::host::Order order;
  int wave;
};
const std::vector<HostEnv>& host_run_envs() {
  static const std::vector<HostEnv> e{
      {"threads=1 order=in_order", 1, rt::host::Order::in_order, 64},
      {"threads=4 order=in_order", 4, rt::host::Order::in_order, 64},
      {"threads=1 order=reversed", 1, rt::host::Order::reversed, 64},
      {"threads=4 order=reversed", 4, rt::host::Order::reversed, 64},
      {"threads=1 order=shuffled", 1, rt::host::Order::shuffled, 64},
      {"threads=4 order=shuffled", 4, rt::host::Order::shuffled, 64},
  };
  return e;
}
const std::vector<HostEnv>& host_plan_envs() {
  static const std::vector<HostEnv> e{
      {"threads=1", 1, rt::host::Order::in_order, 64},
      {"threads=4 order=reversed", 4, rt::host::Order::reversed, 64},
      {"wave=32 (emulated 32-wide target)", 1, rt::host::Order::in_order, 32},
  };
  return e;
}
#endif

// Streams a buffer and rewrites it: memory traffic that competes with the
// audited kernel's.
constexpr int kNoiseThreads = 256;
KGATE_KERNEL_BOUNDS(audit_noise, kNoiseThreads, unsigned* buf, std::uint64_t n, unsigned salt) {
  const std::uint64_t stride = static_cast<std::uint64_t>(rt::grid_dim().x) * kNoiseThreads;
  for (std::uint64_t i = static_cast<std::uint64_t>(rt::block_idx().x) * kNoiseThreads + rt::thread_idx().x; i < n;
       i += stride)
    buf[i] = buf[i] * 1664525u + 1013904223u + salt;
}

// Per block: a tree-free sequential partial of its slice, then one float
// atomic add into out[0] (or a plain store into out[block] when
// `deterministic`).
constexpr int kControlThreads = 64;
KGATE_KERNEL_BOUNDS(audit_control, kControlThreads, const float* x, float* out, int per_block, int deterministic) {
  KGATE_LDS(part, float, kControlThreads);
  const int t = static_cast<int>(rt::thread_idx().x);
  float s = 0.0f;
  for (int i = t; i < per_block; i += kControlThreads) s += x[rt::block_idx().x * per_block + i];
  part[t] = s;
  rt::barrier();
  if (t == 0) {
    float total = 0.0f;
    for (int i = 0; i < kControlThreads; ++i) {
      const float v = part[i];
      total += v;
    }
    if (deterministic) out[rt::block_idx().x] = total;
    else rt::atomic_add_unordered(out, total);
  }
}

}  // namespace

namespace {
#if !defined(__CUDACC__) && !defined(__HIP__)
std::vector<std::string> names(const std::vector<HostEnv>& envs) {
  std::vector<std::string> n;
  for (const auto& e : envs) n.push_back(e.name);
  return n;
}
#endif
}  // namespace

std::vector<std::string> run_environments() {
#if !defined(__CUDACC__) && !defined(__HIP__)
  return names(host_run_envs());
#else
  return {"device"};
#endif
}

std::vector<std::string> plan_environments() {
#if !defined(__CUDACC__) && !defined(__HIP__)
  return names(host_plan_envs());
#else
  return {"device"};
#endif
}

std::vector<ProcessEnv> plan_process_environments() {
#if defined(__CUDACC__)
  std::vector<ProcessEnv> e{
      {"no visible device (CUDA_VISIBLE_DEVICES=)", {"CUDA_VISIBLE_DEVICES="}},
      {"one hardware queue, eager module loading", {"CUDA_DEVICE_MAX_CONNECTIONS=1", "CUDA_MODULE_LOADING=EAGER"}},
  };
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 1)
    e.push_back({"the last device (CUDA_VISIBLE_DEVICES=" + std::to_string(n - 1) + ")",
                 {"CUDA_VISIBLE_DEVICES=" + std::to_string(n - 1)}});
  return e;
#elif defined(__HIP__)
  std::vector<ProcessEnv> e{
      {"no visible device (HIP_VISIBLE_DEVICES=, ROCR_VISIBLE_DEVICES=)", {"HIP_VISIBLE_DEVICES=", "ROCR_VISIBLE_DEVICES="}},
  };
  int n = 0;
  if (hipGetDeviceCount(&n) == hipSuccess && n > 1)
    e.push_back({"the last device (HIP_VISIBLE_DEVICES=" + std::to_string(n - 1) + ")",
                 {"HIP_VISIBLE_DEVICES=" + std::to_string(n - 1)}});
  return e;
#else
  return {{"KGATE_HOST_THREADS=1 KGATE_HOST_ORDER=reversed", {"KGATE_HOST_THREADS=1", "KGATE_HOST_ORDER=reversed"}},
          {"KGATE_HOST_THREADS=3 KGATE_HOST_ORDER=shuffled", {"KGATE_HOST_THREADS=3", "KGATE_HOST_ORDER=shuffled"}}};
#endif
}

struct EnvScope::Impl {
#if !defined(__CUDACC__) && !defined(__HIP__)
  std::optional<rt::host::ScopedConfig> scope;
#endif
};

EnvScope::EnvScope(bool plan_env, std::size_t index, std::uint64_t seed) : impl_(std::make_unique<Impl>()) {
#if !defined(__CUDACC__) && !defined(__HIP__)
  const auto& list = plan_env ? host_plan_envs() : host_run_envs();
  const HostEnv& e = list.at(index % list.size());
  rt::host::Config c = rt::host::config();
  c.threads = e.threads;
  c.order = e.order;
  c.wave_size = c.target == rt::Target::sm90 ? 32 : e.wave;  // the sm90 target is warp32 only
  c.seed = seed;
  impl_->scope.emplace(c);
#else
  (void)plan_env;
  (void)index;
  (void)seed;
#endif
}
EnvScope::~EnvScope() = default;

struct Noise::Impl {
  std::atomic<bool> stop{false}, active{false};
  std::atomic<std::uint64_t> rounds{0};
  std::thread worker;
};

std::string Noise::description() {
  return kHost ? "a CPU thread streaming 32 MiB through memory"
               : "a memory-bound kernel over 256 MiB relaunched on a concurrent stream";
}

Noise::Noise() : impl_(std::make_unique<Impl>()) {
  Impl* im = impl_.get();
  std::atomic<bool> ready{false};
  im->worker = std::thread([im, &ready] {
    const auto idle = [im] {
      while (!im->active.load() && !im->stop.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    };
    if constexpr (kHost) {
      std::vector<unsigned> buf(8u << 20, 1u);
      ready = true;
      unsigned salt = 0;
      while (!im->stop.load(std::memory_order_relaxed)) {
        idle();
        // Passes of 1 Mi elements, so that pausing takes effect quickly.
        const std::size_t base = (salt % 8) * (1u << 20);
        for (std::size_t i = base; i < base + (1u << 20); ++i) buf[i] = buf[i] * 1664525u + 1013904223u + salt;
        ++salt;
        im->rounds.fetch_add(1, std::memory_order_relaxed);
      }
    } else {
      // The buffer and stream are created on the worker thread and live there.
      const std::uint64_t n = (256ull << 20) / sizeof(unsigned);
      rt::DeviceBuffer<unsigned> buf(n);
      rt::Stream s(true);
      rt::LaunchConfig cfg;
      cfg.grid = rt::dim3(1024);
      cfg.block = rt::dim3(kNoiseThreads);
      cfg.stream = &s;
      ready = true;
      unsigned salt = 0;
      while (!im->stop.load(std::memory_order_relaxed)) {
        idle();
        for (int k = 0; k < 4; ++k) KGATE_LAUNCH(audit_noise, cfg, buf.data(), n, salt++);
        s.synchronize();
        im->rounds.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  while (!ready) std::this_thread::yield();
}

Noise::~Noise() {
  impl_->stop = true;
  if (impl_->worker.joinable()) impl_->worker.join();
}

void Noise::set_active(bool on) {
  const std::uint64_t before = impl_->rounds.load();
  impl_->active = on;
  if (on)
    while (impl_->rounds.load() == before) std::this_thread::yield();
}

std::uint64_t Noise::launches() const { return impl_->rounds.load(); }

std::vector<float> control_run(std::size_t env, std::uint64_t seed, bool deterministic) {
  // Enough blocks that the order of arrival varies on a GPU; on the host the
  // environment's workgroup order varies it.
  const int blocks = kHost ? 64 : 4096, per = 256;
  std::vector<float> x(static_cast<std::size_t>(blocks) * per);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 2654435761u) % 1000003) * 1e-3f * ((i % 3) ? 1.0f : -1.0f) *
           (i % 7 == 0 ? 1e4f : 1.0f);
  EnvScope scope(false, env, seed);
  rt::DeviceBuffer<float> dx(x.size()), dout(deterministic ? blocks : 1);
  dx.upload(x);
  dout.upload(std::vector<float>(dout.size(), 0.0f));
  rt::LaunchConfig cfg;
  cfg.grid = rt::dim3(static_cast<std::uint32_t>(blocks));
  cfg.block = rt::dim3(kControlThreads);
  KGATE_LAUNCH(audit_control, cfg, dx.data(), dout.data(), per, deterministic ? 1 : 0);
  rt::device_synchronize();
  return dout.download();
}

}  // namespace kgate::determinism
