// kiln::Compile on the fixtures: bucket layout, the lowering <-> executor contract
// (docs/plan-kernels.md: kernel ids, buffer indices, arena bounds, ref IR text), weight
// dedup across buckets, determinism, the plan round trip, and every option error.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/ir/text.h"
#include "kiln/kiln.h"
#include "kiln/onnx/exporter.h"
#include "kiln/plan/plan.h"
#include "tests/onnx/onnx_test_util.h"

namespace kiln {
namespace {

const std::string kDefault = std::string(KILN_SOURCE_DIR) + "/models/fixtures/default.onnx";

CompileOptions Profile2x2(int opt_level = 2) {
  CompileOptions o;
  o.opt_level = opt_level;
  o.profile = {{"batch", {2, 1}}, {"sequence", {16, 8}}};
  return o;
}

std::set<std::string> Kernels(const Plan& p) {
  std::set<std::string> k;
  for (const PlanBucket& b : p.buckets)
    for (const PlanStep& s : b.steps) k.insert(s.kernel);
  return k;
}

const PlanParam* FindParam(const PlanStep& s, const std::string& name) {
  for (const PlanParam& p : s.params)
    if (p.name == name) return &p;
  return nullptr;
}

// The contract's structural rules, checked for every bucket of `p`.
void CheckContract(const Plan& p) {
  static const std::set<std::string> kKnown = {"copy",
                                               "ref",
                                               "linear",
                                               "layer_norm",
                                               "skip_layer_norm",
                                               "attention",
                                               "embed_layer_norm",
                                               "pool",
                                               "gelu",
                                               "glu",
                                               "softmax",
                                               "gather",
                                               "eltwise",
                                               "transpose",
                                               "slice",
                                               "expand",
                                               "concat",
                                               "rms_norm",
                                               "matmul",
                                               "skip_rms_norm",
                                               "gather_nd",
                                               "gather_elements",
                                               "cumsum",
                                               "rotary"};
  for (const PlanBucket& b : p.buckets) {
    SCOPED_TRACE(::testing::Message() << "bucket with " << b.bindings.size() << " bindings");
    EXPECT_LE(b.arena_bytes, b.no_reuse_bytes);
    EXPECT_LE(b.peak_live_bytes, b.arena_bytes);
    std::set<int> outputs_written;
    for (const PlanBuffer& buf : b.buffers) {
      int64_t need = static_cast<int64_t>(DTypeSize(buf.dtype));
      for (int64_t d : buf.dims) need *= d;
      EXPECT_GE(buf.bytes, need);
      switch (buf.kind) {
        case PlanBufferKind::kArena:
          EXPECT_EQ(buf.offset % 64, 0);
          EXPECT_LE(buf.offset + buf.bytes, b.arena_bytes);
          break;
        case PlanBufferKind::kWeight:
          EXPECT_EQ(buf.offset % 64, 0);
          EXPECT_LE(buf.offset + buf.bytes, static_cast<int64_t>(p.weights.size()));
          break;
        case PlanBufferKind::kInput:
          EXPECT_LT(buf.binding, static_cast<int>(p.inputs.size()));
          break;
        case PlanBufferKind::kOutput:
          EXPECT_LT(buf.binding, static_cast<int>(p.outputs.size()));
          break;
      }
    }
    for (const PlanStep& s : b.steps) {
      EXPECT_TRUE(kKnown.count(s.kernel)) << s.kernel;
      // The contract's operand counts (omitted optional operands are -1, never dropped).
      static const std::map<std::string, size_t> kArity = {
          {"copy", 1},      {"linear", 3},           {"layer_norm", 3}, {"skip_layer_norm", 5},
          {"attention", 4}, {"embed_layer_norm", 8}, {"pool", 2},       {"gelu", 1},
          {"softmax", 1},   {"gather", 2},           {"transpose", 1},  {"slice", 1},
          {"expand", 1},    {"rms_norm", 2},         {"matmul", 2},     {"skip_rms_norm", 4},
          {"glu", 1}};
      if (auto it = kArity.find(s.kernel); it != kArity.end())
        EXPECT_EQ(s.inputs.size(), it->second) << s.kernel;
      EXPECT_FALSE(s.provenance.empty()) << s.kernel;
      for (int32_t i : s.inputs) {
        EXPECT_GE(i, -1);
        EXPECT_LT(i, static_cast<int32_t>(b.buffers.size()));
      }
      for (int32_t o : s.outputs) {
        ASSERT_GE(o, 0);
        ASSERT_LT(o, static_cast<int32_t>(b.buffers.size()));
        if (b.buffers[o].kind == PlanBufferKind::kOutput)
          outputs_written.insert(b.buffers[o].binding);
        EXPECT_NE(b.buffers[o].kind, PlanBufferKind::kWeight);
        EXPECT_NE(b.buffers[o].kind, PlanBufferKind::kInput);
      }
      if (s.kernel == "ref") {
        const PlanParam* node = FindParam(s, "node");
        ASSERT_NE(node, nullptr);
        const std::string& text = std::get<std::string>(node->value);
        auto g = ParseGraph(text);
        ASSERT_TRUE(g.ok()) << g.status() << "\n" << text;
        // One static Input per present step input, with that buffer's dims, in order.
        std::vector<int32_t> present;
        for (int32_t i : s.inputs)
          if (i >= 0) present.push_back(i);
        ASSERT_EQ((*g)->inputs().size(), present.size()) << text;
        for (size_t i = 0; i < present.size(); ++i) {
          const Type& t = (*g)->inputs()[i]->output_info(0).type;
          EXPECT_EQ(t.StaticDims(), b.buffers[present[i]].dims) << text;
          EXPECT_EQ(t.dtype, b.buffers[present[i]].dtype) << text;
        }
        EXPECT_EQ((*g)->outputs().size(), s.outputs.size()) << text;
        EXPECT_EQ(PrintGraph(**g), text);
      }
      if (s.kernel == "copy") {
        ASSERT_EQ(s.inputs.size(), 1u);
        ASSERT_EQ(s.outputs.size(), 1u);
        EXPECT_EQ(b.buffers[s.inputs[0]].bytes, b.buffers[s.outputs[0]].bytes);
      }
    }
    // Every graph output is written by some step.
    EXPECT_EQ(outputs_written.size(), p.outputs.size());
  }
}

TEST(Compile, DefaultTwoByTwoProfile) {
  std::vector<std::string> lines;
  CompileOptions o = Profile2x2();
  o.progress = [&](std::string_view l) { lines.emplace_back(l); };
  absl::StatusOr<Plan> p = Compile(kDefault, o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->buckets.size(), 4u);
  const std::vector<std::map<std::string, int64_t>> want = {{{"batch", 1}, {"sequence", 8}},
                                                            {{"batch", 1}, {"sequence", 16}},
                                                            {{"batch", 2}, {"sequence", 8}},
                                                            {{"batch", 2}, {"sequence", 16}}};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p->buckets[i].bindings, want[i]);
  CheckContract(*p);

