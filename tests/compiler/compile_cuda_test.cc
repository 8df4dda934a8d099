// kiln::Compile for target cuda, on the CPU: every fixture compiles at fp32, fp16, bf16 and int8
// into a plan with no host step (every step a cuda kernel meeting its contract), the
// signature keeps the model's dtypes, 16-bit plans store their float weights in 16 bits and
// keep attention masks f32, the manifest records the SMs and toolkit, plans are
// deterministic and round-trip; kernel choice for the standard ops (params of transpose,
// slice, matmul patterns, eltwise typing) and the error for a node no device kernel takes.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/lower.h"
#include "gtest/gtest.h"
#include "kiln/ir/text.h"
#include "kiln/kiln.h"
#include "kiln/onnx/exporter.h"
#include "plan/kernel_contract.h"

namespace kiln {
namespace {

const std::string kFixtures = std::string(KILN_SOURCE_DIR) + "/models/fixtures/";

std::vector<std::string> AllFixtures() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kFixtures))
    if (e.path().extension() == ".onnx") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The symbols of the fixture sweeps: batch 2 x sequence 16, and for the KV-cache decoders
// (models/fixtures/kv/) 5 cached positions (their mask covers past + sequence, a symbol
// of its own in the export).
bool IsGenai(const std::string& model);

std::map<std::string, int64_t> SweepSymbols(const std::string& model) {
  if (IsGenai(model))
    return {{"batch_size", 2},
            {"sequence_length", 16},
            {"past_sequence_length", 5},
            {"total_sequence_length", 21},
            {"kv_cache_dim", 16}};
  if (std::filesystem::path(model).parent_path().filename() == "kv")
    return {{"batch", 2}, {"sequence", 16}, {"past_sequence", 5}, {"total_sequence", 21}};
  return {{"batch", 2}, {"sequence", 16}};
}

CompileOptions Cuda(const std::string& precision) {
  CompileOptions o;
  o.target = PlanTarget::kCuda;
  o.precision = precision;
  o.symbols = {{"batch", 2}, {"sequence", 16}};
  return o;
}

// The image towers (models/fixtures/vision/) start with a Conv, for which the cuda target
// has no kernel yet: their cuda compile is refused naming the node, at every precision.
bool IsVision(const std::string& model) {
  return std::filesystem::path(model).parent_path().filename() == "vision";
}

// The onnxruntime-genai files (models/fixtures/genai/<name>/model.onnx) compile like the
// others: GroupQueryAttention's cache update is Pad, TensorScatter and an integer ReduceSum,
// and the int4 file's MatMulNBits is block_quant_linear, all cuda kernels.
bool IsGenai(const std::string& model) {
  return std::filesystem::path(model).parent_path().parent_path().filename() == "genai";
}
bool IsGenaiInt4(const std::string& model) {
  return IsGenai(model) && model.find("int4") != std::string::npos;
}

// Each of the `count` fixtures `pick` selects: its fp16 cuda compile with `symbols` is
// Unimplemented, the message containing every string of `naming`.
void ExpectCudaRefuses(bool (*pick)(const std::string&), std::map<std::string, int64_t> symbols,
                       const std::vector<std::string>& naming, int count) {
  int n = 0;
  for (const std::string& model : AllFixtures()) {
    if (!pick(model)) continue;
    ++n;
    CompileOptions o = Cuda("fp16");
    o.symbols = symbols;
    absl::StatusOr<Plan> plan = Compile(model, o);
    ASSERT_FALSE(plan.ok()) << model;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented) << plan.status();
    for (const std::string& s : naming)
      EXPECT_NE(plan.status().message().find(s), std::string::npos) << plan.status();
  }
  EXPECT_EQ(n, count);
}

