// The bitwise corpus takes every production path of the conv kernels: each
// kernel variant (family, atom, tile) and each launch sequence that the
// plan's boundary problems reach on the host, for either target's model
// (gfx942, sm90), is reached by at least one bitwise entry of the same
// operator-direction, so the exact-fill bit comparison covers the code that
// ships.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "corpus/bitwise.hpp"
#include "kernels/api.hpp"
#include "kernels/runtime/host/host_backend.hpp"
#include "reference/descriptor.hpp"

namespace kgate {
namespace {

// A path: the plan's variant and the kernels it launches, in order (a split
// adds its tree or column-sum steps, so a split and an unsplit plan of one
// variant are two paths).
std::string path_of(const Problem& p) {
  const kernels::Plan pl = kernels::plan(p);
  std::string s = pl.variant + " |";
  for (const auto& st : pl.steps) s += " " + st.kernel;
  return s;
}

bool is_conv(const std::string& op_dir) { return op_dir.rfind("groupnorm", 0) != 0; }

TEST(BitwisePaths, EveryConvPathOfTheBoundaryProblemsHasABitwiseEntry) {
  for (rt::Target tg : {rt::Target::gfx942, rt::Target::sm90}) {
  SCOPED_TRACE(tg == rt::Target::sm90 ? "sm90" : "gfx942");
  rt::host::ScopedConfig cfg(rt::host::config_for(tg, rt::host::config()));
  std::map<std::string, std::set<std::string>> bitwise;  // op.dir -> paths
  for (const Problem& p : corpus::bitwise_problems()) bitwise[op_dir_name(p)].insert(path_of(p));
  int paths = 0;
  for (const std::string& od : kernels::implemented_ops()) {
    if (!is_conv(od)) continue;
    std::map<std::string, std::string> wanted;  // path -> the first boundary problem taking it
    for (const auto& b : kernels::boundary_problems(od)) wanted.emplace(path_of(b.problem), to_descriptor(b.problem));
    ASSERT_FALSE(wanted.empty()) << od;
    for (const auto& [path, example] : wanted) {
      ++paths;
      EXPECT_TRUE(bitwise[od].count(path)) << od << ": no bitwise entry takes " << path << " (as " << example << " does)";
    }
  }
  EXPECT_GT(paths, 12);
  }
}

// The other direction: an entry whose plan no boundary problem reaches is a
// path the plan's own problems miss (kept, but it must still be a kernel
// path, not a declined problem).
TEST(BitwisePaths, EveryConvEntryIsSupported) {
  for (const Problem& p : corpus::bitwise_problems()) {
    if (!is_conv(op_dir_name(p))) continue;
    const auto s = kernels::is_supported(p);
    EXPECT_TRUE(s) << to_descriptor(p) << ": " << s.reason;
  }
}

}  // namespace
}  // namespace kgate