  EXPECT_EQ(p->target, PlanTarget::kCpu);
  EXPECT_EQ(p->manifest.kiln_version, std::string(Version()));
  EXPECT_EQ(p->compile_options, CompileOptionsString(o));
  ASSERT_EQ(p->inputs.size(), 3u);
  EXPECT_EQ(p->inputs[0].name, "input_ids");
  EXPECT_EQ(p->inputs[0].dims, (std::vector<Dim>{Dim::Symbol("batch"), Dim::Symbol("sequence")}));
  ASSERT_EQ(p->outputs.size(), 2u);
  EXPECT_EQ(p->outputs[0].name, "last_hidden_state");
  EXPECT_EQ(p->outputs[0].dims,
            (std::vector<Dim>{Dim::Symbol("batch"), Dim::Symbol("sequence"), Dim::Known(64)}));
  EXPECT_EQ(p->paddable_symbols, (std::vector<std::string>{"batch", "sequence"}));
  // Bucket dims are the bindings: the last hidden state of bucket 3 is [2,16,64].
  bool found = false;
  for (const PlanBuffer& b : p->buckets[3].buffers)
    if (b.kind == PlanBufferKind::kOutput && b.binding == 0) {
      EXPECT_EQ(b.dims, (std::vector<int64_t>{2, 16, 64}));
      found = true;
    }
  EXPECT_TRUE(found);