// The int4 file's GEMMs stay int4 on cuda at every precision: block_quant_linear with f32
// activations (kiln.BlockQuantLinear is kept f32 by lower-precision), codes two per byte.
TEST(CompileCuda, Int4GenaiGemmsAreBlockQuantKernels) {
  int files = 0;
  for (const std::string& model : AllFixtures()) {
    if (!IsGenaiInt4(model)) continue;
    ++files;
    for (const char* precision : {"fp32", "fp16"}) {
      CompileOptions o = Cuda(precision);
      o.symbols = SweepSymbols(model);
      absl::StatusOr<Plan> plan = Compile(model, o);
      ASSERT_TRUE(plan.ok()) << plan.status();
      int quant = 0;
      for (const PlanStep& s : plan->buckets[0].steps) {
        if (s.kernel != "block_quant_linear") continue;
        ++quant;
        EXPECT_EQ(plan->buckets[0].buffers[s.inputs[0]].dtype, DType::kF32);
        EXPECT_EQ(plan->buckets[0].buffers[s.inputs[1]].dtype, DType::kU8);
      }
      EXPECT_GT(quant, 0) << precision;
    }
  }
  EXPECT_EQ(files, 1);
}

TEST(CompileCuda, ImageTowersAreRefusedNamingTheConv) {
  ExpectCudaRefuses(&IsVision, {{"batch", 2}}, {"(Conv, opset ", "no cuda kernel 'conv'"}, 4);
}

TEST(CompileCuda, EveryFixtureAtEveryPrecisionHasNoHostStep) {
  const std::vector<std::string> fixtures = AllFixtures();
  ASSERT_GE(fixtures.size(), 31u);
  for (const std::string& model : fixtures) {
    if (IsVision(model)) continue;  // ImageTowersAreRefusedNamingTheConv
    absl::StatusOr<Plan> ref = Compile(model, [&] {
      CompileOptions o;
      o.symbols = SweepSymbols(model);
      return o;
    }());
    ASSERT_TRUE(ref.ok()) << model << ": " << ref.status();
    for (const char* precision : {"fp32", "fp16", "bf16", "int8"}) {
      SCOPED_TRACE(model + " at " + precision);
      const bool int8 = std::string(precision) == "int8";
      CompileOptions o = Cuda(precision);
      o.symbols = SweepSymbols(model);
      absl::StatusOr<Plan> plan = Compile(model, o);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->target, PlanTarget::kCuda);
      EXPECT_EQ(plan->cuda_sms, (std::vector<int32_t>{80, 90}));
#ifdef KILN_HAVE_CUDA
      EXPECT_FALSE(plan->manifest.cuda_toolkit_version.empty());
      EXPECT_FALSE(plan->manifest.cublas_version.empty());
#endif
      // Callers pass and receive the model's own dtypes at every precision.
      ASSERT_EQ(plan->inputs.size(), ref->inputs.size());
      ASSERT_EQ(plan->outputs.size(), ref->outputs.size());
      for (size_t i = 0; i < plan->inputs.size(); ++i)
        EXPECT_EQ(plan->inputs[i].dtype, ref->inputs[i].dtype);
      for (size_t i = 0; i < plan->outputs.size(); ++i)
        EXPECT_EQ(plan->outputs[i].dtype, ref->outputs[i].dtype);
      // int8: the GEMMs s8 (quant_linear), the rest fp16 (ComputePrecision).
      int quant_linears = 0;
      const DType low = std::string(precision) == "fp16" || int8 ? DType::kF16
                        : std::string(precision) == "bf16"       ? DType::kBF16
                                                                 : DType::kF32;
      for (const PlanBucket& b : plan->buckets) {
        for (const PlanStep& s : b.steps) {
          const KernelContract* c = FindKernelContract(PlanTarget::kCuda, s.kernel);
          ASSERT_NE(c, nullptr) << "step kernel '" << s.kernel << "' is not a cuda kernel";
          EXPECT_TRUE(CheckStepContract(*c, b, s).ok()) << s.kernel;
          if (s.kernel == "linear") {
            // The GEMM runs at the plan's precision, its weights stored in it (int8: an
            // output head, or K or N not a multiple of 4, at fp16).
            EXPECT_EQ(b.buffers[s.inputs[0]].dtype, low);
            EXPECT_EQ(b.buffers[s.inputs[1]].dtype, low);
          }
          if (s.kernel == "quant_linear") {
            EXPECT_TRUE(int8);
            EXPECT_EQ(b.buffers[s.inputs[0]].dtype, low);  // fp16 activations
            EXPECT_EQ(b.buffers[s.inputs[1]].dtype, DType::kI8);
            const int64_t k = std::get<int64_t>(s.params[1].value);
            const int64_t n = std::get<int64_t>(s.params[2].value);
            EXPECT_TRUE(k % 4 == 0 && n % 4 == 0) << k << " x " << n;
            ++quant_linears;
          }
          const bool attention = s.kernel == "attention" || s.kernel == "flash_attention";
          if (attention && s.inputs.size() > 1 && s.inputs[1] >= 0) {
            const DType m = b.buffers[s.inputs[1]].dtype;
            EXPECT_TRUE(m == DType::kF32 || m == DType::kBool) << "mask stays f32 or bool";
          }
          // Every fused attention of a 16-bit plan runs on the flash kernel, except with
          // rotary tables (inputs 2 and 3), which only the simple kernel applies; fp32
          // plans keep the exact simple kernel.
          const bool rotary = s.inputs.size() > 2 && s.inputs[2] >= 0;
          if (attention)
            EXPECT_EQ(s.kernel, low == DType::kF32 || rotary ? "attention" : "flash_attention")
                << "head_size " << std::get<int64_t>(s.params[3].value);
        }
      }
      // Every fixture's GEMMs go int8 but the int4 file's (weight-only int4 already).
      if (int8 && !IsGenaiInt4(model)) EXPECT_GT(quant_linears, 0);
    }
  }
}

