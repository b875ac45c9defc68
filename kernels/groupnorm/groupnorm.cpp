// GroupNorm: plans and the host driver over gn_kernels.hpp. Compiled once per
// backend (the runtime picks it from the compiler).
#include "kernels/groupnorm/groupnorm.hpp"

#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernels/groupnorm/gn_kernels.hpp"
#include "kernels/driver.hpp"
#include "kernels/runtime/runtime.hpp"

namespace kgate::kernels {

namespace {

int vector_width(std::int64_t cg) {
  for (int v : {8, 4, 2})
    if (cg % v == 0) return v;
  return 1;
}

gn::Geometry geometry(const GroupNormProblem& p) {
  gn::Geometry g{};
  g.N = p.n;
  g.S = p.spatial[0] * p.spatial[1] * p.spatial[2];
  g.C = p.c;
  g.G = p.groups;
  g.Cg = p.c / p.groups;
  g.V = vector_width(g.Cg);
  const std::int64_t cols = g.C / g.V;
  g.width = static_cast<int>(std::min<std::int64_t>(cols, gn::kThreads));
  g.rows_par = gn::kThreads / g.width;
  g.col_iters = static_cast<int>((cols + g.width - 1) / g.width);
  // About 16 rows per work-item per chunk; fewer (down to one batch) where
  // 16 would leave fewer than 512 chunks per sample, so that small volumes
  // still spread over a GPU; more when the grid would pass 65535 chunks (a
  // multiple of rows_par either way).
  std::int64_t per_item = 16;
  while (per_item > gn::kRowBatch && (g.S + g.rows_par * per_item - 1) / (g.rows_par * per_item) < 512)
    per_item /= 2;
  const std::int64_t base = static_cast<std::int64_t>(g.rows_par) * per_item;
  const std::int64_t min_rows = (g.S + 65534) / 65535;
  g.chunk_rows = std::min<std::int64_t>(g.S, std::max(base, (min_rows + g.rows_par - 1) / g.rows_par * g.rows_par));
  g.chunks = (g.S + g.chunk_rows - 1) / g.chunk_rows;
  return g;
}

template <class F>
void with_types(DType src, DType dst, int v, F&& f) {
  auto by_v = [&](auto tin, auto tout) {
    using Tin = decltype(tin);
    using Tout = decltype(tout);
    switch (v) {
      case 8: return f.template operator()<Tin, Tout, 8>();
      case 4: return f.template operator()<Tin, Tout, 4>();
      case 2: return f.template operator()<Tin, Tout, 2>();
      default: return f.template operator()<Tin, Tout, 1>();
    }
  };
  auto by_out = [&](auto tin) {
    switch (dst) {
      case DType::bf16: return by_v(tin, kgate::bf16{});
      case DType::fp16: return by_v(tin, kgate::fp16{});
      default: return by_v(tin, float{});
    }
  };
  switch (src) {
    case DType::bf16: return by_out(kgate::bf16{});
    case DType::fp16: return by_out(kgate::fp16{});
    default: return by_out(float{});
  }
}

rt::LaunchConfig config(std::uint32_t gx, std::uint32_t gy) {
  rt::LaunchConfig c;
  c.grid = rt::dim3(gx, gy);
  c.block = rt::dim3(gn::kThreads);
  return c;
}

}  // namespace

Support groupnorm_supported(const GroupNormProblem& p) {
  if (!supported_pair(p.src, p.dst))
    return {false, "dtype pair " + std::string(name(p.src)) + " -> " + std::string(name(p.dst)) +
                       " (supported: fp32, bf16 or fp16 in; fp32 or the input dtype out)"};
  const gn::Geometry g = geometry(p);
  if (g.col_iters > gn::kMaxColIters)
    return {false, "C / V = " + std::to_string(g.C / g.V) + " columns exceeds " +
                       std::to_string(gn::kThreads * gn::kMaxColIters) + " (V = " + std::to_string(g.V) + ")"};
  if (p.n > 65535) return {false, "N above 65535 (grid y)"};
  if (g.Cg * g.S >= (std::int64_t{1} << 31)) return {false, "group of 2^31 elements or more"};
  return {};
}

Plan groupnorm_plan(const GroupNormProblem& p) {
  const gn::Geometry g = geometry(p);
  Plan pl;
  pl.op = "groupnorm." + std::string(name(p.dir));
  pl.variant = "chan-chunked/v" + std::to_string(g.V);
  pl.params = {{"threads", gn::kThreads}, {"V", g.V},           {"chunk_rows", g.chunk_rows},
               {"chunks", g.chunks},      {"rows_par", g.rows_par}, {"col_iters", g.col_iters}};
  const auto cx = static_cast<std::uint32_t>(g.chunks), n = static_cast<std::uint32_t>(g.N);
  const auto gg = static_cast<std::uint32_t>(g.G);
  const std::int64_t rows_per_item = (g.chunk_rows + g.rows_par - 1) / g.rows_par;
  const std::int64_t tree_seq = (g.chunks + gn::kThreads - 1) / gn::kThreads;
  if (p.dir == GnDir::fwd) {
    pl.steps = {{"gn_fwd_stats", {cx, n, 1}, {gn::kThreads, 1, 1}, 0},
                {"gn_fwd_finalize", {gg, n, 1}, {gn::kThreads, 1, 1}, 0},
                {"gn_fwd_apply", {cx, n, 1}, {gn::kThreads, 1, 1}, 0}};
    // Statistics of one group, longest chain of dependent roundings: a row's
    // V values, the batch's rows in a tree, a work-item's batches
    // Chan-combined in sequence, a tree over the chunk's row lanes, the
    // group's columns in sequence, a work-item's chunk partials in sequence,
    // then a tree over the finalize workgroup.
    ReductionPlan stats;
    int lane_tree = 0;
    for (int s = gn::tree_top(g.rows_par); s > 0; s /= 2) ++lane_tree;
    stats.length = g.V + 2 + (rows_per_item + gn::kRowBatch - 1) / gn::kRowBatch + lane_tree + g.Cg / g.V +
                   tree_seq;
    stats.splits = std::min<std::int64_t>(g.chunks, gn::kThreads);
    stats.combine = PartialCombine::tree;
    ReductionPlan y = stats;
    y.epilogue_ops = 4;  // (x - mean) * rstd * gamma + beta
    pl.reduction = {{"y", y}, {"mean", stats}, {"rstd", stats}};
    pl.workspace_bytes = static_cast<std::uint64_t>(g.N * g.chunks * g.G * 3 * 4);
  } else {
    const auto cb = static_cast<std::uint32_t>((std::max(g.C, g.N * g.G) + gn::kThreads - 1) / gn::kThreads);
    const auto cc = static_cast<std::uint32_t>(g.C);
    pl.steps = {{"gn_bwd_reduce", {cx, n, 1}, {gn::kThreads, 1, 1}, 0},
                {"gn_bwd_finalize", {cc, n, 1}, {gn::kThreads, 1, 1}, 0},
                {"gn_bwd_params", {cb, 1, 1}, {gn::kThreads, 1, 1}, 0},
                {"gn_bwd_apply", {cx, n, 1}, {gn::kThreads, 1, 1}, 0}};
    // Per channel: a work-item's rows, the chunk's row lanes, a work-item's
    // chunk partials (all sequential), then a tree over the finalize
    // workgroup; dx's coefficients add the group's channels in sequence,
    // dgamma and dbeta the batch.
    ReductionPlan channel;
    channel.length = rows_per_item + g.rows_par + tree_seq;
    channel.splits = std::min<std::int64_t>(g.chunks, gn::kThreads);
    channel.combine = PartialCombine::tree;
    ReductionPlan dx = channel, params = channel;
    dx.length += g.Cg;
    dx.epilogue_ops = 5;
    params.length += g.N;
    params.epilogue_ops = 1;
    pl.reduction = {{"dx", dx}, {"dgamma", params}, {"dbeta", params}};
    pl.workspace_bytes = static_cast<std::uint64_t>((g.N * g.chunks * g.C * 2 + g.N * g.C * 2 + g.N * g.G * 2) * 4);
  }
  return pl;
}

namespace {

// The phases of groupnorm_run, groupnorm_partials and groupnorm_finish
// (kernels/api.hpp): one launch sequence, cut after the per-part partials.
enum class Phase { all, partials, finish };

struct Executed {
  std::map<Role, Tensor> out;
  Tensor partials;  // Phase::partials
};

// The forward's launch sequence (stats, finalize with `fin`, apply), cut
// by phase; mark() after each launch.
template <class Mark>
void fwd_launch_all(const GroupNormProblem& p, const gn::Geometry& g, const gn::FwdArgs& a, const gn::FwdArgs& fin,
                    Phase phase, Mark&& mark) {
  const auto cx = static_cast<std::uint32_t>(g.chunks), n = static_cast<std::uint32_t>(g.N);
  with_types(p.src, p.dst, g.V, [&]<class Tin, class Tout, int V>() {
    if (phase != Phase::finish) {
      KGATE_LAUNCH((gn::gn_fwd_stats<Tin, V>), config(cx, n), a);
      mark();
    }
    KGATE_LAUNCH(gn::gn_fwd_finalize, config(static_cast<std::uint32_t>(g.G), n), fin);
    mark();
    if (phase != Phase::partials) {
      KGATE_LAUNCH((gn::gn_fwd_apply<Tin, Tout, V>), config(cx, n), a);
      mark();
    }
  });
}

// The backward's launch sequence (reduce, finalize, params, apply), cut by
// phase; mark() after each launch.
template <class Mark>
void bwd_launch_all(const GroupNormProblem& p, const Plan& plan, const gn::Geometry& g, const gn::BwdArgs& a,
                    Phase phase, Mark&& mark) {
  const auto cx = static_cast<std::uint32_t>(g.chunks), n = static_cast<std::uint32_t>(g.N);
  const std::uint32_t pl_params_blocks = plan.steps[2].grid[0];
  with_types(p.src, p.dst, g.V, [&]<class Tin, class Tdy, int V>() {
    if (phase != Phase::finish) {
      KGATE_LAUNCH((gn::gn_bwd_reduce<Tin, Tdy, V>), config(cx, n), a);
      mark();
      KGATE_LAUNCH(gn::gn_bwd_finalize, config(static_cast<std::uint32_t>(g.C), n), a);
      mark();
    }
    if (phase != Phase::partials) {
      KGATE_LAUNCH(gn::gn_bwd_params, config(pl_params_blocks, 1), a);
      mark();
      KGATE_LAUNCH((gn::gn_bwd_apply<Tin, Tdy, V>), config(cx, n), a);
      mark();
    }
  });
}

// The byte sizes the backward's workspace is cut into (partials, sums,
// coefficients), adding up to plan.workspace_bytes.
std::array<std::size_t, 3> bwd_workspace(const gn::Geometry& g, const Plan& plan) {
  const std::size_t partial_bytes = static_cast<std::size_t>(g.N * g.chunks * g.C * 2 * 4);
  const std::size_t sums_bytes = static_cast<std::size_t>(g.N * g.C * 2 * 4);
  return {partial_bytes, sums_bytes, plan.workspace_bytes - partial_bytes - sums_bytes};
}

Executed execute(const GroupNormProblem& p, const Plan& plan, const std::map<Role, const Tensor*>& in,
                 const RunOptions& opt, Phase phase, const Tensor* combined, std::int64_t group_elems) {
  if (!(plan == groupnorm_plan(p))) throw std::invalid_argument("groupnorm: plan does not belong to this problem");
  const gn::Geometry g = geometry(p);
  const Dims xd = p.x_dims();
  const Tensor& x = input("groupnorm", in, Role::x);
  const Dims part_dims = p.dir == GnDir::fwd ? Dims{p.n, p.groups, 3} : Dims{p.n, p.c, 2};
  std::unique_ptr<DeviceTensor> comb;
  if (phase == Phase::finish) {
    if (!combined || combined->dtype() != DType::fp32 || combined->dims() != part_dims)
      throw std::invalid_argument("groupnorm: combined partials must be fp32 of shape " + dims_string(part_dims));
    comb = std::make_unique<DeviceTensor>(*combined);
  }
  DeviceTensor dx_in(x);
  std::unique_ptr<DeviceTensor> gamma, beta;
  if (p.affine) {
    gamma = std::make_unique<DeviceTensor>(input("groupnorm", in, Role::gamma));
    beta = std::make_unique<DeviceTensor>(input("groupnorm", in, Role::beta));
  }
  auto prefill = [&](const DeviceTensor& d, std::size_t bytes) {
    if (opt.prefill_nan) rt::device_memset(d.data(), opt.prefill_byte, bytes);
  };
  const std::size_t stats_bytes = static_cast<std::size_t>(g.N * g.G * 4);
  const std::size_t part_bytes = static_cast<std::size_t>(part_dims[0] * part_dims[1] * part_dims[2] * 4);
  Executed r;

  if (p.dir == GnDir::fwd) {
    const std::size_t y_bytes = static_cast<std::size_t>(x.numel()) * size_of(p.dst);
    DeviceTensor y(y_bytes), mean(stats_bytes), rstd(stats_bytes), ws(plan.workspace_bytes), moments(part_bytes);
    prefill(y, y_bytes);
    prefill(mean, stats_bytes);
    prefill(rstd, stats_bytes);
    prefill(ws, plan.workspace_bytes);
    prefill(moments, part_bytes);
    gn::FwdArgs a{g, dx_in.data(), y.data(), mean.as<float>(), rstd.as<float>(),
                  gamma ? gamma->as<const float>() : nullptr, beta ? beta->as<const float>() : nullptr,
                  ws.as<float>(), nullptr, static_cast<float>(p.eps), p.relu ? 1 : 0};
    // Phase::finish: the finalize pass reads the combined moments as the
    // only chunk, so mean and rstd come from the kernels' own formula.
    gn::FwdArgs fin = a;
    if (phase == Phase::partials) fin.moments = moments.as<float>();
    if (phase == Phase::finish) {
      fin.g.chunks = 1;
      fin.partial = comb->as<float>();
    }
    auto launch_all = [&](auto&& mark) { fwd_launch_all(p, g, a, fin, phase, mark); };
    if (phase == Phase::all) {
      // The checked run goes through the entry point the C ABI calls.
      DeviceArgs args;
      args.in[Role::x] = dx_in.data();
      if (gamma) {
        args.in[Role::gamma] = gamma->data();
        args.in[Role::beta] = beta->data();
      }
      args.out[Role::y] = y.data();
      args.out[Role::mean] = mean.data();
      args.out[Role::rstd] = rstd.data();
      args.workspace = ws.data();
      groupnorm_launch(p, plan, args);
      rt::device_synchronize();
    } else {
      launch_as_planned(plan, launch_all, false);
    }
    if (phase == Phase::partials) {
      r.partials = download(moments, DType::fp32, part_dims);
      return r;
    }
    if (phase == Phase::all) time_sequence(launch_all, opt);
    r.out.emplace(Role::y, download(y, p.dst, xd));
    r.out.emplace(Role::mean, download(mean, DType::fp32, {p.n, p.groups}));
    r.out.emplace(Role::rstd, download(rstd, DType::fp32, {p.n, p.groups}));
    return r;
  }

  DeviceTensor dy(input("groupnorm", in, Role::dy)), mean(input("groupnorm", in, Role::mean)), rstd(input("groupnorm", in, Role::rstd));
  const std::size_t dx_bytes = static_cast<std::size_t>(x.numel()) * size_of(p.src);
  const std::size_t c_bytes = static_cast<std::size_t>(p.c * 4);
  DeviceTensor dxo(dx_bytes), dgamma(c_bytes), dbeta(c_bytes);
  // The plan's workspace as one allocation per array (partials, sums,
  // coefficients; the sizes add up to plan.workspace_bytes), so that a read
  // past one array's end is past an allocation's end (the host backend
  // reports it).
  const auto [partial_bytes, sums_bytes, coef_bytes] = bwd_workspace(g, plan);
  // Phase::all: one workspace, cut as the C ABI's caller's is (through the
  // ABI's entry point); the sharded phases: one allocation per array, so
  // that a read past one array's end is past an allocation's end (the host
  // backend reports it).
  const bool whole = phase == Phase::all;
  DeviceTensor ws_partial(whole ? plan.workspace_bytes : partial_bytes), ws_sums(whole ? 0 : sums_bytes),
      ws_coef(whole ? 0 : coef_bytes);
  prefill(dxo, dx_bytes);
  prefill(dgamma, c_bytes);
  prefill(dbeta, c_bytes);
  prefill(ws_partial, whole ? plan.workspace_bytes : partial_bytes);
  if (!whole) {
    prefill(ws_sums, sums_bytes);
    prefill(ws_coef, coef_bytes);
  }
  auto* ws0 = static_cast<unsigned char*>(ws_partial.data());
  float* partial = ws_partial.as<float>();
  float* sums = whole ? reinterpret_cast<float*>(ws0 + partial_bytes) : ws_sums.as<float>();
  float* coef = whole ? reinterpret_cast<float*>(ws0 + partial_bytes + sums_bytes) : ws_coef.as<float>();
  if (phase == Phase::finish) sums = comb->as<float>();
  gn::BwdArgs a{g, dx_in.data(), dy.data(), mean.as<const float>(), rstd.as<const float>(),
                gamma ? gamma->as<const float>() : nullptr, beta ? beta->as<const float>() : nullptr,
                dxo.data(), p.affine ? dgamma.as<float>() : nullptr, p.affine ? dbeta.as<float>() : nullptr,
                partial, sums, coef, group_elems, p.relu ? 1 : 0};
  auto launch_all = [&](auto&& mark) { bwd_launch_all(p, plan, g, a, phase, mark); };
  if (whole) {
    DeviceArgs args;
    args.in[Role::x] = dx_in.data();
    args.in[Role::dy] = dy.data();
    args.in[Role::mean] = mean.data();
    args.in[Role::rstd] = rstd.data();
    if (gamma) {
      args.in[Role::gamma] = gamma->data();
      args.in[Role::beta] = beta->data();
      args.out[Role::dgamma] = dgamma.data();
      args.out[Role::dbeta] = dbeta.data();
    }
    args.out[Role::dx] = dxo.data();
    args.workspace = ws_partial.data();
    groupnorm_launch(p, plan, args);
    rt::device_synchronize();
  } else {
    launch_as_planned(plan, launch_all, false);
  }
  if (phase == Phase::partials) {
    Tensor t(DType::fp32, part_dims);
    rt::copy_d2h(t.data(), sums, part_bytes);
    r.partials = std::move(t);
    return r;
  }
  if (phase == Phase::all) time_sequence(launch_all, opt);
  r.out.emplace(Role::dx, download(dxo, p.src, xd));
  if (p.affine) {
    r.out.emplace(Role::dgamma, download(dgamma, DType::fp32, {p.c}));
    r.out.emplace(Role::dbeta, download(dbeta, DType::fp32, {p.c}));
  }
  return r;
}

std::int64_t own_group_elems(const GroupNormProblem& p) { return p.group_size(); }

}  // namespace

void groupnorm_launch(const GroupNormProblem& p, const Plan& plan, const DeviceArgs& args) {
  if (!(plan == groupnorm_plan(p))) throw std::invalid_argument("groupnorm: plan does not belong to this problem");
  const gn::Geometry g = geometry(p);
  const auto in = [&](Role r) -> const void* {
    auto it = args.in.find(r);
    if (it == args.in.end() || !it->second) throw std::invalid_argument("groupnorm: missing input " + std::string(name(r)));
    return it->second;
  };
  const auto out = [&](Role r) -> void* {
    auto it = args.out.find(r);
    if (it == args.out.end() || !it->second) throw std::invalid_argument("groupnorm: missing output " + std::string(name(r)));
    return it->second;
  };
  if (plan.workspace_bytes > 0 && !args.workspace) throw std::invalid_argument("groupnorm: missing workspace");
  const float* gamma = p.affine ? static_cast<const float*>(in(Role::gamma)) : nullptr;
  const float* beta = p.affine ? static_cast<const float*>(in(Role::beta)) : nullptr;
  rt::LaunchTrace trace;
  if (p.dir == GnDir::fwd) {
    const gn::FwdArgs a{g, in(Role::x), out(Role::y), static_cast<float*>(out(Role::mean)),
                        static_cast<float*>(out(Role::rstd)), gamma, beta, static_cast<float*>(args.workspace), nullptr,
                        static_cast<float>(p.eps), p.relu ? 1 : 0};
    fwd_launch_all(p, g, a, a, Phase::all, [] {});
  } else {
    const auto [partial_bytes, sums_bytes, coef_bytes] = bwd_workspace(g, plan);
    (void)coef_bytes;
    auto* ws = static_cast<unsigned char*>(args.workspace);
    const gn::BwdArgs a{g, in(Role::x), in(Role::dy), static_cast<const float*>(in(Role::mean)),
                        static_cast<const float*>(in(Role::rstd)), gamma, beta, out(Role::dx),
                        p.affine ? static_cast<float*>(out(Role::dgamma)) : nullptr,
                        p.affine ? static_cast<float*>(out(Role::dbeta)) : nullptr,
                        reinterpret_cast<float*>(ws), reinterpret_cast<float*>(ws + partial_bytes),
                        reinterpret_cast<float*>(ws + partial_bytes + sums_bytes), own_group_elems(p), p.relu ? 1 : 0};
    bwd_launch_all(p, plan, g, a, Phase::all, [] {});
  }
  check_launches(plan, trace.records());
}

std::map<Role, Tensor> groupnorm_run(const GroupNormProblem& p, const Plan& plan,
                                     const std::map<Role, const Tensor*>& in, const RunOptions& opt) {
  return execute(p, plan, in, opt, Phase::all, nullptr, own_group_elems(p)).out;
}

Tensor groupnorm_partials(const GroupNormProblem& p, const std::map<Role, const Tensor*>& in) {
  return execute(p, groupnorm_plan(p), in, {}, Phase::partials, nullptr, own_group_elems(p)).partials;
}

std::map<Role, Tensor> groupnorm_finish(const GroupNormProblem& p, const std::map<Role, const Tensor*>& in,
                                        const Tensor& combined, std::int64_t whole_group_elems) {
  if (whole_group_elems < own_group_elems(p))
    throw std::invalid_argument("groupnorm: whole_group_elems below this part's group size");
  return execute(p, groupnorm_plan(p), in, {}, Phase::finish, &combined, whole_group_elems).out;
}

namespace {

// The gate's boundary problems (below this line: not kernel code).

// The smallest channels per group whose vector width is v (Cg = 1 is the
// smallest group, a boundary of its own).
std::int64_t cg_for(int v) {
  for (std::int64_t cg = 2;; ++cg)
    if (vector_width(cg) == v) return cg;
}

GroupNormProblem gn_problem(GnDir dir, std::int64_t n, std::int64_t c, std::int64_t cg, std::int64_t s,
                            std::pair<DType, DType> types, int variant) {
  GroupNormProblem p;
  p.dir = dir;
  p.n = n;
  p.c = c;
  p.groups = c / cg;
  p.spatial = {1, 1, s};
  p.src = types.first;
  p.dst = types.second;
  // Fused ReLU, affine and eps take turns, so each kernel path meets each.
  p.relu = variant % 2 == 1;
  p.affine = variant % 3 != 2;
  p.eps = variant % 4 == 3 ? 0.1 : 1e-5;
  return p;
}

// The smallest S >= 1 for which `want(geometry)` holds (channel layout of q
// fixed), searched up to `limit` rows; 0 when none.
template <class F>
std::int64_t find_rows(GroupNormProblem q, std::int64_t limit, F&& want) {
  for (std::int64_t s = 1; s <= limit; ++s) {
    q.spatial = {1, 1, s};
    if (want(geometry(q))) return s;
  }
  return 0;
}

}  // namespace

// The plan's branches and where each boundary problem comes from:
//  - every kernel instantiation: each supported dtype pair x each vector
//    width V (chosen by vector_width from C/G), with a ragged last row batch;
//  - every column-pass count 1..kMaxColIters, with the last pass full and
//    ragged (idle columns; for one pass, a width not dividing kThreads, so
//    lanes idle and the row-lane tree is not a power of two), for V = 2 and
//    V = 1;
//  - chunks (the split count of the finalize tree): 2 with a ragged last
//    chunk, kThreads (a full tree), kThreads + 1 (a work-item combines two
//    partials), and the first problem whose chunks hold more rows per
//    work-item (the per-item halving rule);
//  - the smallest group (one element: variance 0) and the largest group of
//    the widest columns (G = 1, kThreads * kMaxColIters columns of kMaxV:
//    every pass at the widest vector).
std::vector<BoundaryProblem> groupnorm_boundary_problems(GnDir dir) {
  std::vector<BoundaryProblem> out;
  const auto pairs = supported_pairs();
  int variant = 0;
  auto add = [&](const GroupNormProblem& p, std::string why) {
    p.validate();
    if (!groupnorm_supported(p)) throw std::logic_error("boundary problem not supported: " + why);
    out.push_back({Problem(p), std::move(why)});
    ++variant;
  };
  auto pair_name = [](std::pair<DType, DType> t) { return std::string(name(t.first)) + ":" + std::string(name(t.second)); };

  for (const auto& t : pairs)
    for (int v : {8, 4, 2, 1}) {
      const std::int64_t cg = cg_for(v);
      GroupNormProblem p = gn_problem(dir, 1 + variant % 2, 2 * cg, cg, 1, t, variant);
      const int rows_par = geometry(p).rows_par;
      // One full row batch per lane, then a ragged one.
      p.spatial = {1, 1, static_cast<std::int64_t>(rows_par) * (gn::kRowBatch + 1) + 1 + variant % 3};
      add(p, "instantiation " + pair_name(t) + " V=" + std::to_string(v) + ", ragged last row batch");
    }

  // V = 2 and 1 keep C (and the backward finalize's one workgroup per
  // channel) small; the largest group below runs every pass at kMaxV.
  for (int k = 1; k <= gn::kMaxColIters; ++k)
    for (int v : {2, 1})
      for (bool ragged : {false, true}) {
        const std::int64_t cols = static_cast<std::int64_t>(gn::kThreads) * (k - 1) + (ragged ? 37 : gn::kThreads);
        const std::int64_t cg = v == 1 ? 1 : v;
        GroupNormProblem p = gn_problem(dir, 1, cols * v, cg, 1, pairs[variant % pairs.size()], variant);
        const gn::Geometry g = geometry(p);
        p.spatial = {1, 1, static_cast<std::int64_t>(g.rows_par) * gn::kRowBatch + 2};
        add(p, std::to_string(g.col_iters) + " column pass(es) of width " + std::to_string(g.width) +
                   (ragged ? ", last pass ragged" : ", all passes full") + ", V=" + std::to_string(v) +
                   ", rows_par=" + std::to_string(g.rows_par));
      }

  // Chunk counts, with the fewest elements: one row of kThreads columns.
  GroupNormProblem wide = gn_problem(dir, 1, gn::kThreads, 1, 1, pairs[1], 0);
  struct ChunkCase {
    const char* why;
    std::function<bool(const gn::Geometry&)> want;
  };
  const ChunkCase chunk_cases[] = {
      {"2 chunks, the last ragged", [](const gn::Geometry& g) { return g.chunks == 2 && g.S % g.chunk_rows != 0; }},
      {"kThreads chunks (a full finalize tree)", [](const gn::Geometry& g) { return g.chunks == gn::kThreads; }},
      {"kThreads + 1 chunks (a work-item combines two partials), the last ragged",
       [](const gn::Geometry& g) { return g.chunks == gn::kThreads + 1 && g.S % g.chunk_rows != 0; }},
      {"more rows per work-item (the per-item halving stops above kRowBatch)",
       [](const gn::Geometry& g) { return g.chunk_rows > static_cast<std::int64_t>(g.rows_par) * gn::kRowBatch; }},
  };
  for (const auto& cc : chunk_cases) {
    GroupNormProblem p = wide;
    p.relu = variant % 2 == 1;
    p.src = pairs[variant % pairs.size()].first;
    p.dst = pairs[variant % pairs.size()].second;
    const std::int64_t s = find_rows(p, std::int64_t{1} << 22, cc.want);
    if (s == 0) throw std::logic_error(std::string("no boundary problem for: ") + cc.why);
    p.spatial = {1, 1, s};
    add(p, std::string(cc.why) + ", chunks=" + std::to_string(geometry(p).chunks));
  }

  {
    GroupNormProblem p = gn_problem(dir, 2, 4, 1, 1, pairs[variant % pairs.size()], variant);
    add(p, "smallest group: one element (variance 0)");
    const std::int64_t c = static_cast<std::int64_t>(gn::kThreads) * gn::kMaxColIters * gn::kMaxV;
    GroupNormProblem q = gn_problem(dir, 1, c, c, 1, pairs[variant % pairs.size()], variant);
    q.spatial = {1, 1, 37};
    add(q, "largest group of the widest columns: G=1, " + std::to_string(c) + " channels");
  }
  return out;
}

std::vector<std::string> groupnorm_unreachable_branches() {
  return {
      "chunk_rows raised so that chunks stay <= 65535 (grid x): needs S > 65535 * rows_par * 16 rows; the plan "
      "rule is checked without a run (GroupNormKernel.PlanLimits), the kernel paths it selects (chunk_rows a "
      "multiple of rows_par, ragged batches) are the ones the boundary problems run",
      "a second batch of finalize partials per work-item (chunks > kThreads * kFinalizeBatch): needs at least "
      "kThreads * kFinalizeBatch * 16 * 256 elements; reached by `kgate verify --full` (the U-Net's d128 "
      "GroupNorms have 4096 chunks)",
      "groups of 2^31 elements or more: declined by is_supported (GroupNormKernel.PlanLimits); the 64-bit "
      "offsets past 2^31 elements in total run in test_groupnorm_large",
  };
}

}  // namespace kgate::kernels