  // import, -O2, 4 buckets, weights.
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0].rfind("import: ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("-O2: ", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("attention 2"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].rfind("bucket 0 (1 of 4) batch=1 sequence=8: ", 0), 0u) << lines[2];
  EXPECT_EQ(lines[5].rfind("bucket 3 (4 of 4) batch=2 sequence=16: ", 0), 0u) << lines[5];
}

TEST(Compile, O2UsesOptimizedKernels) {
  absl::StatusOr<Plan> p = Compile(kDefault, Profile2x2(2));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::set<std::string> k = Kernels(*p);
  for (const char* want : {"linear", "attention", "skip_layer_norm", "embed_layer_norm"})
    EXPECT_TRUE(k.count(want)) << want;
  // Per bucket: 2 layers x (qkv, out, ffn1, ffn2) + pooler = 9 linear, 2 attention.
  int linear = 0, attention = 0;
  for (const PlanStep& s : p->buckets[0].steps) {
    linear += s.kernel == "linear";
    attention += s.kernel == "attention";
  }
  EXPECT_EQ(linear, 9);
  EXPECT_EQ(attention, 2);
}

TEST(Compile, O0IsAllRef) {
  absl::StatusOr<Plan> p = Compile(kDefault, Profile2x2(0));
  ASSERT_TRUE(p.ok()) << p.status();
  CheckContract(*p);
  // -O0 runs on the reference kernels only; the graph outputs are Identity nodes (aliases),
  // so they are filled by copy steps.
  EXPECT_EQ(Kernels(*p), (std::set<std::string>{"copy", "ref"}));
}

TEST(Compile, WeightsDeduplicatedAcrossBuckets) {
  CompileOptions one;
  one.profile = {{"batch", {2}}, {"sequence", {16}}};
  absl::StatusOr<Plan> p1 = Compile(kDefault, one);
  absl::StatusOr<Plan> p4 = Compile(kDefault, Profile2x2());
  ASSERT_TRUE(p1.ok()) << p1.status();
  ASSERT_TRUE(p4.ok()) << p4.status();
  ASSERT_EQ(p1->buckets.size(), 1u);
  EXPECT_EQ(p1->weights.size(), p4->weights.size());
  // The blob is one bucket's distinct weight bytes plus < 64 bytes of padding each.
  std::set<int64_t> offsets;
  int64_t unique_bytes = 0;
  for (const PlanBuffer& b : p1->buckets[0].buffers)
    if (b.kind == PlanBufferKind::kWeight && offsets.insert(b.offset).second)
      unique_bytes += b.bytes;
  EXPECT_GE(static_cast<int64_t>(p1->weights.size()), unique_bytes);
  EXPECT_LT(static_cast<int64_t>(p1->weights.size()),
            unique_bytes + 64 * static_cast<int64_t>(offsets.size()));
}

// int4 weights (MatMulNBits -> kiln.BlockQuantLinear) are stored two codes per byte: each
// block_quant_linear step's w is a u8 [n, ceil(k/2)] weight (the IR holds u4 one per byte),
// so the plan carries half a byte per weight, as the ONNX file does. (Its numerics: the
// generation tests run the same file end to end.)
TEST(Compile, Int4CodesAreStoredTwoPerByte) {
  CompileOptions o;
  o.symbols = {{"batch_size", 1},
               {"sequence_length", 4},
               {"past_sequence_length", 2},
               {"total_sequence_length", 6},
               {"kv_cache_dim", 16}};
  absl::StatusOr<Plan> plan =
      Compile(std::string(KILN_SOURCE_DIR) + "/models/fixtures/genai/qwen2_int4/model.onnx", o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  int steps = 0;
  for (const PlanStep& s : plan->buckets[0].steps) {
    if (s.kernel != "block_quant_linear") continue;
    ++steps;
    int64_t n = 0, k = 0;
    for (const PlanParam& p : s.params) {
      if (p.name == "n") n = std::get<int64_t>(p.value);
      if (p.name == "k") k = std::get<int64_t>(p.value);
    }
    const PlanBuffer& w = plan->buckets[0].buffers[s.inputs[1]];
    EXPECT_EQ(w.kind, PlanBufferKind::kWeight);
    EXPECT_EQ(w.dtype, DType::kU8);
    EXPECT_EQ(w.dims, (std::vector<int64_t>{n, (k + 1) / 2}));
    EXPECT_EQ(w.bytes, n * ((k + 1) / 2));
  }
  EXPECT_GT(steps, 0);
}

// An 8-bit MatMulNBits of a q4f16-style file (f16 A, scales and bias, u8 zero points) keeps
// its codes on both targets: one block_quant_linear step with bits = 8 whose w is the u8 [n,
// k] codes, f32 scales widened from the f16 ones exactly, u8 zero points; on the cpu the
// f16 edges are Casts (widen-fp16), on cuda the step takes the f16 activations. (Its
// numerics against onnxruntime: tests/e2e/test_ort_contrib_ops.py test_matmul_nbits.)
TEST(Compile, EightBitCodesWithHalfScalesStayEightBit) {
  const int64_t n = 6, k = 40, bs = 16, kb = 3;
  onnx::ModelProto m = testing::MakeModel(17);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  testing::AddInput(m, "a", onnx::TensorProto::FLOAT16, {"2", "40"});
  testing::AddOutput(m, "y", onnx::TensorProto::FLOAT16, {"2", "6"});
  auto add_init = [&](const std::string& name, int32_t type, std::vector<int64_t> dims,
                      std::string bytes) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::move(bytes));
  };
  std::string codes(static_cast<size_t>(n * kb * bs), '\0'), zps(static_cast<size_t>(n * kb), '\0');
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<char>((i * 37 + 11) % 256);
  for (size_t i = 0; i < zps.size(); ++i) zps[i] = static_cast<char>(100 + i);
  std::vector<uint16_t> scales(static_cast<size_t>(n * kb)), bias(static_cast<size_t>(n));
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = FloatToHalf(0.01f * (1 + i));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = FloatToHalf(0.5f - 0.1f * i);
  auto half_bytes = [](const std::vector<uint16_t>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
  };
  add_init("B", onnx::TensorProto::UINT8, {n, kb, bs}, codes);
  add_init("scales", onnx::TensorProto::FLOAT16, {n * kb}, half_bytes(scales));
  add_init("zp", onnx::TensorProto::UINT8, {n * kb}, zps);
  add_init("bias", onnx::TensorProto::FLOAT16, {n}, half_bytes(bias));
  auto* node = testing::AddNode(m, "MatMulNBits", {"a", "B", "scales", "zp", "", "bias"}, {"y"});
  node->set_domain("com.microsoft");
  testing::AttrInt(node, "K", k);
  testing::AttrInt(node, "N", n);
  testing::AttrInt(node, "bits", 8);
  testing::AttrInt(node, "block_size", bs);
  std::filesystem::create_directories(KILN_TEST_TMPDIR);
  const std::string path = std::string(KILN_TEST_TMPDIR) + "/nbits8_f16.onnx";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(m.SerializeToOstream(&out));
  }
  for (const PlanTarget target : {PlanTarget::kCpu, PlanTarget::kCuda}) {
    SCOPED_TRACE(target == PlanTarget::kCpu ? "cpu" : "cuda");
    CompileOptions o;
    o.target = target;
    absl::StatusOr<Plan> plan = Compile(path, o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const PlanBucket& b = plan->buckets[0];
    // cpu: widen-fp16's Casts at the f16 edges around an f32 GEMM; cuda: the GEMM on the
    // model's own f16 activations.
    const bool cpu = target == PlanTarget::kCpu;
    ASSERT_EQ(b.steps.size(), cpu ? 3u : 1u);
    const PlanStep& st = b.steps[cpu ? 1 : 0];
    ASSERT_EQ(st.kernel, "block_quant_linear");
    int64_t bits = 0;
    for (const PlanParam& p : st.params)
      if (p.name == "bits") bits = std::get<int64_t>(p.value);
    EXPECT_EQ(bits, 8);
    const PlanBuffer &x = b.buffers[st.inputs[0]], &w = b.buffers[st.inputs[1]],
                     &sc = b.buffers[st.inputs[2]], &zp = b.buffers[st.inputs[3]];
    EXPECT_EQ(x.dtype, cpu ? DType::kF32 : DType::kF16);
    EXPECT_EQ(w.dtype, DType::kU8);
    EXPECT_EQ(w.dims, (std::vector<int64_t>{n, k}));
    EXPECT_EQ(zp.dtype, DType::kU8);
    EXPECT_EQ(zp.dims, (std::vector<int64_t>{n, kb}));
    ASSERT_EQ(sc.dtype, DType::kF32);
    const auto* wp = plan->weights.data() + w.offset;
    for (int64_t j = 0; j < n; ++j)  // row j: its first k of the kb · bs codes
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(wp[j * k + i], static_cast<uint8_t>(codes[j * kb * bs + i])) << j << "," << i;
    const auto* sp = reinterpret_cast<const float*>(plan->weights.data() + sc.offset);
    for (int64_t i = 0; i < n * kb; ++i) EXPECT_EQ(sp[i], HalfToFloat(scales[i])) << i;
  }
}

