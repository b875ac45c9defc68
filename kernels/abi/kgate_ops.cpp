// kgate_ops.h over kernels/api.hpp: one instance per backend (the host
// library compiles this file; the CUDA one includes it in kgate_ops_cuda.cu).
#include "kernels/abi/kgate_ops.h"

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "kernels/api.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/descriptor.hpp"
#include "reference/error.hpp"

namespace {

using namespace kgate;

void put(char* msg, std::size_t size, const std::string& s) {
  if (!msg || size == 0) return;
  const std::size_t n = std::min(size - 1, s.size());
  std::memcpy(msg, s.data(), n);
  msg[n] = '\0';
}

struct Entry {
  Problem problem;
  kernels::Support support;
  kernels::Plan plan;
};

// Parsed problems and their plans, by descriptor (plans are functions of
// the problem, so the cache never goes stale).
const Entry& entry(const std::string& descriptor) {
  static std::mutex m;
  static std::unordered_map<std::string, Entry> cache;
  std::lock_guard lock(m);
  auto it = cache.find(descriptor);
  if (it != cache.end()) return it->second;
  Entry e{parse_descriptor(descriptor), {}, {}};
  validate(e.problem);
  e.support = kernels::is_supported(e.problem);
  if (e.support) e.plan = kernels::plan(e.problem);
  return cache.emplace(descriptor, std::move(e)).first->second;
}

// Why `t` cannot be `spec` ("" when it can), and whether that is a decline
// (a layout the caller can fall back from) rather than bad input.
std::string mismatch(const kgate_ops_tensor& t, const TensorSpec& spec, bool& decline) {
  const std::string role(name(spec.role));
  decline = false;
  if (!t.dtype || std::string(t.dtype) != name(spec.dtype))
    return role + ": dtype " + (t.dtype ? t.dtype : "(null)") + ", the problem's is " + std::string(name(spec.dtype));
  if (t.ndim != static_cast<int32_t>(spec.dims.size()) || t.ndim > 8)
    return role + ": " + std::to_string(t.ndim) + " dims, expected " + std::to_string(spec.dims.size());
  for (int i = 0; i < t.ndim; ++i)
    if (t.dims[i] != spec.dims[i]) {
      Dims got(t.dims, t.dims + t.ndim);
      return role + ": dims " + dims_string(got) + ", expected " + dims_string(spec.dims) + " (NDHWC)";
    }
  decline = true;
  std::int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.dims[i] != 1 && t.strides[i] != stride)
      return role + ": not dense NDHWC (stride " + std::to_string(t.strides[i]) + " on axis " + std::to_string(i) +
             ", expected " + std::to_string(stride) + "; in PyTorch: channels_last_3d-contiguous)";
    stride *= t.dims[i];
  }
  if (!t.data) {
    decline = false;
    return role + ": null data";
  }
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0) return role + ": not 16-byte aligned";
  decline = false;
  return "";
}

}  // namespace