// A tokens profile gives cuda plans a packed program too (docs/packing.md): every packable
// fixture (the ones whose cpu compile packs) lowers its packed buckets to the cuda kernels
// of their contracts — packed_flash_attention at fp16/bf16 (packed_attention with
// --no-flash-attention, and at fp32), packed_pool, packed_positions — and no host step.
TEST(CompileCuda, PackedProgramsLowerToTheVariableLengthKernels) {
  const std::map<std::string, std::vector<int64_t>> profile = {
      {"batch", {1, 4}}, {"sequence", {8, 16}}, {"tokens", {16, 32}}};
  int packable = 0;
  for (const std::string& model : AllFixtures()) {
    if (IsVision(model) || IsGenai(model) ||
        std::filesystem::path(model).parent_path().filename() == "kv")
      continue;
    CompileOptions cpu;
    cpu.profile = profile;
    absl::StatusOr<Plan> ref = Compile(model, cpu);
    ASSERT_TRUE(ref.ok()) << model << ": " << ref.status();
    if (!HasProgram(*ref, PlanProgram::kPacked)) continue;
    ++packable;
    for (const auto& [precision, flash] : {std::pair{"fp32", true}, std::pair{"fp16", true},
                                           std::pair{"bf16", true}, std::pair{"fp16", false}}) {
      SCOPED_TRACE(model + " at " + precision + (flash ? "" : " without flash"));
      CompileOptions o = Cuda(precision);
      o.symbols.clear();
      o.profile = profile;
      o.cuda_flash_attention = flash;
      absl::StatusOr<Plan> plan = Compile(model, o);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_TRUE(HasProgram(*plan, PlanProgram::kPacked));
      EXPECT_EQ(IoOf(*plan, PlanProgram::kPacked).inputs.size(),
                IoOf(*ref, PlanProgram::kPacked).inputs.size());
      const bool want_flash = flash && std::string(precision) != "fp32";
      std::map<std::string, int> kernels;
      for (const PlanBucket& b : plan->buckets) {
        if (b.program != PlanProgram::kPacked) continue;
        for (const PlanStep& s : b.steps) {
          const KernelContract* c = FindKernelContract(PlanTarget::kCuda, s.kernel);
          ASSERT_NE(c, nullptr) << "step kernel '" << s.kernel << "' is not a cuda kernel";
          EXPECT_TRUE(CheckStepContract(*c, b, s).ok()) << s.kernel;
          ++kernels[s.kernel];
        }
      }
      // Every fixture that packs has attention; the flash head sizes cover them all.
      EXPECT_GT(kernels[want_flash ? "packed_flash_attention" : "packed_attention"], 0);
      EXPECT_EQ(kernels[want_flash ? "packed_attention" : "packed_flash_attention"], 0);
      EXPECT_EQ(kernels["attention"] + kernels["flash_attention"], 0);
    }
  }
  EXPECT_GE(packable, 20);  // every BERT, DistilBERT and sentence-transformers fixture
}

