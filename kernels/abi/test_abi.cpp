// kgate's C ABI (libkgate_ops_host.so, loaded with dlopen as a framework
// would): on every operator it gives the bits the host-tensor driver gives;
// every malformed call is a status and a message, never an exception or a
// crash; a layout the kernels do not take is a decline the caller can fall
// back from.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/abi/kgate_ops.h"
#include "kernels/api.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"

namespace kgate {
namespace {

struct Lib {
  void* h = dlopen(KGATE_OPS_LIB, RTLD_NOW | RTLD_LOCAL);
  decltype(&kgate_ops_abi_version) version = reinterpret_cast<decltype(version)>(dlsym(h, "kgate_ops_abi_version"));
  decltype(&kgate_ops_backend) backend = reinterpret_cast<decltype(backend)>(dlsym(h, "kgate_ops_backend"));
  decltype(&kgate_ops_query) query = reinterpret_cast<decltype(query)>(dlsym(h, "kgate_ops_query"));
  decltype(&kgate_ops_run) run = reinterpret_cast<decltype(run)>(dlsym(h, "kgate_ops_run"));
  ~Lib() {
    if (h) dlclose(h);
  }
};

Lib& lib() {
  static Lib l;
  return l;
}

kgate_ops_tensor view(const char* role, void* data, DType t, const Dims& d) {
  kgate_ops_tensor v{};
  v.role = role;
  v.data = data;
  v.dtype = name(t).data();
  v.ndim = static_cast<int32_t>(d.size());
  std::int64_t stride = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    v.dims[i] = d[i];
    v.strides[i] = stride;
    stride *= d[i];
  }
  return v;
}

// A call's tensors over host memory (the host backend's device memory):
// the inputs of `in`, zeroed outputs, and a workspace.
struct Call {
  std::string desc;
  Problem p;
  std::map<Role, Tensor> in, out;
  std::vector<kgate_ops_tensor> views;
  std::vector<std::byte> ws;
  std::uint64_t ws_bytes = 0;
  Call(const std::string& d, const Fill& f) : desc(d), p(parse_descriptor(d)), in(ref::make_inputs(p, f)) {
    int32_t ok = 0;
    char msg[512];
    EXPECT_EQ(lib().query(d.c_str(), &ok, &ws_bytes, msg, sizeof msg), KGATE_OPS_OK) << msg;
    EXPECT_EQ(ok, 1) << msg;
    ws.resize(ws_bytes + 16);
    for (const auto& s : inputs(p)) views.push_back(view(name(s.role).data(), in.at(s.role).data(), s.dtype, s.dims));
    for (const auto& s : outputs(p)) {
      out.emplace(s.role, Tensor(s.dtype, s.dims));
      views.push_back(view(name(s.role).data(), out.at(s.role).data(), s.dtype, s.dims));
    }
  }
  void* workspace() {
    auto a = reinterpret_cast<std::uintptr_t>(ws.data());
    return reinterpret_cast<void*>((a + 15) / 16 * 16);
  }
  int32_t run(std::string* message = nullptr) {
    char msg[1024];
    const int32_t st = lib().run(desc.c_str(), views.data(), static_cast<int32_t>(views.size()), workspace(), ws_bytes,
                                 nullptr, msg, sizeof msg);
    if (message) *message = msg;
    return st;
  }
};

TEST(Abi, VersionAndBackend) {
  ASSERT_NE(lib().h, nullptr) << dlerror();
  EXPECT_EQ(lib().version(), KGATE_OPS_ABI_VERSION);
  EXPECT_STREQ(lib().backend(), "host");
}

TEST(Abi, GivesTheDriversBitsOnEveryOperator) {
  for (const char* d : {"conv3d.fwd bf16 n1 c16 k32 d6 kd3 p1 bias", "conv3d.bwd_data fp16:fp32 n2 c8 k4 d5 kd3 s2 p1",
                        "conv3d.bwd_weight bf16:fp32 n1 c32 k16 d6 kd3 p1 bias",
                        "conv_transpose3d.fwd fp32 n1 c4 k6 d3 kd2 s2 bias", "conv_transpose3d.bwd_data bf16 n1 c8 k4 d4 kd3 p1",
                        "conv_transpose3d.bwd_weight fp16:fp32 n1 c4 k4 d3 kd2 s2 bias",
                        "groupnorm.fwd bf16 n2 c32 g8 d4 relu", "groupnorm.bwd bf16 n1 c16 g4 d4 relu",
                        "groupnorm.fwd fp32 n1 c8 g2 d3 noaffine"}) {
    Call c(d, parse_fill("signed", 7));
    std::string msg;
    ASSERT_EQ(c.run(&msg), KGATE_OPS_OK) << d << ": " << msg;
    const auto want = kernels::run(c.p, kernels::plan(c.p), kernels::pointers(c.in));
    for (const auto& [role, t] : want) EXPECT_EQ(digest(c.out.at(role)), digest(t)) << d << " " << name(role);
  }
}

TEST(Abi, LayoutsTheKernelsDoNotTakeAreDeclined) {
  Call c("conv3d.fwd bf16 n1 c16 k16 d4 kd3 p1", parse_fill("signed", 1));
  std::string msg;
  // Channels-first strides for x (NCDHW memory behind NDHWC dims).
  kgate_ops_tensor saved = c.views[0];
  c.views[0].strides[4] = 64;
  c.views[0].strides[3] = 1;
  EXPECT_EQ(c.run(&msg), KGATE_OPS_DECLINED);
  EXPECT_NE(msg.find("x: not dense NDHWC"), std::string::npos) << msg;
  c.views[0] = saved;
  c.views[0].data = static_cast<char*>(c.views[0].data) + 2;
  EXPECT_EQ(c.run(&msg), KGATE_OPS_DECLINED);
  EXPECT_NE(msg.find("x: not 16-byte aligned"), std::string::npos) << msg;
  c.views[0] = saved;
  EXPECT_EQ(c.run(&msg), KGATE_OPS_OK) << msg;
  // An unsupported problem: queried as such, declined when run.
  int32_t ok = 1;
  std::uint64_t ws = 0;
  char m[256];
  ASSERT_EQ(lib().query("conv3d.fwd fp16:bf16 n1 c4 k4 d4 kd3", &ok, &ws, m, sizeof m), KGATE_OPS_OK);
  EXPECT_EQ(ok, 0);
  EXPECT_GT(std::strlen(m), 0u);
}

TEST(Abi, MalformedCallsAreStatusesWithMessages) {
  Call c("conv3d.bwd_weight bf16:fp32 n1 c32 k16 d6 kd3 p1 bias", parse_fill("signed", 1));
  std::string msg;
  ASSERT_GT(c.ws_bytes, 0u);
  auto views = c.views;
  // Wrong dtype.
  c.views[0].dtype = "fp32";
  EXPECT_EQ(c.run(&msg), KGATE_OPS_BAD_INPUT);
  EXPECT_NE(msg.find("x: dtype fp32, the problem's is bf16"), std::string::npos) << msg;
  c.views = views;
  // Wrong dims.
  c.views[0].dims[1] = 5;
  EXPECT_EQ(c.run(&msg), KGATE_OPS_BAD_INPUT);
  EXPECT_NE(msg.find("x: dims 1x5x6x6x32, expected 1x6x6x6x32"), std::string::npos) << msg;
  c.views = views;
  // A missing tensor, one given twice, one the problem has not.
  c.views.pop_back();
  EXPECT_EQ(c.run(&msg), KGATE_OPS_BAD_INPUT);
  EXPECT_NE(msg.find("missing tensor db"), std::string::npos) << msg;
  c.views = views;
  c.views.push_back(views[0]);
  EXPECT_EQ(c.run(&msg), KGATE_OPS_BAD_INPUT);
  EXPECT_NE(msg.find("tensor x given twice"), std::string::npos) << msg;
  c.views = views;
  c.views.push_back(views[0]);
  c.views.back().role = "gamma";
  EXPECT_EQ(c.run(&msg), KGATE_OPS_BAD_INPUT);
  EXPECT_NE(msg.find("'gamma' is not a tensor of this problem"), std::string::npos) << msg;
  c.views = views;
  // A short workspace.
  c.ws_bytes -= 4;
  EXPECT_EQ(c.run(&msg), KGATE_OPS_BAD_INPUT);
  EXPECT_NE(msg.find("the plan needs"), std::string::npos) << msg;
  c.ws_bytes += 4;
  EXPECT_EQ(c.run(&msg), KGATE_OPS_OK) << msg;
  // A malformed descriptor and null arguments.
  char m[256];
  int32_t ok = 0;
  std::uint64_t ws = 0;
  EXPECT_EQ(lib().query("conv3d.fwd bf16 n1", &ok, &ws, m, sizeof m), KGATE_OPS_BAD_INPUT);
  EXPECT_GT(std::strlen(m), 0u);
  EXPECT_EQ(lib().query(nullptr, &ok, &ws, m, sizeof m), KGATE_OPS_BAD_INPUT);
  EXPECT_EQ(lib().run("conv3d.fwd bf16 n1 c4 k4 d4 kd3", nullptr, 2, nullptr, 0, nullptr, m, sizeof m), KGATE_OPS_BAD_INPUT);
  // A message buffer of one byte is still terminated.
  char one = 'x';
  EXPECT_EQ(lib().query("conv3d.fwd bf16 n1", &ok, &ws, &one, 1), KGATE_OPS_BAD_INPUT);
  EXPECT_EQ(one, '\0');
}

}  // namespace
}  // namespace kgate
