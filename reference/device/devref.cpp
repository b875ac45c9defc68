// The device reference's host side (devref.hpp): inputs to fp64 on the
// device, the kernels of devref_kernels.hpp, results back. Compiled once per
// backend (the host library with the C++ compiler; devref_cuda.cu through
// nvcc; devref.hip for gfx942), like the production kernels.
#include "reference/device/devref.hpp"

#include <algorithm>
#include <vector>

#include "reference/conv3d/conv_geometry.hpp"
#include "reference/device/devref_kernels.hpp"

namespace kgate::ref::device {

namespace {

// Work-items of a grid-stride launch over `count` elements: at most
// kMaxBlocks workgroups (every backend's grid limit is far above it).
constexpr std::int64_t kMaxBlocks = 1 << 16;

rt::LaunchConfig config_1d(std::int64_t count) {
  rt::LaunchConfig c;
  const std::int64_t blocks = std::clamp<std::int64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks);
  c.grid = rt::dim3(static_cast<unsigned>(blocks));
  c.block = rt::dim3(kThreads);
  return c;
}

rt::LaunchConfig config_2d(std::int64_t gx, std::int64_t gy) {
  rt::LaunchConfig c;
  c.grid = rt::dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  c.block = rt::dim3(kThreads);
  return c;
}

// A tensor read exactly as fp64 and copied to the device.
rt::DeviceBuffer<double> upload(const Tensor& t) {
  const F64Vector v = to_f64(t);
  rt::DeviceBuffer<double> d(v.size());
  rt::copy_h2d(d.data(), v.data(), d.bytes());
  return d;
}

Tensor download(const rt::DeviceBuffer<double>& d, const Dims& dims) {
  Tensor t = f64_like(dims);
  rt::copy_d2h(t.as<double>(), d.data(), d.bytes());
  return t;
}

Dims dims_of(const std::vector<TensorSpec>& specs, Role r) {
  for (const auto& s : specs)
    if (s.role == r) return s.dims;
  throw std::logic_error("device reference: no tensor " + std::string(kgate::name(r)));
}

Result run_conv(const ConvProblem& p, const Inputs& in, Defect defect) {
  const detail::ConvGeom g = detail::make_geom(p);
  const detail::DirPlan plan = detail::dir_plan(p);
  const auto a = upload(at(in, plan.a));
  const auto b = upload(at(in, plan.b));
  rt::DeviceBuffer<double> bias;
  if (plan.bias_on_out) bias = upload(at(in, Role::b));
  const Dims od = dims_of(p.outputs(), plan.out);
  std::int64_t n_out = 1;
  for (auto d : od) n_out *= d;
  rt::DeviceBuffer<double> want(static_cast<std::size_t>(n_out)), abs(static_cast<std::size_t>(n_out));
  // A contraction's work-items are output channels side by side, each
  // reading its own weight row: transposed once, their reads coalesce.
  rt::DeviceBuffer<double> bt;
  if (plan.kind == detail::Kind::contract) {
    bt = rt::DeviceBuffer<double>(b.size());
    const std::int64_t inner = g.taps * g.clg;
    KGATE_LAUNCH(devref_transpose_w, config_1d(g.cs * inner), b.data(), bt.data(), g.cs, inner);
  }
  ConvArgs args{g,           a.data(),   b.data(), plan.kind == detail::Kind::contract ? bt.data() : nullptr,
                plan.bias_on_out ? bias.data() : nullptr,   want.data(), abs.data(), n_out, od.back(),
                static_cast<int>(defect)};
  switch (plan.kind) {
    case detail::Kind::contract: KGATE_LAUNCH((devref_conv<detail::Kind::contract>), config_1d(n_out), args); break;
    case detail::Kind::scatter: KGATE_LAUNCH((devref_conv<detail::Kind::scatter>), config_1d(n_out), args); break;
    case detail::Kind::wgrad: KGATE_LAUNCH((devref_conv<detail::Kind::wgrad>), config_1d(n_out), args); break;
  }
  Result r;
  r.want.emplace(plan.out, download(want, od));
  r.abs.emplace(plan.out, download(abs, od));
  if (plan.db) {
    const double* dy = plan.dy_is_small ? a.data() : b.data();
    const std::int64_t channels = plan.dy_is_small ? g.cs : g.cl;
    const std::int64_t count = static_cast<std::int64_t>(plan.dy_is_small ? a.size() : b.size());
    rt::DeviceBuffer<double> dbw(static_cast<std::size_t>(channels)), dba(static_cast<std::size_t>(channels));
    KGATE_LAUNCH(devref_conv_db, config_1d(channels), dy, count, channels, dbw.data(), dba.data());
    r.want.emplace(Role::db, download(dbw, {channels}));
    r.abs.emplace(Role::db, download(dba, {channels}));
  }
  rt::device_synchronize();
  return r;
}

GnShape shape_of(const GroupNormProblem& p) {
  GnShape sh;
  sh.N = p.n;
  sh.C = p.c;
  sh.G = p.groups;
  sh.Cg = p.c / p.groups;
  sh.S = p.spatial[0] * p.spatial[1] * p.spatial[2];
  sh.M = p.group_size();
  sh.chunks = std::max<std::int64_t>(1, (sh.S + kChunkRows - 1) / kChunkRows);
  return sh;
}

// The statistics of x (two passes) into the companion's tensors; mean and
// rstd stay on the device for the caller.
struct DeviceStats {
  rt::DeviceBuffer<double> mean, mean_abs, var, rstd, kappa;
};
DeviceStats stats(const GroupNormProblem& p, const GnShape& sh, const double* x, Defect defect, GroupNormCompanion& c) {
  const std::int64_t ng = sh.N * sh.G;
  DeviceStats st{rt::DeviceBuffer<double>(ng), rt::DeviceBuffer<double>(ng), rt::DeviceBuffer<double>(ng),
                 rt::DeviceBuffer<double>(ng), rt::DeviceBuffer<double>(ng)};
  rt::DeviceBuffer<double> part(static_cast<std::size_t>(ng * sh.chunks * 4));
  const int plant = static_cast<int>(defect);
  KGATE_LAUNCH((devref_gn_sums<0>), config_2d(sh.chunks, ng), sh, x, st.mean.data(), part.data(), plant);
  KGATE_LAUNCH((devref_gn_stats<0>), config_1d(ng), sh, part.data(), p.eps, st.mean.data(), st.mean_abs.data(),
               st.var.data(), st.rstd.data(), st.kappa.data());
  KGATE_LAUNCH((devref_gn_sums<1>), config_2d(sh.chunks, ng), sh, x, st.mean.data(), part.data(), plant);
  KGATE_LAUNCH((devref_gn_stats<1>), config_1d(ng), sh, part.data(), p.eps, st.mean.data(), st.mean_abs.data(),
               st.var.data(), st.rstd.data(), st.kappa.data());
  const Dims sd{sh.N, sh.G};
  c.group_size = sh.M;
  c.mean = download(st.mean, sd);
  c.var = download(st.var, sd);
  c.rstd = download(st.rstd, sd);
  c.mean_abs = download(st.mean_abs, sd);
  c.kappa = download(st.kappa, sd);
  return st;
}

Result run_groupnorm(const GroupNormProblem& p, const Inputs& in, Defect defect) {
  const GnShape sh = shape_of(p);
  const auto x = upload(at(in, Role::x));
  rt::DeviceBuffer<double> gamma, beta;
  if (p.affine) {
    gamma = upload(at(in, Role::gamma));
    beta = upload(at(in, Role::beta));
  }
  const double* gp = p.affine ? gamma.data() : nullptr;
  const double* bp = p.affine ? beta.data() : nullptr;
  const Dims& xd = at(in, Role::x).dims();
  const std::int64_t count = static_cast<std::int64_t>(x.size());
  Result r;
  GroupNormCompanion& c = r.companion;
  DeviceStats st = stats(p, sh, x.data(), defect, c);
  rt::DeviceBuffer<double> xhat(x.size());
  if (p.dir == GnDir::fwd) {
    rt::DeviceBuffer<double> y(x.size()), abs_y(x.size());
    KGATE_LAUNCH(devref_gn_fwd_apply, config_1d(count), sh, x.data(), gp, bp, st.mean.data(), st.rstd.data(),
                 p.relu ? 1 : 0, y.data(), xhat.data(), abs_y.data());
    c.xhat = download(xhat, xd);
    r.want.emplace(Role::y, download(y, xd));
    r.want.emplace(Role::mean, f64_copy(c.mean));
    r.want.emplace(Role::rstd, f64_copy(c.rstd));
    c.abs.emplace(Role::y, download(abs_y, xd));
    c.abs.emplace(Role::mean, f64_copy(c.mean_abs));
    c.abs.emplace(Role::rstd, f64_copy(c.rstd));
    rt::device_synchronize();
    return r;
  }
  // The companion's xhat: of x's own statistics (devref_gn_fwd_apply's).
  {
    rt::DeviceBuffer<double> y(x.size()), abs_y(x.size());
    KGATE_LAUNCH(devref_gn_fwd_apply, config_1d(count), sh, x.data(), gp, bp, st.mean.data(), st.rstd.data(), 0,
                 y.data(), xhat.data(), abs_y.data());
    c.xhat = download(xhat, xd);
  }
  const auto dy = upload(at(in, Role::dy));
  const auto mean = upload(at(in, Role::mean));
  const auto rstd = upload(at(in, Role::rstd));
  rt::DeviceBuffer<double> part(static_cast<std::size_t>(sh.N * sh.C * sh.chunks * 12));
  GnBwdArgs a{sh, x.data(), dy.data(), gp, bp, mean.data(), rstd.data(), p.relu ? 1 : 0, part.data()};
  KGATE_LAUNCH(devref_gn_bwd_sums, config_2d(sh.chunks, sh.N * sh.C), a);
  rt::DeviceBuffer<double> coef(static_cast<std::size_t>(sh.N * sh.G * 4)), sums(static_cast<std::size_t>(sh.N * sh.C * 4));
  KGATE_LAUNCH(devref_gn_bwd_group, config_1d(sh.N * sh.G), a, coef.data(), sums.data());
  rt::DeviceBuffer<double> dx(x.size()), abs_dx(x.size());
  KGATE_LAUNCH(devref_gn_bwd_apply, config_1d(count), a, coef.data(), dx.data(), abs_dx.data());
  r.want.emplace(Role::dx, download(dx, xd));
  c.abs.emplace(Role::dx, download(abs_dx, xd));
  if (p.affine) {
    rt::DeviceBuffer<double> dg(static_cast<std::size_t>(sh.C)), db(static_cast<std::size_t>(sh.C)),
        adg(static_cast<std::size_t>(sh.C)), adb(static_cast<std::size_t>(sh.C));
    KGATE_LAUNCH(devref_gn_bwd_channel, config_1d(sh.C), a, sums.data(), dg.data(), db.data(), adg.data(), adb.data());
    r.want.emplace(Role::dgamma, download(dg, {sh.C}));
    r.want.emplace(Role::dbeta, download(db, {sh.C}));
    c.abs.emplace(Role::dgamma, download(adg, {sh.C}));
    c.abs.emplace(Role::dbeta, download(adb, {sh.C}));
  }
  rt::device_synchronize();
  return r;
}

}  // namespace

Result run(const Problem& p, const Inputs& in, Defect defect) {
  if (const auto* c = std::get_if<ConvProblem>(&p)) {
    c->validate();
    check_inputs(c->inputs(), in, op_dir_name(p) + " device reference");
    return run_conv(*c, in, defect);
  }
  const auto& g = std::get<GroupNormProblem>(p);
  g.validate();
  check_inputs(g.inputs(), in, op_dir_name(p) + " device reference");
  return run_groupnorm(g, in, defect);
}

}  // namespace kgate::ref::device