TEST(Compile, DeterministicAndRoundTrips) {
  absl::StatusOr<Plan> a = Compile(kDefault, Profile2x2());
  absl::StatusOr<Plan> b = Compile(kDefault, Profile2x2());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::string> sa = SerializePlan(*a);
  absl::StatusOr<std::string> sb = SerializePlan(*b);
  ASSERT_TRUE(sa.ok()) << sa.status();
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_TRUE(*sa == *sb);
  absl::StatusOr<Plan> back = ParsePlan(*sa);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == *a);
}

TEST(Compile, StaticShapeGivesOneBucket) {
  CompileOptions o;
  o.symbols = {{"batch", 1}, {"sequence", 8}};
  absl::StatusOr<Plan> p = Compile(kDefault, o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->buckets.size(), 1u);
  EXPECT_TRUE(p->buckets[0].bindings.empty());
  EXPECT_EQ(p->inputs[0].dims, (std::vector<Dim>{Dim::Known(1), Dim::Known(8)}));
  EXPECT_TRUE(p->paddable_symbols.empty());
  CheckContract(*p);
}

TEST(Compile, InputShapesBindSymbols) {
  CompileOptions o;
  o.input_shapes = {{"input_ids", {2, 5}}};
  absl::StatusOr<Plan> p = Compile(kDefault, o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->buckets.size(), 1u);
  for (const PlanTensorSig& in : p->inputs)
    EXPECT_EQ(in.dims, (std::vector<Dim>{Dim::Known(2), Dim::Known(5)})) << in.name;
  EXPECT_NE(p->compile_options.find("shapes={input_ids=2x5}"), std::string::npos)
      << p->compile_options;
  CheckContract(*p);
}

