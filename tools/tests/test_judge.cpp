// `kgate judge` and the accumulation models on candidates built here: a
// correct one passes under every model that describes it; the defects the
// models exist for (bf16 partials, tf32 operands) fail under fp32-any-order
// and pass under their own model; every malformed input or output folder is
// an InputError naming the file or flag.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "oracles/models.hpp"
#include "reference/conv3d/ref.hpp"
#include "reference/descriptor.hpp"
#include "reference/digest.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"
#include "tools/judge_cmd.hpp"

namespace fs = std::filesystem;

namespace kgate {
namespace {

struct Dirs {
  fs::path root;
  Dirs() {
    root = fs::temp_directory_path() / ("kgate_judge_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root / "in");
    fs::create_directories(root / "out");
  }
  ~Dirs() { fs::remove_all(root); }
  std::string in() const { return (root / "in").string(); }
  std::string out() const { return (root / "out").string(); }
};

// What `kgate gen` writes: every input and the manifest.
std::map<Role, Tensor> gen(const Problem& p, const Fill& f, const std::string& dir) {
  auto in = ref::make_inputs(p, f);
  nlohmann::json m{{"descriptor", to_descriptor(p)}, {"fill", to_json(f)}, {"tensors", nlohmann::json::object()}};
  for (const auto& s : inputs(p)) {
    write_npy((fs::path(dir) / (std::string(name(s.role)) + ".npy")).string(), in.at(s.role).view());
    m["tensors"][std::string(name(s.role))] = {{"digest", digest(in.at(s.role))}};
  }
  std::ofstream(fs::path(dir) / "manifest.json") << m.dump(2);
  return in;
}

void put(const std::string& dir, Role r, const Tensor& t) {
  write_npy((fs::path(dir) / (std::string(name(r)) + ".npy")).string(), t.view());
}

int judge(const std::string& desc, const Dirs& d, const std::string& model = "fp32-any-order") {
  JudgeCli c;
  c.descriptor = desc;
  c.inputs = d.in();
  c.outputs = d.out();
  c.model = model;
  return run_judge_command(c);
}

std::string field_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.field() + ": " + e.message();
  }
  return "(no InputError)";
}

// The reference of every output rounded once to its dtype: what a correct
// kernel returns at best.
void put_reference(const Problem& p, const std::map<Role, Tensor>& in, const std::string& dir) {
  const auto want = ref::run_reference(p, ref::refs(in), ref::Impl::fast);
  for (const auto& s : outputs(p)) put(dir, s.role, want.at(s.role).to(s.dtype));
}

// y of a 1x1x1 convolution (K = cin products per output), summed in S
// slices whose fp32 partials are rounded to `partial` (bf16: the defect) and
// then added in fp32; operands first rounded to `operand_bits` bits (0: not).
Tensor split_conv(const ConvProblem& p, const std::map<Role, Tensor>& in, int slices, DType partial, int operand_bits) {
  const Tensor& x = in.at(Role::x);
  const Tensor& w = in.at(Role::w);
  const std::int64_t pos = x.numel() / p.cin;
  Tensor y(p.dst, {p.n, p.in[0], p.in[1], p.in[2], p.cout});
  auto op = [&](double v) {
    if (operand_bits == 0) return static_cast<float>(v);
    int e = 0;
    const double m = std::frexp(v, &e);
    return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(m, operand_bits)), e - operand_bits));
  };
  const std::int64_t len = (p.cin + slices - 1) / slices;
  for (std::int64_t i = 0; i < pos; ++i)
    for (std::int64_t co = 0; co < p.cout; ++co) {
      float total = 0;
      for (std::int64_t s0 = 0; s0 < p.cin; s0 += len) {
        float part = 0;
        for (std::int64_t ci = s0; ci < std::min(p.cin, s0 + len); ++ci)
          part += op(x.get(i * p.cin + ci)) * op(w.get(co * p.cin + ci));
        Tensor one(partial, {1});
        one.set(0, part);
        total += static_cast<float>(one.get(0));
      }
      y.set(i * p.cout + co, total);
    }
  return y;
}

TEST(Models, ParseAndName) {
  for (const char* m : {"fp32-any-order", "fp32-split:8", "tf32", "bf16-partials:4", "mma-sm90", "mfma-cdna3"})
    EXPECT_EQ(oracle::parse_model(m).name(), m);
  for (const char* bad : {"", "fp32", "fp32-split", "fp32-split:0", "fp32-split:x", "bf16-partials:-1", "tf32:2"})
    EXPECT_EQ(field_of([&] { oracle::parse_model(bad); }).rfind("--model: ", 0), 0u) << bad;
}

