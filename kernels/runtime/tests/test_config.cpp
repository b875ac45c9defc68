// The emulator's environment: every variable's valid values are taken, and
// every bad value is a ConfigError naming the variable and its allowed values.
#include <map>
#include <string>

#include "kernels/runtime/tests/test_util.hpp"

namespace rt = kgate::rt;
namespace host = kgate::rt::host;

namespace {

std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
  const auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

host::Config from(std::map<std::string, std::string> env) {
  g_env = std::move(env);
  return host::config_from(&fake_getenv);
}

// The ConfigError message for one variable's value ("" when it is accepted).
std::string config_error(const std::string& var, const std::string& value) {
  try {
    from({{var, value}});
  } catch (const host::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsWithoutEnvironment) {
  const host::Config c = from({});
  EXPECT_EQ(c.target, rt::Target::gfx942);
  EXPECT_EQ(c.wave_size, 64);
  EXPECT_EQ(c.mfma, rt::MfmaModel::cdna3);
  EXPECT_EQ(c.threads, 0);
  EXPECT_TRUE(c.check_lds);
  EXPECT_EQ(c.stack_bytes, 256u * 1024);
  EXPECT_EQ(host::describe(c), "target=gfx942 wave=64 mfma=cdna3 threads=0 order=in_order lds_check=1 stack_kib=256");
}

TEST(Config, ValidValues) {
  EXPECT_EQ(from({{"KGATE_HOST_THREADS", "3"}}).threads, 3);
  const host::Config s = from({{"KGATE_HOST_ORDER", "shuffled:18446744073709551615"}});
  EXPECT_EQ(s.order, host::Order::shuffled);
  EXPECT_EQ(s.seed, 18446744073709551615ull);
  EXPECT_EQ(from({{"KGATE_HOST_ORDER", "reversed"}}).order, host::Order::reversed);
  const host::Config t = from({{"KGATE_HOST_TARGET", "sm90"}});
  EXPECT_EQ(t.target, rt::Target::sm90);
  EXPECT_EQ(t.wave_size, 32);
  EXPECT_EQ(t.mfma, rt::MfmaModel::sm90);
  EXPECT_EQ(from({{"KGATE_HOST_TARGET", "sm90"}, {"KGATE_MFMA_MODEL", "exact"}}).mfma, rt::MfmaModel::exact);
  EXPECT_EQ(from({{"KGATE_HOST_WAVE", "32"}}).wave_size, 32);
  EXPECT_FALSE(from({{"KGATE_LDS_CHECK", "0"}}).check_lds);
  EXPECT_EQ(from({{"KGATE_HOST_STACK_KIB", "64"}}).stack_bytes, 64u * 1024);
}

struct Bad {
  const char* var;
  const char* value;
  const char* allowed;  // a piece of the allowed values the message must name
};

TEST(Config, BadValuesAreErrorsNamingTheVariableAndTheAllowedValues) {
  const Bad bad[] = {
      {"KGATE_HOST_THREADS", "abc", "0..4096"},
      {"KGATE_HOST_THREADS", "-1", "0..4096"},
      {"KGATE_HOST_THREADS", "1e9", "0..4096"},
      {"KGATE_HOST_THREADS", "1000000000", "0..4096"},
      {"KGATE_HOST_THREADS", "", "0..4096"},
      {"KGATE_HOST_ORDER", "shuffled:abc", "shuffled:SEED"},
      {"KGATE_HOST_ORDER", "shuffled:", "shuffled:SEED"},
      {"KGATE_HOST_ORDER", "shuffled:18446744073709551616", "shuffled:SEED"},
      {"KGATE_HOST_ORDER", "random", "in_order, reversed"},
      {"KGATE_HOST_TARGET", "gfx90a", "gfx942, sm90"},
      {"KGATE_HOST_TARGET", "SM90", "gfx942, sm90"},
      {"KGATE_HOST_WAVE", "16", "64, 32"},
      {"KGATE_MFMA_MODEL", "bogus", "exact, cdna3"},
      {"KGATE_MFMA_MODEL", "EXACT", "exact, cdna3"},
      {"KGATE_MFMA_MODEL", "sm90", "exact, cdna3"},  // the sm90 model on the gfx942 target
      {"KGATE_LDS_CHECK", "yes", "1 (check LDS races), 0"},
      {"KGATE_LDS_CHECK", "off", "1 (check LDS races), 0"},
      {"KGATE_LDS_CHECK", "", "1 (check LDS races), 0"},
      {"KGATE_HOST_STACK_KIB", "huge", "64..1048576"},
      {"KGATE_HOST_STACK_KIB", "32", "64..1048576"},
  };
  for (const Bad& b : bad) {
    const std::string msg = config_error(b.var, b.value);
    EXPECT_NE(msg.find(std::string(b.var) + "='" + b.value + "'"), std::string::npos) << b.var << "=" << b.value << ": " << msg;
    EXPECT_NE(msg.find(b.allowed), std::string::npos) << b.var << "=" << b.value << ": " << msg;
  }
}

TEST(Config, TargetMismatchesAreErrors) {
  std::string msg;
  try {
    from({{"KGATE_HOST_TARGET", "sm90"}, {"KGATE_HOST_WAVE", "64"}});
  } catch (const host::ConfigError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("KGATE_HOST_WAVE='64'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("32 (the sm90 target)"), std::string::npos) << msg;
  msg.clear();
  try {
    from({{"KGATE_HOST_TARGET", "sm90"}, {"KGATE_MFMA_MODEL", "cdna3"}});
  } catch (const host::ConfigError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("KGATE_MFMA_MODEL='cdna3'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("exact, sm90"), std::string::npos) << msg;
  // set_config checks the same rules.
  host::Config c = host::config_for(rt::Target::sm90, rt::test::test_config());
  c.wave_size = 64;
  EXPECT_THROW(host::set_config(c), host::ConfigError);
  c = host::config_for(rt::Target::gfx942, rt::test::test_config());
  c.mfma = rt::MfmaModel::sm90;
  EXPECT_THROW(host::set_config(c), host::ConfigError);
  c.mfma = rt::MfmaModel::cdna3;
  c.threads = -1;
  EXPECT_THROW(host::set_config(c), host::ConfigError);
}

}  // namespace
