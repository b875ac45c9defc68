// conv3d / conv_transpose3d: the driver that executes a typed plan
// (conv_plan.hpp) with conv_kernels.hpp's kernels: the launches are the
// plan's steps, their arguments the plan's fields. Compiled once per backend
// (the runtime picks it from the compiler).
#include "kernels/conv3d/conv3d.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <stdexcept>

#include "kernels/conv3d/conv_kernels.hpp"
#include "kernels/conv3d/conv_plan.hpp"
#include "kernels/driver.hpp"
#include "kernels/runtime/runtime.hpp"
#include "reference/conv3d/conv_geometry.hpp"

namespace kgate::kernels {

namespace {

using ref::detail::Kind;

// f.template operator()<Tin, Tout>() for the problem's dtypes.
template <class F>
void with_conv_types(DType src, DType dst, F&& f) {
  auto by_out = [&](auto tin) {
    using Tin = decltype(tin);
    if (dst == DType::fp32) f.template operator()<Tin, float>();
    else f.template operator()<Tin, Tin>();
  };
  switch (src) {
    case DType::bf16: return by_out(kgate::bf16{});
    case DType::fp16: return by_out(kgate::fp16{});
    default: return by_out(float{});
  }
}

rt::LaunchConfig conv_config(std::int64_t x, std::int64_t y = 1, std::int64_t z = 1) {
  rt::LaunchConfig c;
  c.grid = rt::dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z));
  c.block = rt::dim3(cv::kThreads);
  return c;
}

// f(atom) with the backend's default atom for Tin (bf16 / fp16 only), and
// the matrix-core kernels' launch configuration.
template <class Tin, class F>
void with_mma_atom(F&& f) {
  if constexpr (!std::is_same_v<Tin, float>) {
    constexpr auto type = std::is_same_v<Tin, kgate::bf16> ? rt::MmaType::bf16 : rt::MmaType::f16;
    rt::mma::with_default_atom<type>(f);
  } else {
    throw std::logic_error("conv: no matrix-core path for fp32 inputs");
  }
}

// The launch configuration of the plan's main kernel.
rt::LaunchConfig main_config(const ConvPlan& cp) {
  rt::LaunchConfig c = conv_config(cp.grid[0], cp.grid[1], cp.grid[2]);
  c.block = rt::dim3(static_cast<unsigned>(cp.threads));
  c.lds_bytes = cp.lds_bytes;
  return c;
}

// A tree over split partials (`a` from tree_args, its pointers set).
template <class Tout, class Tb = Tout>
void launch_tree(const ConvTree& t, const cv::TreeArgs& a) {
  if (t.by_split) KGATE_LAUNCH((cv::conv_tree_split<Tout, Tb>), conv_config(t.workgroups), a);
  else KGATE_LAUNCH((cv::conv_tree<Tout, Tb>), conv_config(t.workgroups), a);
}

// Pointers of one launch: the direction's two operands, the bias (forward
// with bias), the main output, db (backward-weight with bias), workspace.
struct ConvPtrs {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  void* dbias = nullptr;
  void* ws = nullptr;
};

// conv_mma for the contract or scatter family. With a split of K, its
// partials go to the workspace and conv_tree adds them and the bias into
// the output; `mark` follows each launch.
template <class Tin, class Tout, bool kScatter, class Mark>
void launch_mma(const ConvPlan& cp, const ConvPtrs& d, Mark&& mark) {
  cv::GemmArgs args = gemm_args(cp);
  args.a = d.a;
  args.w = d.b;
  args.bias = d.bias;
  args.out = d.out;
  if (cp.ksplits > 1) args.ws = static_cast<float*>(d.ws);
  with_mma_atom<Tin>([&](auto atom) { KGATE_LAUNCH((cv::conv_mma<decltype(atom), Tin, Tout, kScatter>), main_config(cp), args); });
  mark();
  if (cp.ksplits > 1) {
    cv::TreeArgs ta = tree_args(cp.ktree);
    ta.ws = static_cast<float*>(d.ws);
    ta.out = d.out;
    ta.bias = d.bias;
    ta.channels = kScatter ? cp.g.cl : cp.g.cs;
    launch_tree<Tout, Tin>(cp.ktree, ta);
    mark();
  }
}