TEST(Compile, EveryFixtureLowers) {
  std::vector<std::string> models;
  for (const char* dir : {"/models/fixtures", "/models/fixtures/variants",
                          "/models/fixtures/decoder", "/models/fixtures/torch"})
    for (const auto& e : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + dir))
      if (e.path().extension() == ".onnx") models.push_back(e.path().string());
  std::sort(models.begin(), models.end());
  ASSERT_GE(models.size(), 10u);
  for (const std::string& m : models) {
    SCOPED_TRACE(m);
    CompileOptions o;
    o.profile = {{"batch", {1, 2}}, {"sequence", {7}}};
    absl::StatusOr<Plan> p = Compile(m, o);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->buckets.size(), 2u);
    CheckContract(*p);
    EXPECT_TRUE(SerializePlan(*p).ok());
  }
}

TEST(CompileOptionsString, CanonicalAndComplete) {
  CompileOptions a, b;
  a.profile = {{"sequence", {128, 32, 32}}, {"batch", {8, 1}}};
  b.profile = {{"batch", {1, 8}}, {"sequence", {32, 128}}};
  a.disabled_passes = {"fuse-gelu", "cse"};
  b.disabled_passes = {"cse", "fuse-gelu", "cse"};
  a.progress = [](std::string_view) {};
  EXPECT_EQ(CompileOptionsString(a), CompileOptionsString(b));
  EXPECT_EQ(CompileOptionsString(b),
            "target=cpu opt_level=2 precision=fp32 shapes={} symbols={} "
            "profile={batch=1:8,sequence=32:128} disabled_passes={cse,fuse-gelu}");
  b.opt_level = 1;
  EXPECT_NE(CompileOptionsString(a), CompileOptionsString(b));
}