TEST(CompileCuda, SixteenBitWeightsHalveTheBlob) {
  const std::string model = kFixtures + "default.onnx";
  absl::StatusOr<Plan> f32 = Compile(model, Cuda("fp32"));
  absl::StatusOr<Plan> f16 = Compile(model, Cuda("fp16"));
  ASSERT_TRUE(f32.ok() && f16.ok());
  // Every weight of the BERT-shaped model but two f32 scalars of the mask chain is lowered.
  EXPECT_LT(f16->weights.size(), f32->weights.size() * 51 / 100);
  EXPECT_GT(f16->weights.size(), f32->weights.size() * 49 / 100);
}

// A Linear read only by a residual Add is one linear step with the residual as input 3
// (cuBLASLt's C operand): the LLaMA-style decoder's 2 layers x (o_proj, down_proj) once
// fuse-skip-layernorm is off. With it on (the default), every one of those Adds feeds an
// RMSNorm and goes into a skip_rms_norm step instead (the residual add, the norm and the
// Sum output in one kernel; the same trade SkipLayerNorm makes for GPT-2).
TEST(CompileCuda, ResidualAddsJoinTheirLinear) {
  const std::string model = kFixtures + "decoder/llama_tiny_opset17.onnx";
  CompileOptions no_skip = Cuda("fp16");
  no_skip.disabled_passes = {"fuse-skip-layernorm"};
  absl::StatusOr<Plan> cuda = Compile(model, no_skip);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  int with_residual = 0;
  for (const PlanStep& s : cuda->buckets[0].steps) {
    if (s.kernel != "linear" || s.inputs.size() < 4 || s.inputs[3] < 0) continue;
    ++with_residual;
    EXPECT_EQ(std::get<std::string>(s.params[4].value), "none");
    EXPECT_NE(std::find_if(s.provenance.begin(), s.provenance.end(),
                           [](const std::string& p) { return p.find("Add") != std::string::npos; }),
              s.provenance.end())
        << "the Add's provenance joins the step";
  }
  EXPECT_EQ(with_residual, 4);

  absl::StatusOr<Plan> fused = Compile(model, Cuda("fp16"));
  ASSERT_TRUE(fused.ok()) << fused.status();
  int skip_rms = 0, rms = 0, residual_linears = 0;
  for (const PlanStep& s : fused->buckets[0].steps) {
    skip_rms += s.kernel == "skip_rms_norm";
    rms += s.kernel == "rms_norm";
    residual_linears += s.kernel == "linear" && s.inputs.size() >= 4 && s.inputs[3] >= 0;
  }
  EXPECT_EQ(skip_rms, 4);  // after each attention and each MLP
  EXPECT_EQ(rms, 1);       // layer 0's input norm reads the embedding, no residual
  EXPECT_EQ(residual_linears, 0);
}