// The plan's launch sequence on `d`; mark() after each launch.
template <class Mark>
void conv_launch_all(const ConvProblem& p, const ConvPlan& cp, const ConvPtrs& d, Mark&& mark) {
  with_conv_types(p.src, p.dst, [&]<class Tin, class Tout>() {
    switch (cp.dp.kind) {
      case Kind::contract:
      case Kind::scatter: {
        if (cp.atom.ok) {
          if (cp.dp.kind == Kind::scatter) launch_mma<Tin, Tout, true>(cp, d, mark);
          else launch_mma<Tin, Tout, false>(cp, d, mark);
          break;
        }
        cv::GemmArgs args = gemm_args(cp);
        args.a = d.a;
        args.w = d.b;
        args.bias = d.bias;
        args.out = d.out;
        const auto cfg = main_config(cp);
        if (cp.main == ConvKernel::contract) KGATE_LAUNCH((cv::conv_contract<Tin, Tout>), cfg, args);
        else if (cp.main == ConvKernel::scatter_one_tap) KGATE_LAUNCH((cv::conv_scatter<Tin, Tout, true>), cfg, args);
        else KGATE_LAUNCH((cv::conv_scatter<Tin, Tout, false>), cfg, args);
        mark();
        break;
      }
      case Kind::wgrad: {
        float* part = static_cast<float*>(d.ws);
        cv::WgradArgs wa = wgrad_args(cp);
        wa.small = d.a;
        wa.large = d.b;
        wa.ws = part;
        const auto cfg = main_config(cp);
        if (cp.atom.ok) {
          with_mma_atom<Tin>([&](auto atom) {
            if (cp.apack == cv::kMmaVec) KGATE_LAUNCH((cv::conv_wgrad_mma<decltype(atom), Tin>), cfg, wa);
            else KGATE_LAUNCH((cv::conv_wgrad_mma<decltype(atom), Tin, 4>), cfg, wa);
          });
        } else {
          if (cp.quad_large) KGATE_LAUNCH((cv::conv_wgrad<Tin, true>), cfg, wa);
          else KGATE_LAUNCH((cv::conv_wgrad<Tin, false>), cfg, wa);
        }
        mark();
        cv::TreeArgs ta = tree_args(cp.tree);
        ta.ws = part;
        ta.out = d.out;
        launch_tree<Tout>(cp.tree, ta);
        mark();
        if (cp.dp.db) {
          float* dpart = part + cp.splits * cp.dw_numel;
          const void* dy = cp.dp.dy_is_small ? d.a : d.b;
          const cv::ColsumArgs ca{dy, cp.db_rows, p.cout, cp.db_slice, cp.db_splits, dpart};
          KGATE_LAUNCH((cv::conv_colsum<Tin>), conv_config(cp.colsum_workgroups), ca);
          mark();
          cv::TreeArgs da = tree_args(cp.db_tree);
          da.ws = dpart;
          da.out = d.dbias;
          launch_tree<Tout>(cp.db_tree, da);
          mark();
        }
        break;
      }
    }
  });
}


}  // namespace

cv::Geom conv_device_geom(const ConvProblem& p) { return conv_plan_for(p).g; }

Support conv_supported(const ConvProblem& p) {
  if (!supported_pair(p.src, p.dst))
    return {false, "dtype pair " + std::string(name(p.src)) + " -> " + std::string(name(p.dst)) +
                       " (supported: fp32, bf16 or fp16 in; fp32 or the input dtype out)"};
  if (p.acc != DType::fp32) return {false, "accumulator " + std::string(name(p.acc)) + " (supported: fp32)"};
  // Backward-weight needs no workspace decline: the split lowers its count
  // until the workspace fits or one split is left.
  if (const std::string why = conv_plan_limits(conv_plan_for(p)); !why.empty()) return {false, why};
  return {};
}

Plan conv_plan(const ConvProblem& p) { return to_plan(p, conv_plan_for(p)); }

Plan conv_split_plan(const ConvProblem& p, std::int64_t splits) { return to_plan(p, conv_plan_split(p, splits)); }