void ExpectError(const CompileOptions& o, absl::StatusCode code,
                 const std::vector<std::string>& fragments, const std::string& model = kDefault) {
  absl::StatusOr<Plan> p = Compile(model, o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), code) << p.status();
  for (const std::string& f : fragments)
    EXPECT_NE(p.status().message().find(f), std::string::npos) << p.status() << " lacks " << f;
}

// Writes IR text as an ONNX model (through the exporter) and returns its path.
std::string WriteModel(const std::string& name, const std::string& ir) {
  auto g = ParseGraph(ir);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return "";
  std::filesystem::create_directories(KILN_TEST_TMPDIR);
  const std::string path = std::string(KILN_TEST_TMPDIR) + "/" + name + ".onnx";
  absl::Status s = ExportOnnxFile(**g, path);
  EXPECT_TRUE(s.ok()) << s;
  return path;
}

int CountKind(const PlanBucket& b, PlanBufferKind kind) {
  return static_cast<int>(std::count_if(b.buffers.begin(), b.buffers.end(),
                                        [&](const PlanBuffer& x) { return x.kind == kind; }));
}

// Graph outputs no step can write directly get copy steps: an input, a constant, an alias
// (Reshape) and a value already bound to another output.
TEST(CompileLowering, OutputsThatNeedCopies) {
  const std::string path = WriteModel("copies", R"(
graph copies opset=21 {
  %0 = Input() : f32[batch,4] "x"
  %1 = Constant() {value=tensor<f32[4]>[1.0, 2.0, 3.0, 4.0]} : f32[4] "c"
  %2 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "flat_shape"
  %3 = Add(%0, %1) : f32[batch,4] "sum"
  %4 = Reshape(%3, %2) : f32[?] "flat"
  return "x_out": %0, "sum": %3, "flat": %4, "c_out": %1, "sum_again": %3
}
)");
  CompileOptions o;
  o.profile = {{"batch", {3}}};
  absl::StatusOr<Plan> p = Compile(path, o);
  ASSERT_TRUE(p.ok()) << p.status();
  CheckContract(*p);
  ASSERT_EQ(p->buckets.size(), 1u);
  const PlanBucket& b = p->buckets[0];
  ASSERT_EQ(b.steps.size(), 5u);
  EXPECT_EQ(b.steps[0].kernel, "eltwise");  // the Add
  for (int i = 1; i < 5; ++i) EXPECT_EQ(b.steps[i].kernel, "copy") << i;
  EXPECT_EQ(b.buffers[b.steps[1].inputs[0]].kind, PlanBufferKind::kInput);   // x_out
  EXPECT_EQ(b.buffers[b.steps[3].inputs[0]].kind, PlanBufferKind::kWeight);  // c_out
  EXPECT_EQ(b.steps[4].inputs[0], b.steps[0].outputs[0]);                    // sum_again
  // Five bindings plus "flat" before its copy: an alias over output 1 ("sum").
  EXPECT_EQ(CountKind(b, PlanBufferKind::kOutput), 6);
  const PlanBuffer& flat_src = b.buffers[b.steps[2].inputs[0]];
  EXPECT_EQ(flat_src.kind, PlanBufferKind::kOutput);
  EXPECT_EQ(flat_src.binding, 1);
  EXPECT_EQ(flat_src.dims, std::vector<int64_t>{12});
  EXPECT_EQ(CountKind(b, PlanBufferKind::kArena), 0);  // the sum is written to "sum" itself
  // "flat" is [4*batch]: an expression, so batch is not paddable (and has no mask input).
  ASSERT_EQ(p->outputs.size(), 5u);
  EXPECT_EQ(p->outputs[2].dims, std::vector<Dim>{Dim::Symbol("4*batch")});
  EXPECT_TRUE(p->paddable_symbols.empty());
  for (const PlanBuffer& buf : b.buffers)
    if (buf.kind == PlanBufferKind::kOutput && buf.binding == 2)
      EXPECT_EQ(buf.dims, std::vector<int64_t>{12});
}