TEST(CompileCuda, Tf32OnlyWhenAllowed) {
  const std::string model = kFixtures + "decoder/llama_tiny_opset17.onnx";
  auto count = [](const Plan& p) {
    int n = 0;
    for (const PlanStep& s : p.buckets[0].steps)
      for (const PlanParam& q : s.params) n += q.name == "tf32";
    return n;
  };
  CompileOptions o = Cuda("fp32");
  absl::StatusOr<Plan> plain = Compile(model, o);
  o.allow_tf32 = true;
  absl::StatusOr<Plan> tf32 = Compile(model, o);
  ASSERT_TRUE(plain.ok() && tf32.ok());
  EXPECT_EQ(count(*plain), 0);
  EXPECT_EQ(count(*tf32), 9);  // linear steps: per layer qkv, o, gate+up, down; lm_head
  o.precision = "fp16";        // 16-bit GEMMs are not TF32's business
  absl::StatusOr<Plan> f16 = Compile(model, o);
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ(count(*f16), 0);
  CompileOptions cpu;
  cpu.allow_tf32 = true;
  EXPECT_EQ(Compile(model, cpu).status().code(), absl::StatusCode::kInvalidArgument);
}

// fp16/bf16 attention runs on the flash kernel unless the caller asks for the simple one
// (which the options string, and so the plan, records); fp32 never does; cpu refuses it.
TEST(CompileCuda, FlashAttentionUnlessAskedNot) {
  const std::string model = kFixtures + "torch/gpt2_dynamo_sdpa.onnx";  // causal
  auto count = [](const Plan& p, const char* kernel) {
    int n = 0;
    for (const PlanStep& s : p.buckets[0].steps) n += s.kernel == kernel;
    return n;
  };
  CompileOptions o = Cuda("bf16");
  absl::StatusOr<Plan> flash = Compile(model, o);
  o.cuda_flash_attention = false;
  absl::StatusOr<Plan> simple = Compile(model, o);
  ASSERT_TRUE(flash.ok() && simple.ok()) << flash.status() << simple.status();
  EXPECT_GT(count(*flash, "flash_attention"), 0);
  EXPECT_EQ(count(*flash, "attention"), 0);
  EXPECT_EQ(count(*simple, "flash_attention"), 0);
  EXPECT_EQ(count(*simple, "attention"), count(*flash, "flash_attention"));
  EXPECT_NE(simple->compile_options.find("no_flash_attention"), std::string::npos);
  EXPECT_EQ(flash->compile_options.find("no_flash_attention"), std::string::npos);
  absl::StatusOr<Plan> f32 = Compile(model, Cuda("fp32"));
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(count(*f32, "flash_attention"), 0);
  CompileOptions cpu;
  cpu.symbols = {{"batch", 2}, {"sequence", 16}};
  cpu.cuda_flash_attention = false;
  EXPECT_EQ(Compile(model, cpu).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompileCuda, DeterministicRoundTripAndSms) {
  const std::string model = kFixtures + "torch/roberta_dynamo_sdpa.onnx";
  CompileOptions o = Cuda("bf16");
  o.cuda_sms = {90};
  absl::StatusOr<Plan> a = Compile(model, o), b = Compile(model, o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  EXPECT_EQ(a->cuda_sms, (std::vector<int32_t>{90}));
  absl::StatusOr<std::string> sa = SerializePlan(*a), sb = SerializePlan(*b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(*sa, *sb);
  absl::StatusOr<Plan> back = ParsePlan(*sa);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *a);
  EXPECT_NE(a->compile_options.find("target=cuda cuda_sms={90}"), std::string::npos)
      << a->compile_options;
  EXPECT_NE(a->compile_options.find("precision=bf16"), std::string::npos);
}

TEST(CompileCuda, NodeWithoutDeviceKernelFailsNamingIt) {
  auto g = ParseGraph(R"(graph g opset=21 {
    %0 = Input() : f32[2,8] "x"
    %1 = Constant() {value=tensor<i64[1]>[3]} : i64[1] "k"
    %2, %3 = TopK(%0, %1) : f32[2,3] "values", i64[2,3] "indices" @ "my_topk"
    return "values": %2, "indices": %3
  })");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string path = std::string(KILN_TEST_TMPDIR) + "/topk.onnx";
  std::filesystem::create_directories(KILN_TEST_TMPDIR);
  ASSERT_TRUE(ExportOnnxFile(**g, path).ok());
  CompileOptions o;
  o.target = PlanTarget::kCuda;
  absl::StatusOr<Plan> plan = Compile(path, o);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(plan.status().message().find("TopK"), std::string::npos) << plan.status();
  EXPECT_NE(plan.status().message().find("no cuda kernel takes this node"), std::string::npos);
  // The same model compiles for the CPU (a ref step).
  EXPECT_TRUE(Compile(path, {}).ok());
}

// ---- kernel choice for the standard ops on cuda ----------------------------------------

struct Chosen {
  std::unique_ptr<Graph> graph;
  std::optional<compiler::KernelChoice> choice;
  std::string why;
};

Chosen Choose(const std::string& ir) {
  Chosen c;
  auto g = ParseGraph(ir);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return c;
  c.graph = *std::move(g);
  const Node* last = nullptr;
  for (const auto& n : c.graph->nodes())
    if (!n->is_input() && !n->is_constant()) last = n.get();
  if (last) c.choice = compiler::ChooseKernel(*last, PlanTarget::kCuda, &c.why);
  return c;
}

const PlanParam* Param(const Chosen& c, const std::string& name) {
  if (!c.choice) return nullptr;
  for (const PlanParam& p : c.choice->params)
    if (p.name == name) return &p;
  return nullptr;
}

// GroupQueryAttention's cache update: Pad (begin offsets, the value), TensorScatter (the
// axis folded into outer / cap / seq / inner) and an integer ReduceSum choose their kernels;
// what the kernels cannot take is refused with the reason, never emitted against a
// contract: an int64 pad value beyond 2^53 (the step carries a double), an empty update
// (its write indices would go unchecked), an empty cache axis, an integer ReduceMean.
TEST(ChooseCudaKernel, GenaiCacheUpdateOps) {
  Chosen p = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[1,2,0,4] "past"
    %1 = Constant() {value=tensor<i64[8]>[0,0,0,0,0,1,6,0]} : i64[8] "pads"
    %2 = Pad(%0, %1) : f32[1,3,6,4] "y"
    return "y": %2
  })");
  ASSERT_TRUE(p.choice) << p.why;
  EXPECT_EQ(p.choice->kernel, "pad");
  EXPECT_EQ(Param(p, "begin")->value, (PlanParam::Value{std::vector<int64_t>{0, 0, 0, 0}}));
  EXPECT_EQ(Param(p, "value")->value, (PlanParam::Value{0.0}));
  Chosen big = Choose(R"(graph g opset=21 {
    %0 = Input() : i64[3] "x"
    %1 = Constant() {value=tensor<i64[2]>[1,1]} : i64[2] "pads"
    %2 = Constant() {value=tensor<i64[]>[9007199254740993]} : i64[] "value"
    %3 = Pad(%0, %1, %2) : i64[5] "y"
    return "y": %3
  })");
  EXPECT_FALSE(big.choice);
  EXPECT_NE(big.why.find("beyond 2^53"), std::string::npos) << big.why;
  Chosen ts = Choose(R"(graph g opset=24 {
    %0 = Input() : f32[2,3,8,4] "cache"
    %1 = Input() : f32[2,3,2,4] "update"
    %2 = Input() : i64[2] "write_indices"
    %3 = TensorScatter(%0, %1, %2) {mode="circular"} : f32[2,3,8,4] "y"
    return "y": %3
  })");
  ASSERT_TRUE(ts.choice) << ts.why;
  EXPECT_EQ(ts.choice->kernel, "tensor_scatter");
  for (const auto& [name, v] :
       {std::pair{"batch", 2}, std::pair{"outer", 3}, std::pair{"cap", 8}, std::pair{"seq", 2},
        std::pair{"inner", 4}, std::pair{"circular", 1}})
    EXPECT_EQ(Param(ts, name)->value, (PlanParam::Value{int64_t{v}})) << name;
  Chosen empty = Choose(R"(graph g opset=24 {
    %0 = Input() : f32[2,3,8,4] "cache"
    %1 = Input() : f32[2,3,0,4] "update"
    %2 = Input() : i64[2] "write_indices"
    %3 = TensorScatter(%0, %1, %2) : f32[2,3,8,4] "y"
    return "y": %3
  })");
  EXPECT_FALSE(empty.choice);
  EXPECT_NE(empty.why.find("empty update"), std::string::npos) << empty.why;
  Chosen sum = Choose(R"(graph g opset=21 {
    %0 = Input() : i64[2,7] "mask"
    %1 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "axes"
    %2 = ReduceSum(%0, %1) {keepdims=0} : i64[2] "y"
    return "y": %2
  })");
  ASSERT_TRUE(sum.choice) << sum.why;
  EXPECT_EQ(sum.choice->kernel, "reduce");
  Chosen mean = Choose(R"(graph g opset=21 {
    %0 = Input() : i64[2,7] "mask"
    %1 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "axes"
    %2 = ReduceMean(%0, %1) {keepdims=0} : i64[2] "y"
    return "y": %2
  })");
  EXPECT_FALSE(mean.choice);
  EXPECT_NE(mean.why.find("integer mean"), std::string::npos) << mean.why;
}

