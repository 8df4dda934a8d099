// Executor::Create on malformed plans: one mutation of a valid plan per diagnosable
// mistake (unknown kernel, missing or mistyped parameter, parameters that disagree with
// the buffers, out-of-range sizes, unparseable or mismatched ref text, writes to
// read-only memory, overlaps a kernel cannot take, unbound symbols, unwritten outputs,
// another target), each checked for its status code and message.
#include <functional>

#include "gmock/gmock.h"
#include "kernels/cpu/cpu_context.h"
#include "runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

using ::testing::HasSubstr;

// A valid plan: x [2,8] -> linear (w [8,4], bias) -> arena a [2,4] -> gelu -> y [2,4], and a
// ref Add(y_in, w2) into output 1.
struct Base {
  PlanBuilder pb;
  int x, w, bias, a, y, y2, w2;
  std::string add_text;
  Base() {
    pb.Input("x", DType::kF32, {Dim::Symbol("batch"), Dim::Known(8)});
    pb.Output("y", DType::kF32, {Dim::Symbol("batch"), Dim::Known(4)});
    pb.Output("z", DType::kF32, {Dim::Symbol("batch"), Dim::Known(8)});
    const int64_t woff = pb.AddWeight(RandomVec(32, 1)), boff = pb.AddWeight(RandomVec(4, 2));
    const int64_t w2off = pb.AddWeight(RandomVec(8, 3));
    pb.Bucket({{"batch", 2}});
    x = pb.In(0, {2, 8});
    w = pb.Weight(woff, {8, 4});
    bias = pb.Weight(boff, {4});
    a = pb.Arena({2, 4});
    y = pb.Out(0, {2, 4});
    y2 = pb.Out(1, {2, 8});
    w2 = pb.Weight(w2off, {8});
    pb.Step("linear", {x, w, bias}, {a},
            {P("m", int64_t{2}), P("k", int64_t{8}), P("n", int64_t{4}), P("trans_w", int64_t{0}),
             P("activation", "none")},
            {"/fc/MatMul", "/fc/Add"});
    pb.Step("gelu", {a}, {y}, {P("n", int64_t{8}), P("tanh", int64_t{0})}, {"/act"});
    Tensor xt = RandomF32({2, 8}, 4), wt = RandomF32({8}, 5);
    add_text = RunRefOp("", "Add", {}, {&xt, &wt}).text;
    pb.Step("ref", {x, w2}, {y2}, {P("node", add_text)}, {"/Add"});
  }
  PlanStep& step(int s) { return pb.cur().steps[s]; }
  PlanParam* param(int s, const std::string& name) {
    for (auto& p : step(s).params)
      if (p.name == name) return &p;
    return nullptr;
  }
  absl::Status Create() { return Executor::Create(pb.Finish()).status(); }
};

void ExpectInvalid(const absl::Status& st, const std::string& msg) {
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(msg));
}

// Thread counts outside 0..kMaxThreads are refused before any OpenMP team is created
// (libgomp crashed creating a team of 100000 threads).
TEST(CreateErrors, ThreadCountOutOfRange) {
  for (int n : {-1, cpu::kMaxThreads + 1, 100000}) {
    Base b;
    ExpectInvalid(Executor::Create(b.pb.Finish(), {.num_threads = n}).status(),
                  "num_threads is " + std::to_string(n));
  }
  Base ok;
  EXPECT_TRUE(Executor::Create(ok.pb.Finish(), {.num_threads = 8}).ok());
}

TEST(CreateErrors, ValidBaseIsAccepted) {
  Base b;
  EXPECT_TRUE(b.Create().ok()) << b.Create();
}

TEST(CreateErrors, UnknownKernel) {
  Base b;
  b.step(1).kernel = "fast_gelu";
  ExpectInvalid(b.Create(), "bucket 0 step 1 (fast_gelu, /act): unknown kernel 'fast_gelu'");
}

TEST(CreateErrors, MissingAndMistypedParameters) {
  {
    Base b;
    b.step(1).params.pop_back();
    ExpectInvalid(b.Create(), "bucket 0 step 1 (gelu, /act): missing parameter 'tanh'");
  }
  {
    Base b;
    b.param(0, "k")->value = 8.0;
    ExpectInvalid(b.Create(), "bucket 0 step 0 (linear, /fc/MatMul): parameter 'k' must be an int");
  }
  {
    Base b;
    b.param(0, "activation")->value = std::string("swish");
    ExpectInvalid(b.Create(), "unknown activation 'swish'");
  }
  {
    Base b;
    b.param(1, "tanh")->value = int64_t{2};
    ExpectInvalid(b.Create(), "parameter 'tanh' is 2, outside [0, 1]");
  }
}

TEST(CreateErrors, ParametersDisagreeWithBuffers) {
  {
    Base b;
    b.param(1, "n")->value = int64_t{9};
    ExpectInvalid(b.Create(),
                  "bucket 0 step 1 (gelu, /act): x [2,4] has 8 elements; the "
                  "parameters need 9");
  }
  {
    Base b;
    b.param(0, "m")->value = int64_t{4};  // x has only 2 rows
    ExpectInvalid(b.Create(), "x [2,8] has 16 elements; the parameters need 32");
  }
  {
    Base b;
    b.pb.cur().buffers[b.x].dtype = DType::kI32;  // also the graph input's dtype mismatch
    b.pb.plan().inputs[0].dtype = DType::kI32;
    ExpectInvalid(b.Create(), "x must be f32, got i32");
  }
}

