// kiln::GenerationSession and the generation plans (--decode-context) on the KV-cache
// fixtures (models/fixtures/kv/: 2-layer Llama and Qwen2, 4 cached K/V, vocab 256; and
// the onnxruntime-genai files of models/fixtures/genai/, the same sizes, whose cache is
// GroupQueryAttention's and which have no position_ids input): the
// plan holds prefill buckets (an empty past) and decode buckets (one token, the cache as
// past and present, kiln.CacheWrite steps); a greedy prefill + decode matches re-running
// the model's prefill program over the whole growing prefix at every step, through a cache
// growth; sequences of different lengths batched match each alone; every documented bad
// input is its error, a restarted or forked sequence matches a fresh one, and compiling a
// model that is not a KV-cache decoder says why.
// Tolerance 1e-4 absolute on the logits (|logits| ~ 1): the decode step attends over the
// cache in a different order and blocking than the prefill's causal attention over the
// prefix, fp32 throughout, which moves the logits by a few 1e-6; a wrong slot, position
// or mask moves them by far more (checked below: the logits one token earlier differ by
// more than 100x the tolerance).
// The onnxruntime oracle (the past-KV export looped with present fed back) is
// tests/e2e/test_generation.py.
#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/generation.h"
#include "kiln/kiln.h"
#include "kiln/plan/plan.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

const std::string kKv = std::string(KILN_SOURCE_DIR) + "/models/fixtures/kv/";
constexpr float kTol = 1e-4f;

// A KV-cache decoder fixture and the names its export gives the dims. The torch exports
// append with Concat and take position_ids; the onnxruntime-genai files
// (models/fixtures/genai/) append with GroupQueryAttention's TensorScatter, derive the
// positions from the mask and declare the head size as a symbol of its own.
struct KvModel {
  std::string name, path;
  std::string batch, sequence, past, total;
  std::map<std::string, int64_t> symbols;  // what else a compile binds
};

void PrintTo(const KvModel& m, std::ostream* os) { *os << m.name; }

const KvModel kLlamaKv = {"llama_kv_dynamo_sdpa",
                          kKv + "llama_kv_dynamo_sdpa.onnx",
                          "batch",
                          "sequence",
                          "past_sequence",
                          "total_sequence",
                          {}};

std::vector<KvModel> KvModels() {
  const std::string genai = std::string(KILN_SOURCE_DIR) + "/models/fixtures/genai/";
  std::vector<KvModel> out = {kLlamaKv,
                              {"qwen2_kv_torchscript_eager",
                               kKv + "qwen2_kv_torchscript_eager.onnx",
                               "batch",
                               "sequence",
                               "past_sequence",
                               "total_sequence",
                               {}}};
  for (const char* name : {"llama_fp32", "qwen2_int4"})
    out.push_back({absl::StrCat("genai_", name),
                   absl::StrCat(genai, name, "/model.onnx"),
                   "batch_size",
                   "sequence_length",
                   "past_sequence_length",
                   "total_sequence_length",
                   {{"kv_cache_dim", 16}}});
  return out;
}

CompileOptions GenerationOptions(const KvModel& m, std::vector<int64_t> capacities) {
  CompileOptions o;
  o.profile = {{m.batch, {1, 2}}, {m.sequence, {1, 2, 3, 4, 5, 6, 7, 8, 9}}};
  o.symbols = m.symbols;
  o.decode_context = std::move(capacities);
  return o;
}

CompileOptions GenerationOptions(std::vector<int64_t> capacities) {
  return GenerationOptions(kLlamaKv, std::move(capacities));
}

