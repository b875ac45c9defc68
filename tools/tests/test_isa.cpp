// The ISA audit's parsers and checks on synthetic compiler output: each
// check is made to fail once, and clean reports pass.
#include <gtest/gtest.h>

#include "tools/isa.hpp"

namespace kgate::isa {
namespace {

std::string remark(const std::string& key, const std::string& value) {
  return "k.hip:3:1: remark:     " + key + ": " + value + " [-Rpass-analysis=kernel-resource-usage]\n";
}

std::string gfx942_report(const std::string& name, long scratch, long vspill, long lds, const std::string& dyn) {
  return "k.hip:3:1: remark: Function Name: " + name + " [-Rpass-analysis=kernel-resource-usage]\n" +
         remark("SGPRs", "20") + remark("VGPRs", "64") + remark("AGPRs", "4") +
         remark("ScratchSize [bytes/lane]", std::to_string(scratch)) + remark("Dynamic Stack", dyn) +
         remark("Occupancy [waves/SIMD]", "8") + remark("SGPRs Spill", "0") +
         remark("VGPRs Spill", std::to_string(vspill)) + remark("LDS Size [bytes/block]", std::to_string(lds));
}

bool has(const std::vector<Finding>& f, const std::string& check) {
  for (const auto& x : f)
    if (x.check == check) return true;
  return false;
}

TEST(Isa, Gfx942CleanKernelPasses) {
  auto ks = parse_gfx942_remarks(gfx942_report("_Z5cleanPf", 0, 0, 65536, "False"));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].pretty, "clean(float*)");
  EXPECT_EQ(ks[0].vgpr, 64);
  EXPECT_EQ(ks[0].agpr, 4);
  EXPECT_EQ(ks[0].sgpr, 20);
  EXPECT_EQ(ks[0].occupancy, 8);
  EXPECT_EQ(ks[0].lds, 65536);
  scan_gfx942_isa("_Z5cleanPf:\n\tv_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]\n"
                  "\tglobal_atomic_add v1, v0, s[2:3]\n\tds_add_u32 v0, v1\n\ts_endpgm\n.Lfunc_end0:\n",
                  ks);
  EXPECT_EQ(ks[0].matrix_ops.count("v_mfma_f32_32x32x8_bf16"), 1u);
  EXPECT_TRUE(ks[0].float_atomics.empty());  // integer atomics are fine
  EXPECT_TRUE(check(ks).empty());
}

TEST(Isa, Gfx942EachCheckFails) {
  EXPECT_TRUE(has(check(parse_gfx942_remarks(gfx942_report("_Z1av", 16, 0, 0, "False"))), "scratch"));
  EXPECT_TRUE(has(check(parse_gfx942_remarks(gfx942_report("_Z1av", 0, 3, 0, "False"))), "spills"));
  EXPECT_TRUE(has(check(parse_gfx942_remarks(gfx942_report("_Z1av", 0, 0, 65540, "False"))), "lds"));
  EXPECT_TRUE(has(check(parse_gfx942_remarks(gfx942_report("_Z1av", 0, 0, 0, "True"))), "dynamic-stack"));
  auto ks = parse_gfx942_remarks(gfx942_report("_Z1av", 0, 0, 0, "False"));
  scan_gfx942_isa("_Z1av:\n\tglobal_atomic_pk_add_bf16 v1, v0, s[2:3]\n.Lfunc_end0:\n"
                  "other:\n\tglobal_atomic_add_f32 v1, v0, s[2:3]\n",
                  ks);
  ASSERT_EQ(ks[0].float_atomics.size(), 1u);  // the second is outside the kernel
  EXPECT_TRUE(has(check(ks), "float-atomic"));
}

TEST(Isa, Gfx942FloatAtomicMnemonics) {
  for (const char* m : {"global_atomic_add_f32", "global_atomic_add_f64", "global_atomic_pk_add_f16",
                        "global_atomic_pk_add_bf16", "buffer_atomic_add_f32", "flat_atomic_min_f64",
                        "global_atomic_max_f64", "ds_add_f32", "ds_add_rtn_f32", "ds_pk_add_bf16", "ds_min_f64",
                        "ds_max_rtn_f32", "buffer_atomic_pk_add_f16"})
    EXPECT_TRUE(is_gfx942_float_atomic(m)) << m;
  for (const char* m : {"global_atomic_add", "global_atomic_add_x2", "global_atomic_smin", "ds_add_u32",
                        "ds_add_rtn_u32", "global_load_dword", "v_add_f32", "ds_write_b32"})
    EXPECT_FALSE(is_gfx942_float_atomic(m)) << m;
}

TEST(Isa, CudaPtxasAndPtx) {
  const std::string ptxas =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z4sumsPKfPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z4sumsPKfPf\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 30 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z5spillPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z5spillPf\n"
      "    48 bytes stack frame, 40 bytes spill stores, 40 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 0 barriers, 70000 bytes smem, 360 bytes cmem[0]\n";
  auto ks = parse_ptxas(ptxas);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].vgpr, 30);
  EXPECT_EQ(ks[0].lds, 1024);
  scan_ptx(".visible .entry _Z4sumsPKfPf(\n\t.param .u64 a\n)\n{\n\tatom.global.add.u32 %r1, [%rd1], 1;\n}\n"
           ".visible .entry _Z5spillPf(\n)\n{\n\tred.global.add.f32 [%rd1], %f1;\n\tmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1}, {%r1}, {%r2}, {%f2};\n}\n",
           ks);
  EXPECT_TRUE(ks[0].float_atomics.empty());
  EXPECT_TRUE(check({ks[0]}).empty());
  ASSERT_EQ(ks[1].float_atomics.size(), 1u);
  EXPECT_EQ(ks[1].matrix_ops.size(), 1u);
  const auto f = check({ks[1]});
  EXPECT_TRUE(has(f, "float-atomic"));
  EXPECT_TRUE(has(f, "scratch"));
  EXPECT_TRUE(has(f, "spills"));
  EXPECT_TRUE(has(f, "lds"));
  // On cuda, scratch and spills are reported, not fatal; the rest are.
  for (const auto& x : f) EXPECT_EQ(is_fatal(x, "cuda"), x.check != "scratch" && x.check != "spills") << x.check;
  for (const auto& x : f) EXPECT_TRUE(is_fatal(x, "gfx942")) << x.check;
  for (const char* i : {"atom.global.add.f32 %f1, [%rd1], %f2;", "red.global.add.noftz.bf16x2 [%rd1], %r1;",
                        "atom.shared.add.f64 %fd1, [%r1], %fd2;", "@%p1 red.global.add.f32 [%rd2], %f3;",
                        "atom.add.noftz.f16 %h1, [%rd1], %h2;"})
    EXPECT_TRUE(is_ptx_float_atomic(i)) << i;
  for (const char* i : {"atom.global.add.u32 %r1, [%rd1], 1;", "atom.global.cas.b32 %r1, [%rd1], %r2, %r3;",
                        "add.f32 %f1, %f2, %f3;", "ld.global.f32 %f1, [%rd1];"})
    EXPECT_FALSE(is_ptx_float_atomic(i)) << i;
}

}  // namespace
}  // namespace kgate::isa