TEST(ChooseCudaKernel, TransposeSliceAndTheirOperands) {
  Chosen t = Choose(R"(graph g opset=21 {
    %0 = Input() : f16[2,3,4] "x"
    %1 = Transpose(%0) {perm=[0,-1,1]} : f16[2,4,3] "y"
    return "y": %1
  })");
  ASSERT_TRUE(t.choice) << t.why;
  EXPECT_EQ(t.choice->kernel, "transpose");
  EXPECT_EQ(Param(t, "perm")->value, (PlanParam::Value{std::vector<int64_t>{0, 2, 1}}));
  // Slice: negative start, a negative step, the constant operands dropped from the step.
  Chosen s = Choose(R"(graph g opset=21 {
    %0 = Input() : i64[4,10] "x"
    %1 = Constant() {value=tensor<i64[2]>[-1,8]} : i64[2] "starts"
    %2 = Constant() {value=tensor<i64[2]>[-100,1]} : i64[2] "ends"
    %3 = Constant() {value=tensor<i64[2]>[0,1]} : i64[2] "axes"
    %4 = Constant() {value=tensor<i64[2]>[-2,-3]} : i64[2] "steps"
    %5 = Slice(%0, %1, %2, %3, %4) : i64[2,3] "y"
    return "y": %5
  })");
  ASSERT_TRUE(s.choice) << s.why;
  EXPECT_EQ(s.choice->kernel, "slice");
  EXPECT_EQ(s.choice->operands, (std::vector<int>{0}));
  EXPECT_EQ(Param(s, "starts")->value, (PlanParam::Value{std::vector<int64_t>{3, 8}}));
  EXPECT_EQ(Param(s, "steps")->value, (PlanParam::Value{std::vector<int64_t>{-2, -3}}));
  // A run-time start has no kernel: the reason says so.
  Chosen r = Choose(R"(graph g opset=21 {
    %0 = Input() : f32[4,10] "x"
    %1 = Input() : i64[1] "starts"
    %2 = Constant() {value=tensor<i64[1]>[5]} : i64[1] "ends"
    %3 = Slice(%0, %1, %2) : f32[?,10] "y"
    return "y": %3
  })");
  EXPECT_FALSE(r.choice);
  EXPECT_NE(r.why.find("constants"), std::string::npos) << r.why;
}