std::map<Role, Tensor> conv_run(const ConvProblem& p, const Plan& plan, const std::map<Role, const Tensor*>& in,
                                const RunOptions& opt) {
  const ConvPlan cp = conv_plan_from(p, plan);  // a plan not of p's is the caller's bad input
  const char* op = "conv";
  DeviceTensor a(input(op, in, cp.dp.a)), b(input(op, in, cp.dp.b));
  std::unique_ptr<DeviceTensor> bias;
  if (cp.dp.bias_on_out) bias = std::make_unique<DeviceTensor>(input(op, in, Role::b));
  const auto outs = p.outputs();
  const TensorSpec& main_spec = outs.front();
  const std::size_t out_bytes = static_cast<std::size_t>(checked_numel(main_spec.dims, "conv output")) * size_of(p.dst);
  DeviceTensor out(out_bytes), ws(plan.workspace_bytes);
  std::unique_ptr<DeviceTensor> dbias;
  if (cp.dp.db) dbias = std::make_unique<DeviceTensor>(static_cast<std::size_t>(p.cout) * size_of(p.dst));
  if (opt.prefill_nan) {
    rt::device_memset(out.data(), opt.prefill_byte, out_bytes);
    rt::device_memset(ws.data(), opt.prefill_byte, plan.workspace_bytes);
    if (dbias) rt::device_memset(dbias->data(), opt.prefill_byte, static_cast<std::size_t>(p.cout) * size_of(p.dst));
  }
  const ConvPtrs d{a.data(), b.data(), bias ? bias->data() : nullptr, out.data(), dbias ? dbias->data() : nullptr,
                   ws.data()};
  // The checked run goes through the entry point the C ABI calls.
  DeviceArgs args;
  args.in[cp.dp.a] = d.a;
  args.in[cp.dp.b] = d.b;
  if (d.bias) args.in[Role::b] = d.bias;
  args.out[main_spec.role] = d.out;
  if (d.dbias) args.out[Role::db] = d.dbias;
  args.workspace = d.ws;
  conv_launch(p, plan, args);
  rt::device_synchronize();
  auto launch_all = [&](auto&& mark) { conv_launch_all(p, cp, d, mark); };
  time_sequence(launch_all, opt);
  std::map<Role, Tensor> result;
  result.emplace(main_spec.role, download(out, p.dst, main_spec.dims));
  if (dbias) result.emplace(Role::db, download(*dbias, p.dst, {p.cout}));
  return result;
}

void conv_launch(const ConvProblem& p, const Plan& plan, const DeviceArgs& args) {
  const ConvPlan cp = conv_plan_from(p, plan);  // a plan not of p's is the caller's bad input
  // Each tensor aligned as the plan's accesses of it need (conv_plan.hpp:
  // its widths assume what the driver guarantees; this refuses what it
  // cannot run instead of taking another path).
  const std::size_t in_elem = size_of(p.src), out_elem = size_of(p.dst);
  const bool wgrad = cp.dp.kind == Kind::wgrad;
  const std::size_t a_align = cp.wide || (wgrad && cp.wide_small) ? 16 : in_elem;
  const std::size_t b_align = cp.wide ? 16 : cp.quad_large ? in_elem * cv::kTN : in_elem;
  const std::size_t out_align = cp.wide_out ? 16 : out_elem;
  const auto need_in = [&](Role r, std::size_t align) {
    auto it = args.in.find(r);
    if (it == args.in.end() || !it->second) throw std::invalid_argument("conv: missing input " + std::string(name(r)));
    conv_check_alignment(it->second, std::string(name(r)).c_str(), align);
    return it->second;
  };
  const auto need_out = [&](Role r, std::size_t align) {
    auto it = args.out.find(r);
    if (it == args.out.end() || !it->second) throw std::invalid_argument("conv: missing output " + std::string(name(r)));
    conv_check_alignment(it->second, std::string(name(r)).c_str(), align);
    return it->second;
  };
  if (plan.workspace_bytes > 0 && !args.workspace) throw std::invalid_argument("conv: missing workspace");
  if (plan.workspace_bytes > 0) conv_check_alignment(args.workspace, "workspace", sizeof(float));
  ConvPtrs d;
  d.a = need_in(cp.dp.a, a_align);
  d.b = need_in(cp.dp.b, b_align);
  if (cp.dp.bias_on_out) d.bias = need_in(Role::b, in_elem);
  d.out = need_out(p.outputs().front().role, wgrad ? out_elem : out_align);
  if (cp.dp.db) d.dbias = need_out(Role::db, out_elem);
  d.ws = args.workspace;
  rt::LaunchTrace trace;
  conv_launch_all(p, cp, d, [] {});
  check_launches(plan, trace.records());
}

}  // namespace kgate::kernels
