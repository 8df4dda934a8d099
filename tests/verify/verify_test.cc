// Tests for kiln/verify.h: the --accept grammar and the precision defaults, Spearman's rho,
// the .npz reader (np.savez archives; compressed and truncated ones refused), synthesized
// input sets (ids inside the model's tables, masks with real padding), input-set folders and
// their errors, VerifyPlan's figures on a fixture, and the gated compile: a gate not met
// writes nothing and leaves an earlier plan as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/calibration.h"
#include "kiln/onnx/importer.h"
#include "kiln/support/npy.h"
#include "kiln/verify.h"
#include "verify/verify_internal.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/verify/data/";
const std::string kModel =
    std::string(KILN_SOURCE_DIR) + "/models/fixtures/bert_tiny_opset17_classifier.onnx";

std::string TmpDir(const std::string& name) {
  const std::string d = std::string(KILN_TEST_TMPDIR) + "/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(AccuracyGates, Parse) {
  auto g = ParseAccuracyGates("cosine>=0.999, max_abs<=0.05,logits:rank_agreement>=0.99");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->size(), 3u);
  EXPECT_EQ((*g)[0].ToString(), "cosine>=0.999");
  EXPECT_EQ((*g)[1].metric, "max_abs");
  EXPECT_FALSE((*g)[1].at_least);
  EXPECT_EQ((*g)[1].bound, 0.05);
  EXPECT_EQ((*g)[2].output, "logits");
  EXPECT_EQ((*g)[2].ToString(), "logits:rank_agreement>=0.99");
  ASSERT_TRUE(ParseAccuracyGates("none").ok());
  EXPECT_TRUE(ParseAccuracyGates("none")->empty());
  for (const char* bad : {"", "cosine", "cosine>0.9", "angle>=0.9", "cosine>=x", "cosine>=inf"}) {
    auto e = ParseAccuracyGates(bad);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(ParseAccuracyGates("angle>=0.9").status().message()),
              HasSubstr("unknown metric 'angle'"));
}

TEST(AccuracyGates, DefaultsPerPrecision) {
  EXPECT_TRUE(DefaultAccuracyGates("fp32").empty());
  ASSERT_EQ(DefaultAccuracyGates("bf16").size(), 1u);
  EXPECT_EQ(DefaultAccuracyGates("bf16")[0].ToString(), "cosine>=0.9999");
  EXPECT_EQ(DefaultAccuracyGates("fp16")[0].ToString(), "cosine>=0.9999");
  EXPECT_EQ(DefaultAccuracyGates("int8")[0].ToString(), "cosine>=0.99");
}