TEST(ChooseCudaKernel, MatMulPatterns) {
  auto mm = [](const std::string& a, const std::string& b, const std::string& y) {
    return Choose("graph g opset=21 {\n %0 = Input() : f32" + a + " \"a\"\n %1 = Input() : f32" +
                  b + " \"b\"\n %2 = MatMul(%0, %1) : f32" + y + " \"y\"\n return \"y\": %2\n}");
  };
  auto ints = [](const Chosen& c) {
    std::vector<int64_t> v;
    for (const char* n : {"batch", "m", "k", "n", "broadcast_a", "broadcast_b"})
      v.push_back(std::get<int64_t>(Param(c, n)->value));
    return v;
  };
  Chosen attn = mm("[2,4,8,16]", "[2,4,16,8]", "[2,4,8,8]");
  ASSERT_TRUE(attn.choice) << attn.why;
  EXPECT_EQ(ints(attn), (std::vector<int64_t>{8, 8, 16, 8, 0, 0}));
  Chosen fold = mm("[2,5,16]", "[16,3]", "[2,5,3]");
  ASSERT_TRUE(fold.choice) << fold.why;
  EXPECT_EQ(ints(fold), (std::vector<int64_t>{1, 10, 16, 3, 0, 1}));
  Chosen bcast_a = mm("[8,16]", "[3,16,4]", "[3,8,4]");
  ASSERT_TRUE(bcast_a.choice) << bcast_a.why;
  EXPECT_EQ(ints(bcast_a), (std::vector<int64_t>{3, 8, 16, 4, 1, 0}));
  Chosen mixed = mm("[2,1,8,16]", "[1,3,16,4]", "[2,3,8,4]");
  EXPECT_FALSE(mixed.choice);
  EXPECT_NE(mixed.why.find("batch dims"), std::string::npos) << mixed.why;
}