TEST(Models, GroupNormTakesFp32ModelsOnly) {
  const Problem g = parse_descriptor("groupnorm.fwd fp32 n1 c8 g2 d4");
  EXPECT_EQ(oracle::model_reductions(g, oracle::parse_model("fp32-split:4")).at("mean").splits, 4);
  for (const char* m : {"tf32", "bf16-partials:4", "mma-sm90"})
    EXPECT_EQ(field_of([&] { oracle::model_reductions(g, oracle::parse_model(m)); }).rfind("--model: ", 0), 0u) << m;
  EXPECT_EQ(field_of([&] { oracle::model_reductions(parse_descriptor("conv3d.fwd fp32 n1 c4 k4 d4 kd1"),
                                                    oracle::parse_model("mma-sm90")); })
                .rfind("--model: ", 0),
            0u);
}

TEST(Judge, ReferenceRoundedPassesOnEveryDirection) {
  for (const char* desc : {"conv3d.fwd bf16:fp32 n1 c4 k4 d5 kd3 p1 bias", "conv3d.bwd_data bf16 n1 c4 k6 d5 kd3 s2",
                           "conv_transpose3d.bwd_weight fp16:fp32 n2 c4 k2 d3 kd2 s2 bias",
                           "groupnorm.fwd bf16 n2 c8 g2 d3 relu", "groupnorm.bwd fp32 n1 c8 g4 d3 noaffine"}) {
    const Problem p = parse_descriptor(desc);
    for (const Fill& f : {std::holds_alternative<ConvProblem>(p) ? lattice_fill(p, 3) : parse_fill("gn_exact", 3),
                          parse_fill("signed", 3)}) {
      Dirs d;
      put_reference(p, gen(p, f, d.in()), d.out());
      EXPECT_EQ(judge(desc, d), 0) << desc << " " << fill_string(f);
    }
  }
}

TEST(Judge, Bf16PartialsFailAnyOrderAndPassTheirModel) {
  const char* desc = "conv3d.fwd fp32 n1 c512 k4 d4 kd1";
  const Problem p = parse_descriptor(desc);
  Dirs d;
  const auto in = gen(p, parse_fill("signed", 5), d.in());
  put(d.out(), Role::y, split_conv(std::get<ConvProblem>(p), in, 8, DType::bf16, 0));
  EXPECT_EQ(judge(desc, d), 1);
  EXPECT_EQ(judge(desc, d, "fp32-split:8"), 1);
  EXPECT_EQ(judge(desc, d, "bf16-partials:8"), 0);
  // fp32 partials: an order any fp32 model allows.
  put(d.out(), Role::y, split_conv(std::get<ConvProblem>(p), in, 8, DType::fp32, 0));
  EXPECT_EQ(judge(desc, d), 0);
  EXPECT_EQ(judge(desc, d, "fp32-split:8"), 0);
}

TEST(Judge, Tf32OperandsFailFp32AndPassTf32) {
  const char* desc = "conv3d.fwd fp32 n1 c64 k4 d4 kd1";
  const Problem p = parse_descriptor(desc);
  Dirs d;
  const auto in = gen(p, parse_fill("signed", 6), d.in());
  put(d.out(), Role::y, split_conv(std::get<ConvProblem>(p), in, 1, DType::fp32, 11));
  EXPECT_EQ(judge(desc, d), 1);
  EXPECT_EQ(judge(desc, d, "tf32"), 0);
  // On the exact fill every order-independent model must reproduce the
  // exact result: tf32 keeps the lattice's small integers.
  Dirs e;
  const auto li = gen(p, lattice_fill(p, 6), e.in());
  put(e.out(), Role::y, split_conv(std::get<ConvProblem>(p), li, 1, DType::fp32, 11));
  EXPECT_EQ(judge(desc, e, "tf32"), 0);
}