std::shared_ptr<const Executor> CompileAndCreate(const std::string& model,
                                                 const CompileOptions& o) {
  absl::StatusOr<Plan> plan = Compile(model, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Executor>> e =
      Executor::Create(std::make_shared<const Plan>(*std::move(plan)));
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::shared_ptr<const Executor>(*std::move(e)) : nullptr;
}

int64_t Argmax(const Tensor& logits, int64_t b) {
  const int64_t v = logits.dims()[1];
  const float* row = logits.data<float>() + b * v;
  return std::max_element(row, row + v) - row;
}

float MaxDiff(const Tensor& a, int64_t ra, const Tensor& b, int64_t rb) {
  const int64_t v = a.dims()[1];
  float worst = 0;
  for (int64_t j = 0; j < v; ++j)
    worst = std::max(worst, std::fabs(a.data<float>()[ra * v + j] - b.data<float>()[rb * v + j]));
  return worst;
}

// The logits after `prefix`, by a fresh session's prefill of all of it.
Tensor RerunPrefix(const std::shared_ptr<const Executor>& e, std::vector<int64_t> prefix) {
  auto s = GenerationSession::Create(e);
  EXPECT_TRUE(s.ok()) << s.status();
  std::vector<std::vector<int64_t>> one = {std::move(prefix)};
  absl::StatusOr<Tensor> t = (*s)->Prefill(one);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

class Generation : public ::testing::TestWithParam<KvModel> {};

TEST_P(Generation, PlanHasPrefillAndDecodePrograms) {
  absl::StatusOr<Plan> plan = Compile(GetParam().path, GenerationOptions(GetParam(), {6, 10}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  int prefill = 0, decode = 0;
  for (const PlanBucket& b : plan->buckets) {
    if (b.program == PlanProgram::kModel) {
      ++prefill;
      EXPECT_EQ(b.bindings.at(GetParam().past), 0);
      EXPECT_EQ(b.bindings.at(GetParam().total), b.bindings.at(GetParam().sequence));
      EXPECT_TRUE(b.in_place.empty());
      continue;
    }
    ++decode;
    EXPECT_EQ(b.bindings.at(GetParam().sequence), 1);
    const int64_t c = b.bindings.at(GetParam().past);
    EXPECT_TRUE(c == 6 || c == 10) << c;
    EXPECT_EQ(b.bindings.at(GetParam().total), c);
    ASSERT_EQ(b.in_place.size(), 4u);  // 2 layers x (key, value)
    int writes = 0;
    for (const PlanStep& s : b.steps) writes += s.kernel == "cache_write";
    EXPECT_EQ(writes, 4);
    EXPECT_EQ(b.bindings.at("kv_blocks"), c / 2);  // blocks of 2: the gcd of 6 and 10
    const PlanIo io = IoOf(*plan, PlanProgram::kDecode);
    for (const PlanInPlace& ip : b.in_place) {
      EXPECT_THAT(io.inputs[ip.input].name, HasSubstr("past_key_values."));
      EXPECT_THAT(io.outputs[ip.output].name, HasSubstr("present."));
      // The pool: batch 2 x 10 slots / 2 = 10 blocks, plus the scratch block.
      ASSERT_EQ(io.inputs[ip.input].dims.size(), 4u);
      EXPECT_EQ(io.inputs[ip.input].dims[0], Dim::Known(11));
      EXPECT_EQ(io.inputs[ip.input].dims[2], Dim::Known(2));
      EXPECT_EQ(io.outputs[ip.output].dims, io.inputs[ip.input].dims);
    }
    EXPECT_EQ(io.inputs.back().name, "block_table");
    EXPECT_EQ(io.inputs.back().dims[1], Dim::Symbol("kv_blocks"));
  }
  EXPECT_EQ(prefill, 18);  // batch 1, 2 x sequence 1..9
  EXPECT_EQ(decode, 4);    // batch 1, 2 x capacity 6, 10
  // The prefill scores each sequence's last token only: logits [batch, 1, vocab].
  for (const PlanTensorSig& out : plan->outputs)
    if (out.name == "logits")
      EXPECT_EQ(out.dims,
                (std::vector<Dim>{Dim::Symbol(GetParam().batch), Dim::Known(1), Dim::Known(256)}));
  // The programs and the in-place pairs survive the file.
  absl::StatusOr<std::string> bytes = SerializePlan(*plan);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Plan> back = ParsePlan(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *plan);
}

TEST_P(Generation, GreedyDecodeMatchesRerunningThePrefix) {
  std::shared_ptr<const Executor> e =
      CompileAndCreate(GetParam().path, GenerationOptions(GetParam(), {6, 10}));
  ASSERT_NE(e, nullptr);
  auto s = GenerationSession::Create(e);
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationSession& gen = **s;
  std::vector<int64_t> prefix = {5, 17, 42};
  std::vector<std::vector<int64_t>> prompts = {prefix};
  absl::StatusOr<Tensor> logits = gen.Prefill(prompts);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(gen.capacity(), 6);
  const int64_t small_cache = gen.cache_bytes();
  int64_t kv_heads = 0;
  for (const PlanTensorSig& sig : e->plan().inputs)
    if (sig.name == "past_key_values.0.key") kv_heads = sig.dims[1].value();
  // 4 pools, 2 blocks of [kv_heads, 2, 16] f32 each: the 3 prompt tokens' slots.
  EXPECT_EQ(small_cache, 4 * 2 * kv_heads * 2 * 16 * 4);
  EXPECT_EQ(gen.blocks_in_use(), 2);
  for (int step = 0; step < 6; ++step) {  // lengths 4 .. 9: capacity 6 -> 10 on the way
    const int64_t next = Argmax(*logits, 0);
    prefix.push_back(next);
    const std::vector<int64_t> ids = {next};
    logits = gen.Decode(ids);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_EQ(*gen.length(0), static_cast<int64_t>(prefix.size()));
    const Tensor want = RerunPrefix(e, prefix);
    EXPECT_LE(MaxDiff(*logits, 0, want, 0), kTol) << "step " << step;
    // The comparison is sensitive: the logits one token earlier are far off.
    const std::vector<int64_t> shorter(prefix.begin(), prefix.end() - 1);
    EXPECT_GT(MaxDiff(*logits, 0, RerunPrefix(e, shorter), 0), 100 * kTol) << "step " << step;
  }
  EXPECT_EQ(gen.capacity(), 10);
  EXPECT_EQ(gen.blocks_in_use(), 5);  // 9 tokens in blocks of 2
  EXPECT_EQ(gen.cache_bytes(), small_cache / 2 * 5);
  EXPECT_EQ(gen.max_context(), 10);
}

// --prefill-logits last (the default) against all: the prefill's LM head, and the row-wise
// nodes before it, run on each sequence's last token, and the logits are those of the full
// plan at that position. Tolerance 1e-5: the same f32 arithmetic per row, but the GEMMs see
// 2 rows instead of 2 x 9 and may block K differently (a few ulp at |logits| ~ 1).
TEST_P(Generation, LastTokenLogitsAreTheFullPlansAtTheLastPosition) {
  CompileOptions last = GenerationOptions(GetParam(), {10}), all = last;
  all.prefill_logits = "all";
  absl::StatusOr<Plan> plan = Compile(GetParam().path, last);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // In the batch 2 x sequence 9 prefill bucket the last layer's o_proj, gate/up and down
  // GEMMs and the LM head (the last GEMM, n = vocab) take 2 rows, every other GEMM 18; the
  // last token's row is taken from two values (the last attention's output and the
  // residual stream before it) by `pool` steps.
  for (const PlanBucket& b : plan->buckets) {
    if (b.program != PlanProgram::kModel || b.bindings.at(GetParam().batch) != 2 ||
        b.bindings.at(GetParam().sequence) != 9)
      continue;
    int pools = 0;
    std::vector<std::pair<int64_t, int64_t>> gemms;  // (m, n)
    for (const PlanStep& step : b.steps) {
      pools += step.kernel == "pool";
      std::map<std::string, int64_t> ints;
      for (const PlanParam& p : step.params)
        if (const int64_t* v = std::get_if<int64_t>(&p.value)) ints[p.name] = *v;
      if (ints.count("m") && ints.count("n")) gemms.push_back({ints["m"], ints["n"]});
    }
    EXPECT_EQ(pools, 2);
    ASSERT_FALSE(gemms.empty());
    EXPECT_EQ(gemms.back(), (std::pair<int64_t, int64_t>{2, 256}));
    EXPECT_EQ(std::count_if(gemms.begin(), gemms.end(), [](auto g) { return g.first == 2; }), 4);
    EXPECT_EQ(std::count_if(gemms.begin(), gemms.end(), [](auto g) { return g.first == 18; }),
              static_cast<int64_t>(gemms.size()) - 4);
  }
  std::shared_ptr<const Executor> e_last = CompileAndCreate(GetParam().path, last);
  std::shared_ptr<const Executor> e_all = CompileAndCreate(GetParam().path, all);
  ASSERT_NE(e_last, nullptr);
  ASSERT_NE(e_all, nullptr);
  for (const PlanTensorSig& out : e_all->plan().outputs)
    if (out.name == "logits") EXPECT_EQ(out.dims[1], Dim::Symbol(GetParam().sequence));
  const std::vector<std::vector<int64_t>> prompts = {{9, 8, 7}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  auto s_last = GenerationSession::Create(e_last);
  auto s_all = GenerationSession::Create(e_all);
  ASSERT_TRUE(s_last.ok() && s_all.ok());
  absl::StatusOr<Tensor> a = (*s_last)->Prefill(prompts), b = (*s_all)->Prefill(prompts);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (int64_t seq = 0; seq < 2; ++seq) {
    EXPECT_LE(MaxDiff(*a, seq, *b, seq), 1e-5f) << "sequence " << seq;
    EXPECT_GT(MaxDiff(*a, seq, *b, 1 - seq), 100 * kTol) << "the comparison is sensitive";
  }
  const std::vector<int64_t> next = {Argmax(*a, 0), Argmax(*a, 1)};
  a = (*s_last)->Decode(next);
  b = (*s_all)->Decode(next);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t seq = 0; seq < 2; ++seq) EXPECT_LE(MaxDiff(*a, seq, *b, seq), 1e-5f);
}

TEST_P(Generation, BatchedSequencesOfDifferentLengthsMatchAlone) {
  std::shared_ptr<const Executor> e =
      CompileAndCreate(GetParam().path, GenerationOptions(GetParam(), {10}));
  ASSERT_NE(e, nullptr);
  const std::vector<std::vector<int64_t>> prompts = {{9, 8, 7}, {1, 2, 3, 4, 5}};
  auto batched = GenerationSession::Create(e);
  ASSERT_TRUE(batched.ok()) << batched.status();
  std::vector<std::unique_ptr<GenerationSession>> alone;
  for (int b = 0; b < 2; ++b) alone.push_back(*GenerationSession::Create(e));
  absl::StatusOr<Tensor> both = (*batched)->Prefill(prompts);
  ASSERT_TRUE(both.ok()) << both.status();
  std::vector<Tensor> each;
  for (int b = 0; b < 2; ++b) {
    std::vector<std::vector<int64_t>> one = {prompts[b]};
    each.push_back(*alone[b]->Prefill(one));
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<int64_t> next(2);
    for (int b = 0; b < 2; ++b) {
      EXPECT_LE(MaxDiff(*both, b, each[b], 0), kTol) << "sequence " << b << " step " << step;
      next[b] = Argmax(*both, b);
      EXPECT_EQ(next[b], Argmax(each[b], 0)) << "sequence " << b << " step " << step;
    }
    both = (*batched)->Decode(next);
    ASSERT_TRUE(both.ok()) << both.status();
    for (int b = 0; b < 2; ++b) {
      const std::vector<int64_t> one = {next[b]};
      each[b] = *alone[b]->Decode(one);
    }
  }
  EXPECT_EQ(*(*batched)->length(0), 7);
  EXPECT_EQ(*(*batched)->length(1), 9);
}

TEST_P(Generation, RestartAndForkMatchFreshSequences) {
  std::shared_ptr<const Executor> e =
      CompileAndCreate(GetParam().path, GenerationOptions(GetParam(), {10}));
  ASSERT_NE(e, nullptr);
  auto s = GenerationSession::Create(e);
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationSession& gen = **s;
  const std::vector<std::vector<int64_t>> prompts = {{9, 8, 7}, {1, 2, 3, 4, 5}};
  ASSERT_TRUE(gen.Prefill(prompts).ok());
  const std::vector<int64_t> step = {11, 12};
  ASSERT_TRUE(gen.Decode(step).ok());
  // Sequence 0 starts over with another prompt; sequence 1 keeps its 6 tokens.
  const std::vector<int64_t> other = {40, 41, 42, 43};
  absl::StatusOr<Tensor> restarted = gen.Restart(0, other);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(*gen.length(0), 4);
  EXPECT_EQ(*gen.length(1), 6);
  std::vector<int64_t> fresh = other;
  EXPECT_LE(MaxDiff(*restarted, 0, RerunPrefix(e, fresh), 0), kTol);
  const std::vector<int64_t> next = {13, 14};
  absl::StatusOr<Tensor> both = gen.Decode(next);
  ASSERT_TRUE(both.ok()) << both.status();
  fresh.push_back(13);
  EXPECT_LE(MaxDiff(*both, 0, RerunPrefix(e, fresh), 0), kTol);
  EXPECT_LE(MaxDiff(*both, 1, RerunPrefix(e, {1, 2, 3, 4, 5, 12, 14}), 0), kTol);
  // Sequence 0 becomes a copy of sequence 1, sharing its blocks: 5 tokens of 0 (3 blocks of
  // 2) are released, nothing is copied. Then each writes a different token into the shared,
  // half-filled last block: the first writer gets a copy (copy on write), and each sequence
  // sees only its own token.
  EXPECT_EQ(gen.blocks_in_use(), 3 + 4);  // 5 and 7 tokens
  ASSERT_TRUE(gen.Fork(1, 0).ok());
  EXPECT_EQ(*gen.length(0), 7);
  EXPECT_EQ(gen.blocks_in_use(), 4);
  const std::vector<int64_t> diverge = {15, 16};
  both = gen.Decode(diverge);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(gen.blocks_in_use(), 5);  // the last block, copied once
  EXPECT_LE(MaxDiff(*both, 0, RerunPrefix(e, {1, 2, 3, 4, 5, 12, 14, 15}), 0), kTol);
  EXPECT_LE(MaxDiff(*both, 1, RerunPrefix(e, {1, 2, 3, 4, 5, 12, 14, 16}), 0), kTol);
  // A fork at a block boundary shares every block; the next tokens open new ones.
  ASSERT_TRUE(gen.Fork(0, 1).ok());
  EXPECT_EQ(gen.blocks_in_use(), 4);
  both = gen.Decode(diverge);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(gen.blocks_in_use(), 6);
  EXPECT_LE(MaxDiff(*both, 0, RerunPrefix(e, {1, 2, 3, 4, 5, 12, 14, 15, 15}), 0), kTol);
  EXPECT_LE(MaxDiff(*both, 1, RerunPrefix(e, {1, 2, 3, 4, 5, 12, 14, 15, 16}), 0), kTol);
  EXPECT_EQ(gen.Fork(0, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gen.Restart(5, other).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(Generation, BadInputsAreErrors) {
  std::shared_ptr<const Executor> e =
      CompileAndCreate(GetParam().path, GenerationOptions(GetParam(), {6}));
  ASSERT_NE(e, nullptr);
  auto s = GenerationSession::Create(e);
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationSession& gen = **s;
  const std::vector<int64_t> one = {3};
  absl::Status st = gen.Decode(one).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("before Prefill"));
  std::vector<std::vector<int64_t>> bad = {{1, 256}};
  st = gen.Prefill(bad).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("token id 256 (at 1) is outside the vocabulary [0, 256)"));
  bad = {{}};
  EXPECT_THAT(gen.Prefill(bad).status().message(), HasSubstr("prompt 0 is empty"));
  bad = {{1, 2, 3, 4, 5, 6}};
  st = gen.Prefill(bad).status();
  EXPECT_THAT(st.message(), HasSubstr("a prompt of 6 tokens does not fit the plan's maximum "
                                      "context of 6 tokens"));
  bad = {{1}, {2}, {3}};  // batch 3: the profile has 1 and 2
  EXPECT_FALSE(gen.Prefill(bad).ok());
  std::vector<std::vector<int64_t>> good = {{1, 2, 3, 4}};
  ASSERT_TRUE(gen.Prefill(good).ok());
  const std::vector<int64_t> two = {1, 2};
  EXPECT_THAT(gen.Decode(two).status().message(), HasSubstr("2 token ids for 1 sequences"));
  const std::vector<int64_t> neg = {-1};
  EXPECT_THAT(gen.Decode(neg).status().message(), HasSubstr("outside the vocabulary"));
  ASSERT_TRUE(gen.Decode(one).ok());  // length 5
  ASSERT_TRUE(gen.Decode(one).ok());  // length 6 = the capacity
  st = gen.Decode(one).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("sequence 0 holds 6 tokens, the plan's maximum context"));
  EXPECT_EQ(*gen.length(0), 6);  // the failed step changed nothing
  EXPECT_EQ(gen.length(1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gen.length(-1).status().code(), absl::StatusCode::kInvalidArgument);
  auto unstarted = GenerationSession::Create(e);
  EXPECT_EQ((*unstarted)->Restart(0, one).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*unstarted)->Fork(0, 0).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(Generation, APoolOutOfBlocksIsAnErrorThatChangesNothing) {
  CompileOptions o = GenerationOptions(GetParam(), {10});
  o.kv_cache_blocks = 6;  // 5 blocks of 2 slots for sequences, and the scratch block
  std::shared_ptr<const Executor> e = CompileAndCreate(GetParam().path, o);
  ASSERT_NE(e, nullptr);
  auto s = GenerationSession::Create(e);
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationSession& gen = **s;
  EXPECT_EQ(gen.block_size(), 2);
  EXPECT_EQ(gen.cache_blocks(), 5);
  const std::vector<std::vector<int64_t>> too_many = {{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5}};
  absl::Status st = gen.Prefill(too_many).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("2 prompts need 6 cache blocks of 2 slots; the pool has 5"));
  const std::vector<std::vector<int64_t>> prompts = {{9, 8, 7}, {1, 2, 3}};
  ASSERT_TRUE(gen.Prefill(prompts).ok());
  EXPECT_EQ(gen.blocks_in_use(), 4);
  const std::vector<int64_t> next = {4, 5};
  ASSERT_TRUE(gen.Decode(next).ok());  // slot 3: in the second blocks
  st = gen.Decode(next).status();      // slot 4: two new blocks, one free
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("Decode needs 2 more cache blocks of 2 slots; 1 of the "
                                      "pool's 5 are free"));
  EXPECT_EQ(*gen.length(0), 4);
  EXPECT_EQ(*gen.length(1), 4);
  // Freeing a sequence's blocks (a restart to a shorter prompt) lets the others go on.
  ASSERT_TRUE(gen.Restart(1, std::vector<int64_t>{7}).ok());
  EXPECT_EQ(gen.blocks_in_use(), 3);
  ASSERT_TRUE(gen.Decode(next).ok());
  EXPECT_EQ(*gen.length(0), 5);
  EXPECT_EQ(*gen.length(1), 2);
  // The pool must hold one sequence at the largest capacity.
  o.kv_cache_blocks = 5;
  EXPECT_THAT(Compile(GetParam().path, o).status().message(),
              HasSubstr("needs 5 blocks of 2, plus the scratch block"));
  o.kv_cache_blocks = 0;
  o.kv_block_size = 4;
  EXPECT_THAT(Compile(GetParam().path, o).status().message(),
              HasSubstr("--kv-block-size 4 does not divide the decode capacity 10"));
}

// A generation plan below fp32: int8 calibrates on prefill-shaped inputs (an empty past,
// the mask as long as the prompt; before, the past and mask lengths kiln binds itself were
// left at 1, which made the calibration run fail), passes its default gate (cosine >= 0.99
// per output, checked by the compile) and decodes, each step's logits within that cosine
// of the fp32 plan's on the same tokens.
// With --head-precision int8 the LM head is a QuantLinear too (noted so) and the same bound
// holds.
TEST_P(Generation, Int8PlanCalibratesOnPrefillInputsAndDecodes) {
  CompileOptions o = GenerationOptions(GetParam(), {10});
  o.profile[GetParam().sequence] = {4, 8};
  std::shared_ptr<const Executor> f32 = CompileAndCreate(GetParam().path, o);
  ASSERT_NE(f32, nullptr);
  o.precision = "int8";
  int kept_heads = 0;  // without --head-precision: the fp32 output heads (the LM head
                       // unless the file's own is int4, and V projections a present reads)
  for (const char* head : {"", "int8"}) {
    SCOPED_TRACE(absl::StrCat("head precision '", head, "'"));
    o.head_precision = head;
    std::shared_ptr<const Executor> i8 = CompileAndCreate(GetParam().path, o);
    ASSERT_NE(i8, nullptr);
    int kept = 0, lowered = 0;
    for (const PlanPrecisionNote& n : i8->plan().precision_notes) {
      kept += n.precision == "fp32" && n.reason.rfind("output head", 0) == 0;
      lowered += n.precision == "int8" && n.reason.rfind("--head-precision int8", 0) == 0;
    }
    if (*head == '\0') {
      kept_heads = kept;
      EXPECT_EQ(lowered, 0);
    } else {
      EXPECT_EQ(kept, 0);
      EXPECT_EQ(lowered, kept_heads);
      // Not vacuous: every fixture but the int4 one (its LM head is the file's int4) has an
      // fp32 LM head to lower.
      if (GetParam().name != "genai_qwen2_int4") EXPECT_GE(lowered, 1);
    }
    auto a = GenerationSession::Create(f32), b = GenerationSession::Create(i8);
    ASSERT_TRUE(a.ok() && b.ok());
    const std::vector<std::vector<int64_t>> prompts = {{5, 17, 42}};
    absl::StatusOr<Tensor> la = (*a)->Prefill(prompts), lb = (*b)->Prefill(prompts);
    for (int step = 0; step < 4; ++step) {
      ASSERT_TRUE(la.ok() && lb.ok()) << la.status() << lb.status();
      double dot = 0, na = 0, nb = 0;
      for (int64_t j = 0; j < la->NumElements(); ++j) {
        const double x = la->data<float>()[j], y = lb->data<float>()[j];
        dot += x * y, na += x * x, nb += y * y;
      }
      EXPECT_GE(dot / std::sqrt(na * nb), 0.99) << "step " << step;
      const std::vector<int64_t> next = {Argmax(*la, 0)};
      la = (*a)->Decode(next);
      lb = (*b)->Decode(next);
    }
  }
  // --head-precision needs a cpu int8/bf16 plan and a known precision.
  o.head_precision = "int4";
  EXPECT_THAT(Compile(GetParam().path, o).status().message(),
              HasSubstr("--head-precision 'int4': give int8, bf16 or fp32"));
  o.head_precision = "int8";
  o.precision = "fp32";
  EXPECT_THAT(Compile(GetParam().path, o).status().message(),
              HasSubstr("--head-precision applies to cpu int8 and bf16 plans"));
}

INSTANTIATE_TEST_SUITE_P(KvFixtures, Generation, ::testing::ValuesIn(KvModels()),
                         [](const auto& info) { return info.param.name; });

TEST(GenerationPlan, ModelRunsNeverPickDecodeBuckets) {
  std::shared_ptr<const Executor> e =
      CompileAndCreate(kKv + "llama_kv_dynamo_sdpa.onnx", GenerationOptions({6}));
  ASSERT_NE(e, nullptr);
  // Decode-shaped inputs (past = total = 6, one token) through a plain Run: no model bucket
  // has that shape, so it is an error, not a silent decode.
  auto dims_of = [](const std::vector<PlanTensorSig>& inputs) {
    std::vector<std::vector<int64_t>> dims;
    for (const PlanTensorSig& sig : inputs) {
      std::vector<int64_t> d;
      for (const Dim& x : sig.dims)
        d.push_back(x.is_known()                                        ? x.value()
                    : x.symbol() == "batch" || x.symbol() == "sequence" ? 1
                    : x.symbol() == "kv_blocks"                         ? 3
                                                                        : 6);
      dims.push_back(std::move(d));
    }
    return dims;
  };
  EXPECT_FALSE(e->OutputDims(dims_of(e->plan().inputs)).ok());
  EXPECT_FALSE(e->OutputDims(dims_of(e->plan().inputs), PlanProgram::kDecode).ok());
  const PlanIo decode = IoOf(e->plan(), PlanProgram::kDecode);
  EXPECT_TRUE(e->OutputDims(dims_of(decode.inputs), PlanProgram::kDecode).ok());
  EXPECT_FALSE(e->OutputDims(dims_of(decode.inputs)).ok());
}

TEST(GenerationPlan, NotADecoderOrBadOptionsAreErrors) {
  CompileOptions o;
  o.symbols = {{"batch", 1}, {"sequence", 8}};
  o.decode_context = {16};
  absl::Status st =
      Compile(std::string(KILN_SOURCE_DIR) + "/models/fixtures/bert_tiny_opset14_none.onnx", o)
          .status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("needs a KV-cache decoder"));
  CompileOptions g = GenerationOptions({1});
  EXPECT_THAT(Compile(kKv + "llama_kv_dynamo_sdpa.onnx", g).status().message(),
              HasSubstr("at least 2 slots"));
  g = GenerationOptions({8});
  g.profile["past_sequence"] = {4};
  EXPECT_THAT(Compile(kKv + "llama_kv_dynamo_sdpa.onnx", g).status().message(),
              HasSubstr("which kiln binds"));
  // A 16-bit cuda generation plan keeps the cache f32: its attention is noted fp32, why.
  g = GenerationOptions({8});
  g.target = PlanTarget::kCuda;
  g.precision = "fp16";
  absl::StatusOr<Plan> fp16 = Compile(kKv + "llama_kv_dynamo_sdpa.onnx", g);
  ASSERT_TRUE(fp16.ok()) << fp16.status();
  bool noted = false;
  for (const PlanPrecisionNote& n : fp16->precision_notes)
    noted |= n.op == "kiln.Attention" && n.precision == "fp32" &&
             n.reason.find("KV cache") != std::string::npos;
  EXPECT_TRUE(noted);
  // A fixed batch is fine; a fixed sequence is not (it is the prompt length).
  g = GenerationOptions({8});
  g.profile.erase("batch");
  g.symbols = {{"batch", 1}};
  absl::StatusOr<Plan> fixed_batch = Compile(kKv + "llama_kv_dynamo_sdpa.onnx", g);
  ASSERT_TRUE(fixed_batch.ok()) << fixed_batch.status();
  EXPECT_EQ(fixed_batch->buckets.back().program, PlanProgram::kDecode);
  g = GenerationOptions({8});
  g.profile.erase("sequence");
  g.symbols = {{"sequence", 4}};
  EXPECT_THAT(Compile(kKv + "llama_kv_dynamo_sdpa.onnx", g).status().message(),
              HasSubstr("not --shape"));
  // A plan without a decode program gives no session.
  CompileOptions plain;
  plain.symbols = {{"batch", 1}, {"sequence", 2}, {"past_sequence", 3}, {"total_sequence", 5}};
  std::shared_ptr<const Executor> e = CompileAndCreate(kKv + "llama_kv_dynamo_sdpa.onnx", plain);
  ASSERT_NE(e, nullptr);
  st = GenerationSession::Create(e).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("no decode program"));
}

}  // namespace
}  // namespace kiln
