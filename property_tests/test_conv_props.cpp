// Properties of the convolution kernels on generated problems (every
// operator-direction, stride, dilation, groups, asymmetric padding, k in
// {1, 2, 3, 5}, dtypes, shape forms): the gate's verdict is "passed", and the
// three shape forms of one logical convolution agree on the interior. A
// failure shrinks to a minimal problem and prints its descriptor and the
// `kgate check` line that reproduces it.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kernels/api.hpp"
#include "oracles/oracle.hpp"
#include "property_tests/gen_problems.hpp"
#include "property_tests/verdict.hpp"
#include "reference/conv3d/ref.hpp"
#include "tools/gate.hpp"

namespace kgate {
namespace {

RC_GTEST_PROP(ConvProps, KernelPassesTheOracle, ()) {
  const ConvProblem p = *prop::gen_conv();
  const Fill f = *prop::gen_conv_fill(p);
  const prop::Verdict v = prop::gate_verdict(Problem(p), f);
  RC_LOG() << "repro: kgate check '" << to_descriptor(p) << "' --fill " << fill_string(f) << " --seed " << f.seed
           << "\n" << v.evidence;
  RC_ASSERT(v.ok);
}

RC_GTEST_PROP(ConvProps, GeneratedProblemsAreValidAndSupported, ()) {
  const ConvProblem p = *prop::gen_conv();
  RC_ASSERT(std::get<ConvProblem>(parse_descriptor(to_descriptor(p))) == p);
  const kernels::Support s = kernels::is_supported(Problem(p));
  RC_LOG() << s.reason;
  RC_ASSERT(s.ok);
}

// The generated matrix-core problems reach the matrix-core kernels (their
// plans' variant) and pass the gate: the properties above pick the
// portable kernels almost always (few channels, few positions).
RC_GTEST_PROP(ConvProps, MatrixCoreKernelsPassTheOracle, ()) {
  const ConvProblem p = *prop::gen_conv_mma();
  const Fill f = *prop::gen_conv_fill(p);
  RC_LOG() << "repro: kgate check '" << to_descriptor(p) << "' --fill " << fill_string(f) << " --seed " << f.seed << "\n";
  const kernels::Support s = kernels::is_supported(Problem(p));
  RC_LOG() << s.reason;
  RC_ASSERT(s.ok);
  const kernels::Plan plan = kernels::plan(Problem(p));
  RC_LOG() << kernels::to_string(plan);
  RC_ASSERT(plan.variant.rfind("mma-", 0) == 0u);
  RC_TAG(plan.steps.at(0).kernel);
  const prop::Verdict v = prop::gate_verdict(Problem(p), f);
  RC_LOG() << v.evidence;
  RC_ASSERT(v.ok);
}

// x [n][D][H][W][c] copied into a zero tensor of extent `ext` at offset `at`
// (per spatial axis; source planes outside x stay zero).
Tensor place(const Tensor& x, const Axis3& ext, const Axis3& at, std::int64_t d_begin, std::int64_t d_end) {
  const Dims& xd = x.dims();
  Tensor out(x.dtype(), {xd[0], ext[0], ext[1], ext[2], xd[4]});
  for (std::int64_t b = 0; b < xd[0]; ++b)
    for (std::int64_t i0 = d_begin; i0 < d_end; ++i0)
      for (std::int64_t i1 = 0; i1 < xd[2]; ++i1)
        for (std::int64_t i2 = 0; i2 < xd[3]; ++i2)
          for (std::int64_t c = 0; c < xd[4]; ++c) {
            const std::int64_t src = (((b * xd[1] + i0) * xd[2] + i1) * xd[3] + i2) * xd[4] + c;
            const std::int64_t dst = (((b * ext[0] + i0 - d_begin + at[0]) * ext[1] + i1 + at[1]) * ext[2] + i2 + at[2]) * xd[4] + c;
            out.set(dst, x.get(src));
          }
  return out;
}

// The same logical conv3d.fwd ("same" padding p = dil*(k-1)/2) in its three
// forms: logical (padding p), halo (p zero planes concatenated on every axis,
// padding 0) and adapter (the volume split in two along D, each shard with
// p halo planes from its neighbour or zeros at the volume's edge, padding
// kept on H and W). The outputs agree on the interior: the halo form's whole
// output, and each shard's output on its slab of D.
RC_GTEST_PROP(ConvProps, ShapeFormsAgreeOnTheInterior, ()) {
  ConvProblem p;
  p.n = *rc::gen::inRange<std::int64_t>(1, 3);
  p.groups = *rc::gen::inRange<std::int64_t>(1, 3);
  p.cin = p.groups * *rc::gen::inRange<std::int64_t>(1, 5);
  p.cout = p.groups * *rc::gen::inRange<std::int64_t>(1, 5);
  for (int a = 0; a < 3; ++a) {
    p.kernel[a] = a == 0 ? *rc::gen::element<std::int64_t>(3, 5) : *rc::gen::element<std::int64_t>(1, 3, 5);
    p.dilation[a] = *rc::gen::inRange<std::int64_t>(1, 3);
    p.pad_front[a] = p.pad_back[a] = p.dilation[a] * (p.kernel[a] - 1) / 2;
    p.in[a] = *rc::gen::inRange<std::int64_t>(a == 0 ? 2 : 1, 7);
  }
  p.bias = *rc::gen::element(false, true);
  p.src = *rc::gen::element(DType::fp32, DType::bf16, DType::fp16);
  p.dst = *rc::gen::element(DType::fp32, p.src);
  p.validate();
  const Fill f = parse_fill("signed", *rc::gen::inRange<std::uint64_t>(0, 1000000));
  RC_LOG() << "logical: " << to_descriptor(p) << " --fill signed --seed " << f.seed << "\n";

  const auto in = ref::make_inputs(Problem(p), f);
  auto want_all = kernels::run(Problem(p), kernels::plan(Problem(p)), kernels::pointers(in));
  const Tensor& want = want_all.at(Role::y);
  const Axis3 pad = p.pad_front;
  auto run_form = [&](const ConvProblem& q, const Tensor& x) {
    RC_LOG() << "form: " << to_descriptor(q) << "\n";
    std::map<Role, const Tensor*> ptr = kernels::pointers(in);
    ptr[Role::x] = &x;
    return std::move(kernels::run(Problem(q), kernels::plan(Problem(q)), ptr).at(Role::y));
  };

  // Halo form: the whole volume, zero halo planes.
  ConvProblem h = p;
  h.form = ShapeForm::halo;
  h.halo = pad;
  h.pad_front = h.pad_back = {0, 0, 0};
  for (int a = 0; a < 3; ++a) h.in[a] = p.in[a] + 2 * pad[a];
  h.validate();
  const Tensor xh = place(in.at(Role::x), h.in, pad, 0, p.in[0]);
  const Tensor yh = run_form(h, xh);
  RC_ASSERT(yh.dims() == want.dims());
  for (std::int64_t i = 0; i < want.numel(); ++i) RC_ASSERT(yh.get(i) == want.get(i));

  // Adapter form: two shards along D.
  const std::int64_t cut = *rc::gen::inRange<std::int64_t>(1, p.in[0]);
  const Axis3 o = p.out();
  for (const auto& [d0, d1] : {std::pair{std::int64_t{0}, cut}, std::pair{cut, p.in[0]}}) {
    ConvProblem s = p;
    s.form = ShapeForm::adapter;
    s.halo = {pad[0], 0, 0};
    s.pad_front[0] = s.pad_back[0] = 0;
    s.in[0] = d1 - d0 + 2 * pad[0];
    s.validate();
    // Planes [d0 - pad, d1 + pad) of x, zeros past the volume's edge.
    const std::int64_t lo = std::max<std::int64_t>(0, d0 - pad[0]), hi = std::min(p.in[0], d1 + pad[0]);
    const Tensor xs = place(in.at(Role::x), s.in, {lo - (d0 - pad[0]), 0, 0}, lo, hi);
    const Tensor ys = run_form(s, xs);
    RC_ASSERT(ys.dims()[1] == d1 - d0);
    const std::int64_t plane = o[1] * o[2] * p.cout;
    for (std::int64_t b = 0; b < p.n; ++b)
      for (std::int64_t i = 0; i < (d1 - d0) * plane; ++i)
        RC_ASSERT(ys.get(b * (d1 - d0) * plane + i) == want.get((b * o[0] + d0) * plane + i));
  }
}

}  // namespace
}  // namespace kgate
