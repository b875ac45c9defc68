// The shape calculator reproduces docs/CORPUS.md's configuration A exactly, and
// the corpus reader rejects corrupted files naming the file, index and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <tuple>

#include "corpus/bitwise.hpp"
#include "corpus/corpus_file.hpp"
#include "corpus/unet.hpp"
#include "reference/error.hpp"
#include "reference/npy.hpp"

namespace kgate::corpus {
namespace {

using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // (cin, cout, side)

// Configuration A as written in docs/CORPUS.md ("the calls of one step").
const std::map<Key, int> kConv3 = {
    {{3, 64, 128}, 1},    {{64, 64, 128}, 2},   {{64, 128, 64}, 1},  {{128, 128, 64}, 2},  {{128, 256, 32}, 1},
    {{256, 256, 32}, 2},  {{256, 512, 16}, 1},  {{512, 512, 16}, 2}, {{512, 1024, 8}, 1},  {{1024, 1024, 8}, 1},
    {{1024, 512, 16}, 1}, {{512, 256, 32}, 1},  {{256, 128, 64}, 1}, {{128, 64, 128}, 1}};
const std::map<Key, int> kConvT = {{{1024, 512, 8}, 1}, {{512, 256, 16}, 1}, {{256, 128, 32}, 1}, {{128, 64, 64}, 1}};
const std::map<std::pair<std::int64_t, std::int64_t>, int> kGn = {
    {{64, 128}, 4}, {{128, 64}, 4}, {{256, 32}, 4}, {{512, 16}, 4}, {{1024, 8}, 2}};

TEST(Unet, ConfigurationAIsCorpusMd) {
  const auto configs = configurations();
  ASSERT_EQ(configs[0].name, "A");
  std::map<Key, int> conv3, convT, head;
  std::map<std::pair<std::int64_t, std::int64_t>, int> gn;
  int gn_bwd = 0;
  for (const Call& c : training_step(configs[0].net)) {
    if (const auto* p = std::get_if<ConvProblem>(&c.problem)) {
      if (p->dir != ConvDir::fwd || c.form != ShapeForm::logical) continue;
      EXPECT_EQ(p->src, DType::bf16);
      EXPECT_EQ(p->n, 1);
      if (p->op == ConvOp::conv_transpose3d) {
        EXPECT_EQ(p->kernel, (Axis3{2, 2, 2}));
        EXPECT_EQ(p->stride, (Axis3{2, 2, 2}));
        EXPECT_TRUE(p->bias);
        EXPECT_EQ(p->out()[0], 2 * p->in[0]);
        convT[{p->cin, p->cout, p->in[0]}]++;
      } else if (p->kernel == Axis3{3, 3, 3}) {
        EXPECT_EQ(p->pad_front, (Axis3{1, 1, 1}));
        EXPECT_FALSE(p->bias);
        EXPECT_EQ(p->out(), p->in);
        conv3[{p->cin, p->cout, p->in[0]}]++;
      } else {
        head[{p->cin, p->cout, p->in[0]}]++;
        EXPECT_TRUE(p->bias);
      }
    } else {
      const auto& g = std::get<GroupNormProblem>(c.problem);
      EXPECT_EQ(g.groups, 8);
      EXPECT_TRUE(g.relu && g.affine);
      EXPECT_EQ(g.eps, 1e-5);
      EXPECT_EQ(g.src, DType::bf16);
      EXPECT_EQ(g.dst, DType::fp32);
      if (g.dir == GnDir::fwd) gn[{g.c, g.spatial[0]}]++;
      else gn_bwd++;
    }
  }
  EXPECT_EQ(conv3, kConv3);
  EXPECT_EQ(convT, kConvT);
  EXPECT_EQ(gn, kGn);
  EXPECT_EQ(gn_bwd, 18);
  EXPECT_EQ(head, (std::map<Key, int>{{{64, 6, 128}, 1}}));
}

TEST(Unet, DirectionsAndForms) {
  const auto configs = configurations();
  int stem_bwd_data = 0, adapter = 0, halo = 0;
  for (const Call& c : training_step(configs[0].net)) {
    const auto* p = std::get_if<ConvProblem>(&c.problem);
    if (!p) continue;
    if (c.site == "inc.conv1" && p->dir == ConvDir::bwd_data) stem_bwd_data++;
    adapter += c.form == ShapeForm::adapter;
    halo += c.form == ShapeForm::halo;
    if (c.form == ShapeForm::halo) {
      EXPECT_EQ(p->pad_front, (Axis3{0, 0, 0}));
      EXPECT_EQ(p->out()[1], p->in[1] - 2);
    }
  }
  EXPECT_EQ(stem_bwd_data, 0);  // the stem's input has no gradient
  EXPECT_EQ(adapter, 0);        // unsharded: adapter == logical
  EXPECT_GT(halo, 0);
  // Configuration D: D sharded 4 ways; the adapter form keeps H/W padding.
  bool seen = false;
  for (const Call& c : training_step(configs[3].net)) {
    const auto* p = std::get_if<ConvProblem>(&c.problem);
    if (!p || c.form != ShapeForm::adapter || c.site != "inc.conv2" || p->dir != ConvDir::fwd) continue;
    EXPECT_EQ(p->in, (Axis3{66, 256, 256}));
    EXPECT_EQ(p->pad_front, (Axis3{0, 1, 1}));
    EXPECT_EQ(p->out(), (Axis3{64, 256, 256}));
    seen = true;
  }
  EXPECT_TRUE(seen);
  // Configuration B has one more level: 1024 -> 2048 and 2048 -> 2048 at 8^3.
  bool deep = false;
  for (const Call& c : training_step(configs[1].net))
    if (const auto* p = std::get_if<ConvProblem>(&c.problem))
      deep |= p->cin == 2048 && p->cout == 2048 && p->in[0] == 8;
  EXPECT_TRUE(deep);
}

TEST(Unet, CommittedCorpusIsReproducedAndLoads) {
  const std::string path = std::string(KGATE_SOURCE_DIR) + "/corpus/shapes.json";
  EXPECT_EQ(read_text(path), dump(shapes_document(configurations())));
  const auto entries = load_shapes(path);
  EXPECT_GT(entries.size(), 100u);
}

std::string load_error(const std::string& text) {
  const auto path = (std::filesystem::temp_directory_path() / ("kgate_corpus_" + std::to_string(::getpid()) + ".json")).string();
  write_file_atomic(path, text);
  try {
    load_shapes(path);
  } catch (const InputError& e) {
    std::filesystem::remove(path);
    return std::string(e.what()).substr(path.size());
  }
  std::filesystem::remove(path);
  return "<accepted>";
}

TEST(Unet, CorruptedCorpusNamesFileIndexAndField) {
  auto doc = shapes_document({configurations()[0]});
  EXPECT_EQ(load_error(dump(doc)), "<accepted>");
  EXPECT_EQ(load_error("{\"problems\": [").substr(0, 30), ": problems[0]: malformed JSON:");
  auto bad = doc;
  bad["problems"][3]["problem"]["cin"] = -4;
  EXPECT_EQ(load_error(dump(bad)).substr(0, 29), ": problems[3].problem.cin: mu");
  bad = doc;
  bad["problems"][5]["extra"] = 1;
  EXPECT_EQ(load_error(dump(bad)), ": problems[5].extra: unknown field");
  bad = doc;
  bad["problems"][2]["descriptor"] = "conv3d.fwd bf16 n1 c1 k1 d1 kd1";
  EXPECT_EQ(load_error(dump(bad)).substr(0, 28), ": problems[2].descriptor: 'c");
  bad = doc;
  bad["problems"][7]["problem"]["groups"] = 5;
  EXPECT_NE(load_error(dump(bad)).find("problems[7].problem.groups"), std::string::npos);
}

// Every nlohmann error (syntax, number out of range, wrong type, missing
// field, wrapping integer) is an InputError naming the file and the value.
TEST(Unet, HostileJsonNamesFileAndField) {
  const auto doc = shapes_document({configurations()[0]});
  const std::string text = dump(doc);
  // A number no double holds, anywhere in the file.
  auto with_eps = [&](const std::string& v) {
    std::string t = text;
    const auto at = t.find("\"eps\": ");
    if (at == std::string::npos) return std::string("<no eps in the corpus>");
    const auto end = t.find_first_of(",\n}", at);
    return t.replace(at, end - at, "\"eps\": " + v);
  };
  const std::string overflow = load_error(with_eps("1e400"));
  EXPECT_NE(overflow.find(": problems["), std::string::npos) << overflow;
  EXPECT_NE(overflow.find("].problem.eps: malformed JSON: number overflow parsing '1e400'"), std::string::npos) << overflow;
  EXPECT_NE(load_error(with_eps("-1e400")).find("].problem.eps: malformed JSON: number overflow"), std::string::npos);
  EXPECT_NE(load_error("{\"provenance\": {\"x\": [1, 2, 1e999]}}").find(": provenance.x[2]: malformed JSON"), std::string::npos);
  // Wrong types.
  auto bad = doc;
  bad["problems"][0]["problem"]["n"] = "1";
  EXPECT_EQ(load_error(dump(bad)), ": problems[0].problem.n: expected an integer, got \"1\"");
  bad = doc;
  bad["problems"][0]["problem"]["in"][1] = 2.5;
  EXPECT_EQ(load_error(dump(bad)), ": problems[0].problem.in[1]: expected an integer, got 2.5");
  bad = doc;
  bad["problems"][1]["problem"]["in"] = nlohmann::json::object();
  EXPECT_EQ(load_error(dump(bad)), ": problems[1].problem.in: expected [D, H, W], got an object");
  bad = doc;
  bad["problems"][1]["sites"] = "down1";
  EXPECT_EQ(load_error(dump(bad)), ": problems[1].sites: missing or not an array");
  bad = doc;
  bad["problems"] = 7;
  EXPECT_EQ(load_error(dump(bad)), ": problems: missing or not an array");
  EXPECT_EQ(load_error("[1, 2]"), ": expected a JSON object");
  // Integers that would wrap: int64 fields and the int calls_per_step.
  bad = doc;
  bad["problems"][0]["problem"]["cin"] = std::uint64_t{18446744073709551615u};
  EXPECT_EQ(load_error(dump(bad)), ": problems[0].problem.cin: integer out of range: 18446744073709551615");
  bad = doc;
  bad["problems"][0]["calls_per_step"] = std::int64_t{4294967297};
  EXPECT_EQ(load_error(dump(bad)).substr(0, 43), ": problems[0].calls_per_step: must be in [1");
  // Missing fields.
  bad = doc;
  bad["problems"][0]["problem"].erase("kernel");
  EXPECT_EQ(load_error(dump(bad)), ": problems[0].problem.kernel: missing");
  bad = doc;
  bad["problems"][0].erase("calls_per_step");
  EXPECT_EQ(load_error(dump(bad)), ": problems[0].calls_per_step: missing");
  // A key given twice would silently keep the last; nesting is bounded.
  EXPECT_EQ(load_error("{\"problems\": [], \"problems\": []}"), ": problems: key given twice");
  EXPECT_NE(load_error(std::string(100000, '[') + std::string(100000, ']')).find("nested deeper than 64 levels"),
            std::string::npos);
  // A folder where a file is expected.
  const std::string dir = std::filesystem::temp_directory_path().string();
  try {
    load_shapes(dir);
    ADD_FAILURE() << "a folder was read as a corpus";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), dir);
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

std::string bitwise_error(const nlohmann::json& doc) {
  try {
    bitwise_from_json(doc, "bw.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(Bitwise, HostileCorpusNamesFileEntryAndField) {
  const auto doc = read_json(std::string(KGATE_SOURCE_DIR) + "/corpus/bitwise.json");
  EXPECT_EQ(bitwise_error(doc), "<accepted>");
  auto bad = doc;
  bad["entries"][2]["fill"]["seed"] = -1;
  EXPECT_EQ(bitwise_error(bad), "bw.json: entries[2].fill.seed: missing or not an unsigned integer");
  bad = doc;
  bad["entries"][2]["fill"]["kind"] = 3;
  EXPECT_EQ(bitwise_error(bad), "bw.json: entries[2].fill.kind: missing or not a string");
  bad = doc;
  bad["entries"][0]["problem"]["stride"] = {1, 1, "2"};
  EXPECT_EQ(bitwise_error(bad), "bw.json: entries[0].problem.stride[2]: expected an integer, got \"2\"");
  bad = doc;
  bad["entries"][1].erase("digests");
  EXPECT_EQ(bitwise_error(bad), "bw.json: entries[1].digests: missing");
  bad = doc;
  bad["entries"][1]["digests"] = {{"y", 12}};
  EXPECT_EQ(bitwise_error(bad).substr(0, 34), "bw.json: entries[1].digests.y: exp");
  bad = doc;
  bad["entries"] = {1};
  EXPECT_EQ(bitwise_error(bad), "bw.json: entries[0]: expected a JSON object");
}

}  // namespace
}  // namespace kgate::corpus