// ONNX LayerNormalization / Gelu / Softmax get the optimized kernels when they meet the
// contract's rules (softmax over the last axis only) and share storage in place.
TEST(CompileLowering, OnnxOpsKernelsAndInPlace) {
  const std::string path = WriteModel("onnx_ops", R"(
graph onnx_ops opset=21 {
  %0 = Input() : f32[batch,3,8] "x"
  %1 = Constant() {value=tensor<f32[8]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]} : f32[8] "g"
  %2 = Constant() {value=tensor<f32[8]>[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25]} : f32[8] "b"
  %3 = LayerNormalization(%0, %1, %2) {axis=-1, epsilon=0.001} : f32[batch,3,8] "ln"
  %4 = Gelu(%3) {approximate="tanh"} : f32[batch,3,8] "ge"
  %5 = Softmax(%4) {axis=-1} : f32[batch,3,8] "sm"
  %6 = Softmax(%5) {axis=1} : f32[batch,3,8] "sm1"
  return "y": %6
}
)");
  CompileOptions o;
  o.profile = {{"batch", {2}}};
  absl::StatusOr<Plan> p = Compile(path, o);
  ASSERT_TRUE(p.ok()) << p.status();
  CheckContract(*p);
  const PlanBucket& b = p->buckets[0];
  ASSERT_EQ(b.steps.size(), 4u);
  EXPECT_EQ(b.steps[0].kernel, "layer_norm");
  EXPECT_EQ(b.steps[1].kernel, "gelu");
  EXPECT_EQ(b.steps[2].kernel, "softmax");
  EXPECT_EQ(b.steps[3].kernel, "ref");  // softmax over axis 1 of 3
  EXPECT_EQ(b.steps[0].params,
            (std::vector<PlanParam>{
                {"rows", int64_t{6}}, {"h", int64_t{8}}, {"epsilon", double{0.001f}}}));
  EXPECT_EQ(b.steps[1].params, (std::vector<PlanParam>{{"n", int64_t{48}}, {"tanh", int64_t{1}}}));
  EXPECT_EQ(b.steps[2].params, (std::vector<PlanParam>{{"rows", int64_t{6}}, {"n", int64_t{8}}}));
  // gelu and softmax write over their input (last use, same size).
  const int ln = b.steps[0].outputs[0], ge = b.steps[1].outputs[0], sm = b.steps[2].outputs[0];
  EXPECT_EQ(b.buffers[ln].kind, PlanBufferKind::kArena);
  EXPECT_EQ(b.buffers[ge].offset, b.buffers[ln].offset);
  EXPECT_EQ(b.buffers[sm].offset, b.buffers[ln].offset);
  // The ln -> gelu -> softmax chain is one 192-byte buffer; the ref softmax writes "y".
  EXPECT_EQ(b.arena_bytes, 2 * 3 * 8 * 4);
  EXPECT_EQ(b.buffers[b.steps[3].outputs[0]].kind, PlanBufferKind::kOutput);
  // The batch case: batch is dim 0 of every input and output.
  EXPECT_EQ(p->paddable_symbols, std::vector<std::string>{"batch"});
}