// ATen's GroupNorm: y = x * s + (beta - mean * s), s = rstd * gamma, in
// fp32. On constant groups (x = mean) that rounds where (x - mean) * s + beta
// gives beta exactly; a model does not claim tier 1 for y, so it passes.
TEST(Judge, AFoldedShiftGroupNormPassesOnConstantGroups) {
  const char* desc = "groupnorm.fwd fp32 n1 c8 g2 d3";
  const Problem p = parse_descriptor(desc);
  const auto& g = std::get<GroupNormProblem>(p);
  Fill f = parse_fill("gn_exact", 2);
  f.constant = true;
  f.mean = 16;
  Dirs d;
  const auto in = gen(p, f, d.in());
  auto want = ref::run_reference(p, ref::refs(in), ref::Impl::fast);
  Tensor y(DType::fp32, g.x_dims());
  const std::int64_t cg = g.c / g.groups, pos = y.numel() / g.c;
  for (std::int64_t i = 0; i < pos; ++i)
    for (std::int64_t c = 0; c < g.c; ++c) {
      const float mean = static_cast<float>(want.at(Role::mean).get(c / cg));
      const float rstd = static_cast<float>(want.at(Role::rstd).get(c / cg));
      const float s = rstd * static_cast<float>(in.at(Role::gamma).get(c));
      // What the fold costs at most: the rounding of mean * s, which a
      // centred epilogue never forms (here one ulp of it, as ATen shows).
      const float big = mean * s;
      const float shift = static_cast<float>(in.at(Role::beta).get(c)) - big;
      const float ulp = std::nextafter(big, std::numeric_limits<float>::infinity()) - big;
      y.set(i * g.c + c, static_cast<float>(in.at(Role::x).get(i * g.c + c)) * s + shift + (c % 2 ? ulp : -ulp));
      continue;
      y.set(i * g.c + c, static_cast<float>(in.at(Role::x).get(i * g.c + c)) * s + shift);
    }
  put(d.out(), Role::y, y);
  put(d.out(), Role::mean, want.at(Role::mean).to(DType::fp32));
  put(d.out(), Role::rstd, want.at(Role::rstd).to(DType::fp32));
  std::int64_t inexact = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) inexact += y.get(i) != want.at(Role::y).get(i);
  EXPECT_GT(inexact, 0);  // the candidate does round: tier 1 would fail it
  EXPECT_EQ(judge(desc, d), 0);
}

TEST(Judge, AZeroCandidateFails) {
  const char* desc = "conv3d.fwd bf16 n1 c4 k4 d4 kd3 p1";
  const Problem p = parse_descriptor(desc);
  Dirs d;
  gen(p, parse_fill("signed", 1), d.in());
  put(d.out(), Role::y, Tensor(DType::bf16, std::get<ConvProblem>(p).y_dims()));
  EXPECT_EQ(judge(desc, d), 1);
}

TEST(Judge, BadFoldersNameTheFile) {
  const char* desc = "conv3d.fwd bf16:fp32 n1 c4 k4 d4 kd3 p1";
  const Problem p = parse_descriptor(desc);
  Dirs d;
  const auto in = gen(p, parse_fill("signed", 1), d.in());
  const std::string y = (fs::path(d.out()) / "y.npy").string(), x = (fs::path(d.in()) / "x.npy").string();
  EXPECT_EQ(field_of([&] { judge(desc, d); }), y + ": missing: output y (fp32 1x4x4x4x4)");
  put_reference(p, in, d.out());
  // A candidate in another dtype than the descriptor's output.
  put(d.out(), Role::y, ref::run_reference(p, ref::refs(in), ref::Impl::fast).at(Role::y).to(DType::bf16));
  EXPECT_EQ(field_of([&] { judge(desc, d); }).rfind(y + ": ", 0), 0u);
  // NCDHW dims: named, with the layout hint.
  put(d.out(), Role::y, Tensor(DType::fp32, {1, 4, 4, 4, 4}));
  put(d.out(), Role::y, Tensor(DType::fp32, {1, 4, 4, 4, 5}));
  EXPECT_NE(field_of([&] { judge(desc, d); }).find(y + ": dims 1x4x4x4x5"), std::string::npos);
  put_reference(p, in, d.out());
  put(d.out(), Role::dx, Tensor(DType::fp32, {1}));
  EXPECT_NE(field_of([&] { judge(desc, d); }).find("dx.npy: not an output of"), std::string::npos);
  fs::remove(fs::path(d.out()) / "dx.npy");
  EXPECT_EQ(judge(desc, d), 0);
  // A changed input.
  Tensor x2 = in.at(Role::x).to(in.at(Role::x).dtype());
  x2.set(0, x2.get(0) + 1);
  put(d.in(), Role::x, x2);
  EXPECT_NE(field_of([&] { judge(desc, d); }).find(x + ": differs from the input `kgate gen` wrote"), std::string::npos);
  put(d.in(), Role::x, in.at(Role::x));
  // Inputs of another problem, and a folder with no manifest.
  EXPECT_EQ(field_of([&] { judge("conv3d.fwd bf16:fp32 n1 c4 k4 d5 kd3 p1", d); }).rfind("--inputs: ", 0), 0u);
  fs::remove(fs::path(d.in()) / "manifest.json");
  EXPECT_NE(field_of([&] { judge(desc, d); }).find("--inputs: " + d.in() + " has no manifest.json"), std::string::npos);
}

TEST(Judge, NcdhwDimsGetTheLayoutHint) {
  const char* desc = "conv3d.fwd fp32 n1 c4 k3 d4 h5 w6 kd1";
  const Problem p = parse_descriptor(desc);
  Dirs d;
  gen(p, parse_fill("signed", 1), d.in());
  put(d.out(), Role::y, Tensor(DType::fp32, {1, 3, 4, 5, 6}));
  EXPECT_NE(field_of([&] { judge(desc, d); }).find("looks like NCDHW"), std::string::npos);
}

}  // namespace
}  // namespace kgate