TEST(CreateErrors, OutOfRangeSizes) {
  {
    Base b;
    b.param(1, "n")->value = int64_t{-8};
    ExpectInvalid(b.Create(), "parameter 'n' is -8, outside [0, ");
  }
  {
    Base b;
    b.param(0, "m")->value = int64_t{1} << 40;
    b.param(0, "k")->value = int64_t{1} << 40;
    ExpectInvalid(b.Create(), "m*k overflows int64");
  }
  {
    Base b;
    b.pb.cur().buffers[b.a].offset = 64;  // [64, 96) is past the 32-byte arena
    ExpectInvalid(b.Create(), "beyond the 32-byte arena");
  }
}

TEST(CreateErrors, RefTextProblems) {
  {
    Base b;
    b.param(2, "node")->value = std::string("graph g opset=21 { %0 = Input( }");
    ExpectInvalid(b.Create(), "bucket 0 step 2 (ref, /Add): node text: IR text 1:");
  }
  {
    Base b;
    b.step(2).params.clear();
    ExpectInvalid(b.Create(), "missing parameter 'node'");
  }
  {
    Base b;
    std::string t = b.add_text;
    t.replace(t.find("Add("), 4, "Sub(");
    b.param(2, "node")->value = t;  // Sub's operands are fine; only the op name changes
    EXPECT_TRUE(b.Create().ok());
    t.replace(t.find("Sub("), 4, "NoSuchOp(");
    b.param(2, "node")->value = t;
    ExpectInvalid(b.Create(), "has no reference kernel");
  }
  {
    Base b;
    b.step(2).inputs = {b.x, b.x};  // operand 1 is [8] in the text but [2,8] here
    ExpectInvalid(b.Create(), "operand 1 is f32[8] but its buffer");
  }
  {
    Base b;
    b.step(2).outputs = {b.a};  // [2,4] buffer for a [2,8] result
    ExpectInvalid(b.Create(), "result 0 is f32[2,8] but its buffer");
  }
}

TEST(CreateErrors, MemoryRules) {
  {
    Base b;
    b.step(1).outputs = {b.w2};
    b.step(1).inputs = {b.w2};
    b.param(1, "n")->value = int64_t{8};
    ExpectInvalid(b.Create(), "output 0 writes weight buffer");
  }
  {
    Base b;
    b.step(1).outputs = {b.x};
    b.step(1).inputs = {b.x};
    b.param(1, "n")->value = int64_t{16};
    ExpectInvalid(b.Create(), "writes buffer 0, graph input 0 (read-only)");
  }
  {
    Base b;  // linear may not write over its own input
    const int x_copy = b.pb.Arena({2, 8});
    b.step(0).inputs[0] = x_copy;
    b.step(0).outputs = {b.pb.Alias(x_copy, {2, 4})};
    b.pb.Step("copy", {b.x}, {x_copy}, {});
    std::swap(b.pb.cur().steps.front(), b.pb.cur().steps.back());
    ExpectInvalid(b.Create(), "output 0 overlaps input 0, which linear cannot compute in place");
  }
  {
    Base b;  // linear's weight must be a constant
    b.step(0).inputs[1] = b.pb.Arena({8, 4});
    ExpectInvalid(b.Create(), "w must be a weight buffer (constant)");
  }
}

TEST(CreateErrors, SignatureAndBuckets) {
  {
    Base b;
    b.pb.cur().bindings = {{"batches", 2}};
    ExpectInvalid(b.Create(), "bucket 0 does not bind symbol 'batch' of the graph inputs");
  }
  {
    Base b;
    b.pb.cur().steps.pop_back();
    ExpectInvalid(b.Create(), "bucket 0: no step writes graph output 'z'");
  }
  {
    Base b;
    b.pb.plan().buckets.clear();
    ExpectInvalid(b.Create(), "the plan has no buckets");
  }
  {
    Base b;
    const int big = b.pb.Arena({2, 5});  // more than output 'y' has in this bucket
    const int y_big = b.pb.Alias(b.y, {2, 5});
    b.pb.cur().buffers[y_big].bytes = 40;
    b.pb.Step("copy", {big}, {y_big}, {});
    ExpectInvalid(b.Create(), "needs 40 bytes but graph output 'y' has 32 in this bucket");
  }
  {
    // A cpu plan relabelled cuda: its ref step is a host step no cuda executor takes.
    Base b;
    b.pb.plan().target = PlanTarget::kCuda;
    b.pb.plan().cuda_sms = {90};
    absl::Status st = b.Create();
#ifdef KILN_HAVE_CUDA
    ExpectInvalid(st, "bucket 0 step 2 (ref, /Add): unknown kernel 'ref' for target cuda");
#else
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("built without its CUDA backend"));
#endif
  }
}

TEST(CreateErrors, AttentionAndEmbedShapeRules) {
  PlanBuilder pb;
  pb.Input("qkv", DType::kF32, {Dim::Known(1), Dim::Known(3), Dim::Known(6)});
  pb.Input("mask", DType::kF32, {Dim::Known(2), Dim::Known(3)});
  pb.Output("y", DType::kF32, {Dim::Known(1), Dim::Known(3), Dim::Known(2)});
  pb.Bucket({});
  pb.Step("attention", {pb.In(0, {1, 3, 6}), pb.In(1, {2, 3})}, {pb.Out(0, {1, 3, 2})},
          {P("batch", int64_t{1}), P("seq", int64_t{3}), P("num_heads", int64_t{1}),
           P("head_size", int64_t{2}), P("scale", 1.0), P("causal", int64_t{0})});
  ExpectInvalid(Executor::Create(pb.Finish()).status(),
                "mask [2,3] does not broadcast to [B,N,S,S] = [1,1,3,3]");
}

}  // namespace
}  // namespace kiln::runtime_test