TEST(ChooseCudaKernel, EltwiseTyping) {
  Chosen cast = Choose(R"(graph g opset=21 {
    %0 = Input() : i64[2,1,1,16] "mask"
    %1 = Cast(%0) {to=1} : f32[2,1,1,16] "m"
    return "m": %1
  })");
  ASSERT_TRUE(cast.choice) << cast.why;
  EXPECT_EQ(cast.choice->kernel, "eltwise");
  EXPECT_EQ(std::get<std::string>(Param(cast, "op")->value), "Identity");
  Chosen where = Choose(R"(graph g opset=21 {
    %0 = Input() : bool[2,16] "c"
    %1 = Input() : f16[16] "x"
    %2 = Input() : f16[2,1] "y"
    %3 = Where(%0, %1, %2) : f16[2,16] "z"
    return "z": %3
  })");
  ASSERT_TRUE(where.choice) << where.why;
  EXPECT_EQ(where.choice->operands, (std::vector<int>{0, 1, 2}));
  // Neg of an unsigned integer is not an eltwise step (the reference refuses it too).
  Chosen neg = Choose(R"(graph g opset=21 {
    %0 = Input() : u8[4] "x"
    %1 = Neg(%0) : u8[4] "y"
    return "y": %1
  })");
  EXPECT_FALSE(neg.choice);
  EXPECT_NE(neg.why.find("not defined on u8"), std::string::npos) << neg.why;
  Chosen mod = Choose(R"(graph g opset=21 {
    %0 = Input() : i32[4] "x"
    %1 = Input() : i32[4] "y"
    %2 = Mod(%0, %1) {fmod=1} : i32[4] "z"
    return "z": %2
  })");
  ASSERT_TRUE(mod.choice) << mod.why;
  EXPECT_EQ(std::get<std::string>(Param(mod, "op")->value), "FMod");
}

}  // namespace
}  // namespace kiln