TEST(AccuracyGates, Spearman) {
  using verify_internal::Spearman;
  EXPECT_DOUBLE_EQ(*Spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(*Spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // One swapped neighbour pair of 5: rho = 1 - 6·2 / (5·24) = 0.9.
  EXPECT_NEAR(*Spearman({1, 2, 3, 4, 5}, {1, 3, 2, 4, 5}), 0.9, 1e-12);
  // Ties get their mean rank: a = ranks (0.5, 0.5, 2), b the same.
  EXPECT_DOUBLE_EQ(*Spearman({1, 1, 2}, {5, 5, 9}), 1.0);
  EXPECT_FALSE(Spearman({1, 2}, {1, 2}).has_value());
  EXPECT_FALSE(Spearman({1, 1, 1}, {1, 2, 3}).has_value());
  // A NaN score has no rank: NaN, which meets no gate.
  EXPECT_TRUE(std::isnan(*Spearman({1, NAN, 3}, {1, 2, 3})));
}

TEST(Npz, ReadsSavezArchives) {
  auto arrays = ReadNpz(kData + "two_inputs.npz");
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->size(), 2u);
  EXPECT_EQ((*arrays)[0].first, "input_ids");
  EXPECT_EQ((*arrays)[0].second.dims(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ((*arrays)[0].second.data<int64_t>()[1], 2023);
  EXPECT_EQ((*arrays)[1].first, "attention_mask");
  EXPECT_EQ((*arrays)[1].second.data<int64_t>()[7], 0);
  auto compressed = ReadNpz(kData + "compressed.npz");
  EXPECT_EQ(compressed.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(compressed.status().message()), HasSubstr("savez_compressed"));
  auto truncated = ReadNpz(kData + "truncated.npz");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(truncated.status().message()), HasSubstr("truncated.npz"));
}

TEST(SyntheticInputs, IdsInTablesMasksWithPadding) {
  auto model = ImportOnnxFile(kModel);
  ASSERT_TRUE(model.ok()) << model.status();
  auto ranges = std::make_optional(compiler::AnalyzeInputs(**model));
  // The fixture's tables: 1000 words, 2 token types (the mask indexes nothing).
  EXPECT_EQ(ranges->table_rows.at("input_ids"), 1000);
  EXPECT_EQ(ranges->table_rows.at("token_type_ids"), 2);
  EXPECT_FALSE(ranges->table_rows.count("attention_mask"));
  const std::vector<PlanTensorSig> sigs = {{"input_ids", DType::kI64, {}},
                                           {"attention_mask", DType::kI64, {}},
                                           {"token_type_ids", DType::kI64, {}}};
  auto set = compiler::SyntheticInputs(sigs, {{16, 32}, {16, 32}, {16, 32}}, *ranges, 7);
  ASSERT_TRUE(set.ok()) << set.status();
  const Tensor& ids = set->at("input_ids");
  const Tensor& mask = set->at("attention_mask");
  const Tensor& types = set->at("token_type_ids");
  int64_t padded_rows = 0;
  for (int64_t r = 0; r < 16; ++r) {
    int64_t len = 0;
    while (len < 32 && mask.data<int64_t>()[r * 32 + len] == 1) ++len;
    for (int64_t j = len; j < 32; ++j) ASSERT_EQ(mask.data<int64_t>()[r * 32 + j], 0) << r;
    EXPECT_GE(len, 1);
    if (r == 0) EXPECT_EQ(len, 32) << "the first row is full";
    padded_rows += len < 32;
  }
  EXPECT_GT(padded_rows, 0) << "padding is real";
  for (int64_t i = 0; i < ids.NumElements(); ++i) {
    ASSERT_GE(ids.data<int64_t>()[i], 0);
    ASSERT_LT(ids.data<int64_t>()[i], 1000);
    ASSERT_LT(types.data<int64_t>()[i], 2);
  }
}

CompileOptions Profile() {
  CompileOptions o;
  o.profile = {{"batch", {1, 8}}, {"sequence", {16, 32}}};
  return o;
}

TEST(InputSets, FolderOfArchivesAndNpyFolders) {
  auto plan = Compile(kModel, Profile());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string dir = TmpDir("sets");
  // A set as a sub-folder of .npy files, and one as an .npz (token_type_ids added).
  std::filesystem::create_directories(dir + "/a");
  Tensor ids = Tensor::FromI64({2, 4}, {101, 5, 6, 102, 101, 7, 102, 0});
  Tensor mask = Tensor::FromI64({2, 4}, {1, 1, 1, 1, 1, 1, 1, 0});
  Tensor types = Tensor::FromI64({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
  ASSERT_TRUE(WriteNpy(dir + "/a/input_ids.npy", ids).ok());
  ASSERT_TRUE(WriteNpy(dir + "/a/attention_mask.npy", mask).ok());
  ASSERT_TRUE(WriteNpy(dir + "/a/token_type_ids.npy", types).ok());
  auto sets = ReadInputSets(*plan, dir);
  ASSERT_TRUE(sets.ok()) << sets.status();
  ASSERT_EQ(sets->size(), 1u);
  EXPECT_EQ(sets->at(0).at("input_ids").data<int64_t>()[4], 101);
  // The .npz lacks token_type_ids: the error names the file and the input.
  std::filesystem::copy_file(kData + "two_inputs.npz", dir + "/b.npz");
  auto missing = ReadInputSets(*plan, dir);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("b.npz: input 'token_type_ids' is missing"));
  std::filesystem::remove(dir + "/b.npz");
  // A wrong dtype, an extra array.
  ASSERT_TRUE(
      WriteNpy(dir + "/a/token_type_ids.npy", Tensor::FromF32({2, 4}, std::vector<float>(8))).ok());
  EXPECT_THAT(std::string(ReadInputSets(*plan, dir).status().message()),
              HasSubstr("input 'token_type_ids' is f32, the model takes i64"));
  // A wrong rank; a sequence length the set's other inputs disagree with.
  ASSERT_TRUE(
      WriteNpy(dir + "/a/token_type_ids.npy", Tensor::FromI64({8}, std::vector<int64_t>(8))).ok());
  EXPECT_THAT(std::string(ReadInputSets(*plan, dir).status().message()),
              HasSubstr("input 'token_type_ids' is 8, the model takes rank 2"));
  ASSERT_TRUE(
      WriteNpy(dir + "/a/token_type_ids.npy", Tensor::FromI64({2, 3}, std::vector<int64_t>(6)))
          .ok());
  const std::string clash(ReadInputSets(*plan, dir).status().message());
  EXPECT_THAT(clash, HasSubstr("/a: input 'token_type_ids' is 2x3, its '"));
  EXPECT_THAT(clash, HasSubstr("' is 3 where input 'attention_mask' has 4"));
  ASSERT_TRUE(WriteNpy(dir + "/a/token_type_ids.npy", types).ok());
  ASSERT_TRUE(WriteNpy(dir + "/a/labels.npy", types).ok());
  EXPECT_THAT(std::string(ReadInputSets(*plan, dir).status().message()),
              HasSubstr("array 'labels' is not an input of the model"));
  // No set at all.
  const std::string empty = TmpDir("empty_sets");
  EXPECT_THAT(std::string(ReadInputSets(*plan, empty).status().message()),
              HasSubstr("holds no .npz file and no sub-folder"));
  EXPECT_EQ(ReadInputSets(*plan, empty + "/nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(VerifyPlan, FiguresAndGates) {
  CompileOptions o = Profile();
  o.precision = "int8";
  auto plan = Compile(kModel, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto shared = std::make_shared<const Plan>(*std::move(plan));
  EXPECT_EQ(PlanPrecision(*shared), "int8");
  VerifyOptions v;
  v.gates = *ParseAccuracyGates("cosine>=0.99,logits:rank_agreement>=0.9,max_abs<=1e-9");
  auto report = VerifyPlan(kModel, shared, v);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->outputs.size(), 1u);
  const OutputAccuracy& logits = report->outputs[0];
  EXPECT_EQ(logits.name, "logits");
  EXPECT_TRUE(logits.scores);
  EXPECT_EQ(report->samples, 4);
  EXPECT_GT(logits.max_abs, 0) << "int8 differs from fp32";
  EXPECT_LT(logits.max_rel, 0.1);
  EXPECT_GE(logits.cosine_worst, 0.99);
  ASSERT_TRUE(logits.rank_agreement.has_value());
  EXPECT_GE(*logits.rank_agreement, 0.9);
  // Only the impossible max_abs gate fails, with its figure.
  ASSERT_EQ(report->failures.size(), 1u);
  EXPECT_THAT(report->failures[0], HasSubstr("logits: max_abs"));
  EXPECT_THAT(report->failures[0], HasSubstr("wants <= 1e-09"));
  EXPECT_THAT(report->Json(), HasSubstr("\"ok\": false"));
  // A gate naming an output the model lacks is an error, not a pass.
  v.gates = *ParseAccuracyGates("scores:cosine>=0.5");
  EXPECT_EQ(VerifyPlan(kModel, shared, v).status().code(), absl::StatusCode::kInvalidArgument);
}

// Input sets given in memory (kiln verify --input) are checked as a folder's are; an empty
// sequence verifies (no rows) instead of dividing by zero; a gate no output can measure
// is not met.
TEST(VerifyPlan, GivenSetsEmptySequencesAndUnmeasurableGates) {
  const std::string model =
      std::string(KILN_SOURCE_DIR) + "/models/fixtures/bert_tiny_opset17_none.onnx";
  CompileOptions o = Profile();
  o.precision = "int8";
  auto plan = Compile(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto shared = std::make_shared<const Plan>(*std::move(plan));
  VerifyOptions v;
  v.gates = *ParseAccuracyGates("cosine>=0.99");
  const Tensor ids = Tensor::FromI64({1, 3}, {101, 5, 102});
  const Tensor ones = Tensor::FromI64({1, 3}, {1, 1, 1});
  v.input_sets = {{{"input_ids", ids}, {"attention_mask", ones}}};
  auto missing = VerifyPlan(model, shared, v);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("--input: input 'token_type_ids' is missing"));

  const Tensor empty = Tensor::FromI64({1, 0}, {});
  v.input_sets = {{{"input_ids", empty}, {"attention_mask", empty}, {"token_type_ids", empty}}};
  auto none = VerifyPlan(model, shared, v);
  ASSERT_TRUE(none.ok()) << none.status();
  ASSERT_EQ(none->outputs.size(), 1u);
  EXPECT_EQ(none->outputs[0].rows, 0);
  EXPECT_TRUE(none->ok());

  v.input_sets = {{{"input_ids", ids},
                   {"attention_mask", ones},
                   {"token_type_ids", Tensor::FromI64({1, 3}, {0, 0, 0})}}};
  v.gates = *ParseAccuracyGates("rank_agreement>=0.9");
  auto unmeasured = VerifyPlan(model, shared, v);
  ASSERT_TRUE(unmeasured.ok()) << unmeasured.status();
  ASSERT_EQ(unmeasured->failures.size(), 1u);
  EXPECT_THAT(unmeasured->failures[0], HasSubstr("no output defines rank_agreement"));
}

// A generation plan's prefill logits are each sequence's last token ([B, 1, V]); the fp32
// plan it is compared with gives [B, S, V]: the gate compares the fp32 rows at the last
// nonzero mask position (here 3 and 8 of a 2 x 8 batch), so an fp32 generation plan
// matches within float noise (1e-4: the same arithmetic but GEMMs over 2 rows instead of
// 16) — a row off by one position differs by far more.
TEST(VerifyPlan, GenerationPlansCompareTheLastTokenRows) {
  const std::string model =
      std::string(KILN_SOURCE_DIR) + "/models/fixtures/kv/llama_kv_dynamo_sdpa.onnx";
  CompileOptions o;
  o.profile = {{"batch", {2}}, {"sequence", {8}}};
  o.decode_context = {16};
  auto plan = Compile(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto shared = std::make_shared<const Plan>(*std::move(plan));
  VerifyOptions v;
  v.gates = *ParseAccuracyGates("max_abs<=1e-4");
  std::vector<int64_t> ids(16), mask(16), pos(16);
  for (int64_t i = 0; i < 16; ++i) {
    ids[i] = 3 + 7 * i % 200;
    mask[i] = i < 3 || i >= 8 ? 1 : 0;  // 3 tokens, then 8
    pos[i] = i % 8;
  }
  std::map<std::string, Tensor> set = {{"input_ids", Tensor::FromI64({2, 8}, ids)},
                                       {"attention_mask", Tensor::FromI64({2, 8}, mask)},
                                       {"position_ids", Tensor::FromI64({2, 8}, pos)}};
  for (int l = 0; l < 2; ++l)
    for (const char* kv : {"key", "value"})
      set[absl::StrCat("past_key_values.", l, ".", kv)] = Tensor(DType::kF32, {2, 4, 0, 16});
  v.input_sets = {set};
  auto report = VerifyPlan(model, shared, v);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->Text();
  ASSERT_EQ(report->outputs[0].name, "logits");
  EXPECT_EQ(report->outputs[0].rows, 2);
  // The second sequence's last token moved one position earlier: the plan's row is now a
  // different one from the fp32 row compared.
  mask[15] = 0;
  v.input_sets[0]["attention_mask"] = Tensor::FromI64({2, 8}, mask);
  auto shifted = VerifyPlan(model, shared, v);
  ASSERT_TRUE(shifted.ok()) << shifted.status();
  EXPECT_TRUE(shifted->ok()) << "both sides follow the mask: " << shifted->Text();
}

TEST(CompileToFileGated, AGateNotMetWritesNothing) {
  const std::string dir = TmpDir("gated");
  const std::string path = dir + "/model.kiln";
  CompileOptions o = Profile();
  ASSERT_TRUE(CompileToFile(kModel, path, o).ok());  // an earlier (fp32) plan
  const std::string before = ReadAll(path);
  o.precision = "int8";
  VerifyOptions v;
  v.gates = *ParseAccuracyGates("cosine>=1.5");
  AccuracyReport report;
  auto info = CompileToFileGated(kModel, path, o, v, &report);
  ASSERT_EQ(info.status().code(), absl::StatusCode::kAborted) << info.status();
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("fails its accuracy gate"));
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("logits: cosine"));
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(ReadAll(path), before) << "the earlier plan is left as it was";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "no temporary file left behind";
  // The default int8 gate holds: the plan is written.
  v.gates = DefaultAccuracyGates("int8");
  info = CompileToFileGated(kModel, path, o, v, &report);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(report.ok());
  auto loaded = LoadPlanFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(PlanPrecision(*loaded), "int8");
  EXPECT_FALSE(loaded->precision_notes.empty());
}

TEST(CompileGated, AutoInMemoryAndItsOptions) {
  CompileOptions o = Profile();
  o.precision = "auto";
  VerifyOptions v;
  v.default_gates = true;
  std::vector<std::string> progress;
  o.progress = [&](std::string_view line) { progress.emplace_back(line); };
  auto plan = CompileGated(kModel, o, v);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(PlanPrecision(*plan), "int8");
  EXPECT_NE(std::find(progress.begin(), progress.end(), "precision auto: int8 (gates met)"),
            progress.end());
  // Compile itself refuses auto, and GEMM groups outside int8/bf16 cpu plans or unknown.
  EXPECT_THAT(std::string(Compile(kModel, o).status().message()), HasSubstr("accuracy gate"));
  CompileOptions g = Profile();
  g.gemm_group_precision = {{"attention", "bf16"}};
  EXPECT_EQ(Compile(kModel, g).status().code(), absl::StatusCode::kInvalidArgument);
  g.precision = "int8";
  g.gemm_group_precision = {{"mlp", "bf16"}};
  EXPECT_THAT(std::string(Compile(kModel, g).status().message()), HasSubstr("'mlp'"));
  g.gemm_group_precision = {{"ffn", "int4"}};
  EXPECT_THAT(std::string(Compile(kModel, g).status().message()), HasSubstr("'int4'"));
  g.gemm_group_precision = {{"ffn", "fp32"}};
  ASSERT_TRUE(Compile(kModel, g).ok());
  EXPECT_THAT(CompileOptionsString(g), HasSubstr("gemm_groups={ffn=fp32}"));
}

}  // namespace
}  // namespace kiln