TEST(CompileLowering, DataDependentShapeIsAnError) {
  const std::string path = WriteModel("nonzero", R"(
graph nonzero opset=21 {
  %0 = Input() : f32[4] "x"
  %1 = NonZero(%0) : i64[1,?] "nz" @ "my_nonzero"
  return "y": %1
}
)");
  ExpectError(CompileOptions{}, absl::StatusCode::kInvalidArgument,
              {"my_nonzero", "NonZero", "not static"}, path);
}

TEST(CompileErrors, MissingFile) {
  ExpectError(Profile2x2(), absl::StatusCode::kNotFound, {"/no/such/model.onnx"},
              "/no/such/model.onnx");
}

TEST(CompileErrors, UnboundSymbol) {
  CompileOptions o;
  o.profile = {{"sequence", {8}}};
  ExpectError(o, absl::StatusCode::kInvalidArgument,
              {"graph input 'input_ids'", "'batch'", "--shape batch=N", "--profile batch=a:b"});
}

TEST(CompileErrors, UnknownProfileSymbol) {
  CompileOptions o = Profile2x2();
  o.profile["heads"] = {4};
  ExpectError(o, absl::StatusCode::kInvalidArgument,
              {"--profile names symbol 'heads'", "symbols: batch, sequence"});
}

TEST(CompileErrors, BadOptions) {
  CompileOptions cuda_o0 = Profile2x2();
  cuda_o0.target = PlanTarget::kCuda;
  cuda_o0.opt_level = 0;
  ExpectError(cuda_o0, absl::StatusCode::kInvalidArgument, {"a cuda plan needs -O1 or higher"});
  CompileOptions fp16 = Profile2x2();
  fp16.precision = "fp16";
  ExpectError(fp16, absl::StatusCode::kUnimplemented,
              {"precision 'fp16' is not supported by the cpu target", "use bf16 or int8"});
  CompileOptions cuda_groups = Profile2x2();  // cuda int8 has no GEMM-group fallbacks
  cuda_groups.target = PlanTarget::kCuda;
  cuda_groups.precision = "int8";
  cuda_groups.gemm_group_precision = {{"attention", "fp32"}};
  ExpectError(cuda_groups, absl::StatusCode::kInvalidArgument,
              {"GEMM group precisions apply to cpu int8 and bf16 plans only"});
  CompileOptions fp8 = Profile2x2();
  fp8.precision = "fp8";
  ExpectError(fp8, absl::StatusCode::kInvalidArgument, {"unknown precision 'fp8'"});
  CompileOptions sms = Profile2x2();
  sms.cuda_sms = {90};
  ExpectError(sms, absl::StatusCode::kInvalidArgument, {"CUDA architectures given for a cpu plan"});
  CompileOptions sm7 = Profile2x2();
  sm7.target = PlanTarget::kCuda;
  sm7.cuda_sms = {7};
  ExpectError(sm7, absl::StatusCode::kInvalidArgument, {"sm_7 is not one kiln knows"});
  CompileOptions o7 = Profile2x2();
  o7.opt_level = 7;
  ExpectError(o7, absl::StatusCode::kInvalidArgument, {"opt level 7"});
  CompileOptions zero = Profile2x2();
  zero.profile["batch"] = {0, 1};
  ExpectError(zero, absl::StatusCode::kInvalidArgument, {"--profile batch", "must be > 0"});
  CompileOptions both = Profile2x2();
  both.symbols["batch"] = 1;
  ExpectError(both, absl::StatusCode::kInvalidArgument, {"'batch'", "both"});
}

}  // namespace
}  // namespace kiln
