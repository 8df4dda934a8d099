// The kernel contracts (src/plan/kernel_contract.h): the generic step check on one
// hand-made step per rule (arity, parameter kinds, ranges and choices, operand dtypes,
// "as input k" dtypes, weight-only operands, variadic ref steps), the executors' kernel
// tables against the contract tables (each id in both), and docs/plan-kernels.md against
// the rendered tables.
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "plan/kernel_contract.h"
#include "runtime/cpu/cpu_steps.h"
#include "runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

using ::testing::HasSubstr;

// A bucket with buffers 0: f32[2,8] arena, 1: f32[8,4] weight, 2: f32[4] weight,
// 3: f32[2,4] arena, 4: i32[2,8] arena, 5: f32[4] arena.
PlanBucket SampleBucket() {
  PlanBucket b;
  auto buf = [&](PlanBufferKind k, DType dt, std::vector<int64_t> dims) {
    b.buffers.push_back({k, 0, 0, dt, std::move(dims), 0});
  };
  buf(PlanBufferKind::kArena, DType::kF32, {2, 8});
  buf(PlanBufferKind::kWeight, DType::kF32, {8, 4});
  buf(PlanBufferKind::kWeight, DType::kF32, {4});
  buf(PlanBufferKind::kArena, DType::kF32, {2, 4});
  buf(PlanBufferKind::kArena, DType::kI32, {2, 8});
  buf(PlanBufferKind::kArena, DType::kF32, {4});
  return b;
}

PlanStep LinearStep() {
  return {"linear",
          {0, 1, 2},
          {3},
          {P("m", int64_t{2}), P("k", int64_t{8}), P("n", int64_t{4}), P("trans_w", int64_t{0}),
           P("activation", "none")},
          {"/fc"}};
}

absl::Status Check(const PlanStep& step, PlanTarget target = PlanTarget::kCpu) {
  const KernelContract* c = FindKernelContract(target, step.kernel);
  if (c == nullptr) return absl::NotFoundError("no contract");
  return CheckStepContract(*c, SampleBucket(), step);
}

void ExpectInvalid(const absl::Status& st, const std::string& msg) {
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(msg));
}

TEST(KernelContract, ValidStepPasses) {
  EXPECT_TRUE(Check(LinearStep()).ok()) << Check(LinearStep());
}

TEST(KernelContract, Arity) {
  PlanStep s = LinearStep();
  s.inputs = {0};
  ExpectInvalid(Check(s), "takes 2 to 3 inputs, got 1");
  s = LinearStep();
  s.outputs = {3, 5};
  ExpectInvalid(Check(s), "takes 1 to 1 outputs, got 2");
  s = LinearStep();
  s.inputs = {0, -1, 2};
  ExpectInvalid(Check(s), "input 1 (w) is required");
  s = LinearStep();
  s.inputs = {0, 1, -1};  // bias is optional
  EXPECT_TRUE(Check(s).ok());
}

TEST(KernelContract, Parameters) {
  PlanStep s = LinearStep();
  s.params.pop_back();
  ExpectInvalid(Check(s), "missing parameter 'activation'");
  s = LinearStep();
  s.params[1] = P("k", 8.0);
  ExpectInvalid(Check(s), "parameter 'k' must be an int");
  s = LinearStep();
  s.params[1] = P("k", int64_t{0});
  ExpectInvalid(Check(s), "parameter 'k' is 0, outside [1, ");
  s = LinearStep();
  s.params[3] = P("trans_w", int64_t{2});
  ExpectInvalid(Check(s), "parameter 'trans_w' is 2, outside [0, 1]");
  s = LinearStep();
  s.params[4] = P("activation", "swish");
  ExpectInvalid(Check(s), "unknown activation 'swish' (none, gelu, gelu_tanh, relu, tanh)");
  s = LinearStep();
  s.params[4] = P("activation", int64_t{1});
  ExpectInvalid(Check(s), "parameter 'activation' must be a string");
  s = LinearStep();
  s.params.push_back(P("extra", int64_t{7}));  // extra parameters are ignored
  EXPECT_TRUE(Check(s).ok());
}