extern "C" {

int32_t kgate_ops_abi_version(void) { return KGATE_OPS_ABI_VERSION; }

const char* kgate_ops_backend(void) {
  static const std::string b = kernels::backend_name();
  return b.c_str();
}

int32_t kgate_ops_query(const char* descriptor, int32_t* supported, uint64_t* workspace_bytes, char* msg,
                        size_t msg_size) {
  try {
    if (!descriptor || !supported || !workspace_bytes) {
      put(msg, msg_size, "kgate_ops_query: null argument");
      return KGATE_OPS_BAD_INPUT;
    }
    const Entry& e = entry(descriptor);
    *supported = e.support ? 1 : 0;
    *workspace_bytes = e.support ? e.plan.workspace_bytes : 0;
    put(msg, msg_size, e.support ? "" : e.support.reason);
    return KGATE_OPS_OK;
  } catch (const InputError& ex) {
    put(msg, msg_size, ex.what());
    return KGATE_OPS_BAD_INPUT;
  } catch (const std::exception& ex) {
    put(msg, msg_size, ex.what());
    return KGATE_OPS_LAUNCH_FAILED;
  } catch (...) {
    put(msg, msg_size, "unknown error");
    return KGATE_OPS_LAUNCH_FAILED;
  }
}

int32_t kgate_ops_run(const char* descriptor, const kgate_ops_tensor* tensors, int32_t n_tensors, void* workspace,
                      uint64_t workspace_bytes, void* stream, char* msg, size_t msg_size) {
  try {
    if (!descriptor || (n_tensors > 0 && !tensors) || n_tensors < 0) {
      put(msg, msg_size, "kgate_ops_run: null argument");
      return KGATE_OPS_BAD_INPUT;
    }
    const Entry& e = entry(descriptor);
    const std::string desc = to_descriptor(e.problem);
    if (!e.support) {
      put(msg, msg_size, desc + ": " + e.support.reason);
      return KGATE_OPS_DECLINED;
    }
    std::map<std::string, const kgate_ops_tensor*> by_role;
    for (int32_t i = 0; i < n_tensors; ++i) {
      const std::string r = tensors[i].role ? tensors[i].role : "";
      if (!by_role.emplace(r, &tensors[i]).second) {
        put(msg, msg_size, desc + ": tensor " + r + " given twice");
        return KGATE_OPS_BAD_INPUT;
      }
    }
    kernels::DeviceArgs args;
    std::size_t used = 0;
    auto take = [&](const TensorSpec& s, bool output) -> int32_t {
      const auto it = by_role.find(std::string(name(s.role)));
      if (it == by_role.end()) {
        put(msg, msg_size, desc + ": missing tensor " + std::string(name(s.role)));
        return KGATE_OPS_BAD_INPUT;
      }
      bool decline = false;
      if (const std::string why = mismatch(*it->second, s, decline); !why.empty()) {
        put(msg, msg_size, desc + ": " + why);
        return decline ? KGATE_OPS_DECLINED : KGATE_OPS_BAD_INPUT;
      }
      ++used;
      if (output) args.out[s.role] = it->second->data;
      else args.in[s.role] = it->second->data;
      return KGATE_OPS_OK;
    };
    for (const auto& s : inputs(e.problem))
      if (const int32_t st = take(s, false); st != KGATE_OPS_OK) return st;
    for (const auto& s : outputs(e.problem))
      if (const int32_t st = take(s, true); st != KGATE_OPS_OK) return st;
    if (used != by_role.size()) {
      std::set<std::string> known;
      for (const auto& s : inputs(e.problem)) known.insert(std::string(name(s.role)));
      for (const auto& s : outputs(e.problem)) known.insert(std::string(name(s.role)));
      for (const auto& [r, t] : by_role)
        if (!known.count(r)) {
          put(msg, msg_size, desc + ": tensor '" + r + "' is not a tensor of this problem");
          return KGATE_OPS_BAD_INPUT;
        }
    }
    if (workspace_bytes < e.plan.workspace_bytes || (e.plan.workspace_bytes > 0 && !workspace)) {
      put(msg, msg_size, desc + ": workspace of " + std::to_string(workspace_bytes) + " bytes, the plan needs " +
                             std::to_string(e.plan.workspace_bytes) + " (kgate_ops_query)");
      return KGATE_OPS_BAD_INPUT;
    }
    if (workspace && reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0) {
      put(msg, msg_size, desc + ": workspace not 16-byte aligned");
      return KGATE_OPS_BAD_INPUT;
    }
    args.workspace = workspace;
    rt::StreamScope on(stream);
    kernels::launch(e.problem, e.plan, args);
    put(msg, msg_size, "");
    return KGATE_OPS_OK;
  } catch (const InputError& ex) {
    put(msg, msg_size, ex.what());
    return KGATE_OPS_BAD_INPUT;
  } catch (const std::exception& ex) {
    put(msg, msg_size, std::string(descriptor ? descriptor : "") + ": " + ex.what());
    return KGATE_OPS_LAUNCH_FAILED;
  } catch (...) {
    put(msg, msg_size, "unknown error");
    return KGATE_OPS_LAUNCH_FAILED;
  }
}

}  // extern "C"