TEST(KernelContract, FloatParametersAreFiniteF32) {
  PlanStep s{
      "layer_norm", {0, 5}, {0}, {P("rows", int64_t{2}), P("h", int64_t{8}), P("epsilon", 1e-5)}};
  EXPECT_TRUE(Check(s).ok()) << Check(s);
  s.params[2] = P("epsilon", std::numeric_limits<double>::infinity());
  ExpectInvalid(Check(s), "parameter 'epsilon' is not finite");
  s.params[2] = P("epsilon", 1e300);
  ExpectInvalid(Check(s), "parameter 'epsilon' (1e+300) is outside the f32 range");
}

TEST(KernelContract, OperandDTypes) {
  PlanStep s = LinearStep();
  s.inputs[0] = 4;  // i32
  ExpectInvalid(Check(s), "x must be f32, got i32");
  s = LinearStep();
  s.inputs[1] = 0;  // an arena buffer as the weight
  ExpectInvalid(Check(s), "w must be a weight buffer (constant)");
  // embed_layer_norm: segment ids must have input_ids' dtype.
  PlanStep e{
      "embed_layer_norm",
      {4, 0, -1, 1, 1, -1, 2, 2},
      {3},
      {P("batch", int64_t{2}), P("seq", int64_t{8}), P("hidden", int64_t{4}), P("epsilon", 1e-12)}};
  ExpectInvalid(Check(e), "segment_ids is f32 but input_ids is i32");
}

TEST(KernelContract, RefIsVariadic) {
  PlanStep s{"ref", {0, -1, 4, 1}, {3, 5}, {P("node", "graph g opset=21 {}")}};
  EXPECT_TRUE(Check(s).ok()) << Check(s);
  s.params.clear();
  ExpectInvalid(Check(s), "missing parameter 'node'");
}

TEST(KernelContract, UnknownKernelHasNoContract) {
  EXPECT_EQ(FindKernelContract(PlanTarget::kCpu, "fast_gelu"), nullptr);
  EXPECT_EQ(FindKernelContract(static_cast<PlanTarget>(7), "linear"), nullptr);
}

TEST(KernelContract, DTypeSetText) {
  EXPECT_EQ(DTypeSetText(kF32Only), "f32");
  EXPECT_EQ(DTypeSetText(kFloatTypes), "f32, f16 or bf16");
  EXPECT_EQ(DTypeSetText(kAnyDType), "any");
}

// Every cpu contract has a kernel in the CPU executor's table, and the other way round.
TEST(KernelContract, CpuTableMatchesContracts) {
  for (const KernelContract& c : KernelContracts(PlanTarget::kCpu))
    EXPECT_NE(runtime::FindCpuKernel(c.name), nullptr) << "no CPU kernel for " << c.name;
  for (std::string_view id : runtime::CpuKernelIds())
    EXPECT_NE(FindKernelContract(PlanTarget::kCpu, id), nullptr) << "no cpu contract for " << id;
}

// docs/plan-kernels.md embeds `kiln kernels --target T` verbatim between markers.
TEST(KernelContract, DocsShowTheContracts) {
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/docs/plan-kernels.md");
  ASSERT_TRUE(f) << "docs/plan-kernels.md";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (PlanTarget t : {PlanTarget::kCpu, PlanTarget::kCuda}) {
    if (KernelContracts(t).empty()) continue;
    const std::string name(PlanTargetName(t));
    const std::string open = "<!-- kernels:" + name + " ";
    const std::string close = "<!-- /kernels:" + name + " -->";
    const size_t a = doc.find(open), b = doc.find(close);
    ASSERT_NE(a, std::string::npos) << "docs/plan-kernels.md has no " << open << "marker";
    ASSERT_NE(b, std::string::npos) << close;
    const size_t start = doc.find('\n', a) + 1;
    EXPECT_EQ(doc.substr(start, b - start), KernelContractsMarkdown(t))
        << "docs/plan-kernels.md is out of date: paste `kiln kernels --target " << name
        << "` between its markers";
  }
}

}  // namespace
}  // namespace kiln::runtime_test
