// The CUDA executor end to end, where a GPU answers (each test skips with the reason
// otherwise): every fixture's cuda plan against the CPU executor's plan of the same model
// on the same inputs (fp32: max |diff| <= 1e-4, the CPU plans' own tolerance against
// onnxruntime; fp16 / bf16: cosine >= 0.9999 / 0.999 per output and the max |diff| bounds
// the reference-executor test of the precision pass measured, with margin); padding
// (a profile plan run at a smaller shape equals the exact-bucket run on the real rows);
// inputs and outputs in device memory give the same bytes as host memory; CUDA graph
// replays are bit-identical to step-by-step launches; 4 threads x 100 runs on one executor
// are bit-identical to one thread; an out-of-range token id fails the run naming the step;
// traces have one event per step; packed programs (tokens profile) against padded runs, and
// their lengths checks.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include <cuda_runtime_api.h>

#include "gmock/gmock.h"
#include "kernels/cuda/packed.h"
#include "tests/runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

bool NoGpu(std::string* why) {
  const CudaDeviceInfo d = QueryCudaDevice(0);
  if (!d.available) *why = d.reason;
  return !d.available;
}

#define SKIP_WITHOUT_GPU()                                \
  do {                                                    \
    std::string why_;                                     \
    if (NoGpu(&why_)) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)

std::string Fixture(const std::string& rel) {
  return std::string(KILN_SOURCE_DIR) + "/models/fixtures/" + rel;
}

std::shared_ptr<const Plan> CompileFor(const std::string& model, PlanTarget t,
                                       const std::string& precision,
                                       std::map<std::string, std::vector<int64_t>> profile) {
  CompileOptions o;
  o.target = t;
  o.precision = precision;
  o.profile = std::move(profile);
  absl::StatusOr<Plan> p = Compile(model, o);
  EXPECT_TRUE(p.ok()) << model << ": " << p.status();
  return p.ok() ? std::make_shared<const Plan>(*std::move(p)) : nullptr;
}

// Seeded inputs for a plan's signature at `values`: ids in [0, 50), masks with trailing
// zeros per row (row r keeps S - r positions), token types 0/1, floats in [-1, 1].
std::vector<Tensor> Inputs(const Plan& p, const std::map<std::string, int64_t>& values,
                           uint32_t seed) {
  std::vector<Tensor> out;
  std::mt19937 gen(seed);
  for (const PlanTensorSig& sig : p.inputs) {
    std::vector<int64_t> dims;
    for (const Dim& d : sig.dims) dims.push_back(d.is_known() ? d.value() : values.at(d.symbol()));
    Tensor t(sig.dtype, dims);
    const bool mask = sig.name.find("mask") != std::string::npos;
    const bool types = sig.name.find("type") != std::string::npos;
    const int64_t row = dims.empty() ? 1 : dims.back();
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      if (IsFloat(sig.dtype)) {
        t.SetFromDouble(i, std::uniform_real_distribution<double>(-1, 1)(gen));
      } else if (mask) {
        const int64_t r = i / std::max<int64_t>(row, 1), c = i % std::max<int64_t>(row, 1);
        t.SetFromDouble(i, c < std::max<int64_t>(1, row - r) ? 1 : 0);
      } else {
        t.SetFromDouble(i, types ? gen() % 2 : gen() % 50);
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TensorView> Views(const std::vector<Tensor>& ts) {
  std::vector<TensorView> v;
  for (const Tensor& t : ts) v.push_back(View(t));
  return v;
}

struct Diff {
  double max_abs = 0, min_cos = 1;
};
Diff Compare(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  Diff d;
  EXPECT_EQ(a.size(), b.size());
  for (size_t o = 0; o < std::min(a.size(), b.size()); ++o) {
    EXPECT_EQ(a[o].dims(), b[o].dims());
    if (a[o].dims() != b[o].dims() || !IsFloat(a[o].dtype())) continue;
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < a[o].NumElements(); ++i) {
      const double x = a[o].GetAsDouble(i), y = b[o].GetAsDouble(i);
      d.max_abs = std::max(d.max_abs, std::fabs(x - y));
      dot += x * y, na += x * x, nb += y * y;
    }
    if (na > 0 && nb > 0) d.min_cos = std::min(d.min_cos, dot / std::sqrt(na * nb));
  }
  return d;
}

bool SameBytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].NumBytes() != b[i].NumBytes() ||
        std::memcmp(a[i].raw(), b[i].raw(), a[i].NumBytes()) != 0)
      return false;
  return true;
}

TEST(CudaExecutor, FixturesMatchTheCpuExecutor) {
  SKIP_WITHOUT_GPU();
  const std::map<std::string, std::vector<int64_t>> shape = {{"batch", {2}}, {"sequence", {16}}};
  const std::map<std::string, int64_t> values = {{"batch", 2}, {"sequence", 16}};
  int models = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(Fixture(""))) {
    if (e.path().extension() != ".onnx") continue;
    // Refused by the cuda compile, naming the node (tests/compiler/compile_cuda_test.cc):
    // the image towers (Conv) and the onnxruntime-genai files (their cache update).
    if (e.path().parent_path().filename() == "vision" ||
        e.path().parent_path().parent_path().filename() == "genai")
      continue;
    const std::string model = e.path().string();
    // The KV-cache decoders: 5 cached positions (their mask covers past + sequence).
    const bool kv = e.path().parent_path().filename() == "kv";
    auto model_shape = shape;
    auto model_values = values;
    if (kv) {
      model_shape.insert({{"past_sequence", {5}}, {"total_sequence", {21}}});
      model_values.insert({{"past_sequence", 5}, {"total_sequence", 21}});
    }
    auto cpu_plan = CompileFor(model, PlanTarget::kCpu, "fp32", model_shape);
    ASSERT_TRUE(cpu_plan);
    auto cpu = Executor::Create(cpu_plan);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const std::vector<Tensor> in = Inputs(*cpu_plan, model_values, 5);
    auto want = (*cpu)->Run(Views(in));
    ASSERT_TRUE(want.ok()) << model << ": " << want.status();
    for (const auto& [precision, max_abs, min_cos] :
         {std::tuple{"fp32", 1e-4, 0.999999}, std::tuple{"fp16", 3e-2, 0.9999},
          std::tuple{"bf16", 2e-1, 0.999}}) {
      SCOPED_TRACE(model + " at " + precision);
      auto plan = CompileFor(model, PlanTarget::kCuda, precision, model_shape);
      ASSERT_TRUE(plan);
      auto gpu = Executor::Create(plan);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      auto got = (*gpu)->Run(Views(in));
      ASSERT_TRUE(got.ok()) << got.status();
      const Diff d = Compare(*got, *want);
      EXPECT_LE(d.max_abs, max_abs);
      EXPECT_GE(d.min_cos, min_cos);
      std::printf("%-60s %s max |diff| %.3g, min cosine %.7f\n", model.c_str(), precision,
                  d.max_abs, d.min_cos);
    }
    ++models;
  }
  EXPECT_GE(models, 31);
}

TEST(CudaExecutor, PaddedRunsMatchExactRunsOnTheRealRows) {
  SKIP_WITHOUT_GPU();
  const std::string model = Fixture("variants/st_mean_tiny_opset14.onnx");
  auto profile =
      CompileFor(model, PlanTarget::kCuda, "fp32", {{"batch", {1, 4}}, {"sequence", {8, 32}}});
  auto exact = CompileFor(model, PlanTarget::kCuda, "fp32", {{"batch", {3}}, {"sequence", {20}}});
  ASSERT_TRUE(profile && exact);
  auto ep = Executor::Create(profile), ee = Executor::Create(exact);
  ASSERT_TRUE(ep.ok() && ee.ok()) << ep.status() << ee.status();
  const std::vector<Tensor> in = Inputs(*exact, {{"batch", 3}, {"sequence", 20}}, 9);
  RunStats stats;
  auto padded = (*ep)->Run(Views(in), &stats);
  auto want = (*ee)->Run(Views(in));
  ASSERT_TRUE(padded.ok() && want.ok()) << padded.status() << want.status();
  EXPECT_TRUE(stats.padded);
  EXPECT_LE(Compare(*padded, *want).max_abs, 1e-5);
}

TEST(CudaExecutor, DeviceMemoryIoGraphsAndThreadsAreBitIdentical) {
  SKIP_WITHOUT_GPU();
  const std::string model = Fixture("torch/bert_dynamo_sdpa.onnx");
  auto plan = CompileFor(model, PlanTarget::kCuda, "fp16", {{"batch", {1, 2}}, {"sequence", {16}}});
  ASSERT_TRUE(plan);
  auto with_graphs = Executor::Create(plan);
  auto no_graphs = Executor::Create(plan, {.cuda_graphs = false});
  ASSERT_TRUE(with_graphs.ok() && no_graphs.ok());
  const std::vector<Tensor> in = Inputs(*plan, {{"batch", 2}, {"sequence", 16}}, 3);
  auto host = (*with_graphs)->Run(Views(in));
  auto plain = (*no_graphs)->Run(Views(in));
  ASSERT_TRUE(host.ok() && plain.ok());
  EXPECT_TRUE(SameBytes(*host, *plain)) << "graph replay differs from step launches";
  // The same run with every input and output in device memory, on the caller's stream.
  std::vector<void*> dev_in, dev_out;
  std::vector<TensorView> vin;
  std::vector<MutableTensorView> vout;
  for (const Tensor& t : in) {
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, std::max<size_t>(t.NumBytes(), 1)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(p, t.raw(), t.NumBytes(), cudaMemcpyHostToDevice), cudaSuccess);
    dev_in.push_back(p);
    vin.push_back({t.dtype(), t.dims(), p, MemoryKind::kCuda});
  }
  for (const Tensor& t : *host) {
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, std::max<size_t>(t.NumBytes(), 1)), cudaSuccess);
    dev_out.push_back(p);
    vout.push_back({t.dtype(), t.dims(), p, MemoryKind::kCuda});
  }
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_TRUE((*with_graphs)->Run(vin, vout, nullptr, {.cuda_stream = stream}).ok());
  std::vector<Tensor> back;
  for (size_t o = 0; o < host->size(); ++o) {
    Tensor t((*host)[o].dtype(), (*host)[o].dims());
    ASSERT_EQ(cudaMemcpy(t.raw(), dev_out[o], t.NumBytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    back.push_back(std::move(t));
  }
  EXPECT_TRUE(SameBytes(back, *host)) << "device-memory I/O differs from host I/O";
  cudaStreamDestroy(stream);
  for (void* p : dev_in) cudaFree(p);
  for (void* p : dev_out) cudaFree(p);
  // 4 threads x 100 runs on one executor, each bit-identical to the single-threaded run.
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < 100; ++r) {
        auto out = (*with_graphs)->Run(Views(in));
        if (!out.ok())
          ++failures;
        else if (!SameBytes(*out, *host))
          ++mismatches;
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(CudaExecutor, OutOfRangeTokenIdFailsNamingTheStep) {
  SKIP_WITHOUT_GPU();
  auto plan = CompileFor(Fixture("default.onnx"), PlanTarget::kCuda, "fp32",
                         {{"batch", {1}}, {"sequence", {8}}});
  ASSERT_TRUE(plan);
  auto exec = Executor::Create(plan);
  ASSERT_TRUE(exec.ok());
  std::vector<Tensor> in = Inputs(*plan, {{"batch", 1}, {"sequence", 8}}, 1);
  in[0].SetFromDouble(3, 1e6);  // input_ids: far past the vocabulary
  auto out = (*exec)->Run(Views(in));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("embed_layer_norm"));
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("outside its embedding"));
  // The executor is still usable.
  in[0].SetFromDouble(3, 5);
  EXPECT_TRUE((*exec)->Run(Views(in)).ok());
}

// Padded host inputs for `lengths` (mask rows prefixes of ones) over a plan's model
// signature at sequence `seq`: ids in [0, 50), token types 0/1.
std::vector<Tensor> PaddedBatch(const Plan& p, const std::vector<int64_t>& lengths, int64_t seq,
                                uint32_t seed) {
  const int64_t batch = static_cast<int64_t>(lengths.size());
  std::vector<Tensor> in = Inputs(p, {{"batch", batch}, {"sequence", seq}}, seed);
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (p.inputs[i].name.find("mask") != std::string::npos)
      for (int64_t e = 0; e < in[i].NumElements(); ++e)
        in[i].SetFromDouble(e, e % seq < lengths[e / seq] ? 1 : 0);
  return in;
}

// Packed programs (docs/packing.md) on the GPU: a plan with a tokens profile packs padded
// host inputs (RunStats::packed; 49 tokens over buckets of 16 and 32 take several packed
// calls) and gives the padded buckets' outputs on the real positions, zeros at the padding.
// fp32 within 1e-5: the same kernels per row, only the GEMM algorithm cuBLASLt picks per M
// and the attention kernel's key tiling differ; fp16 within 2e-2 and cosine 0.9999: the
// same differences rounded to 16-bit activations after every GEMM.
TEST(CudaExecutor, PackedRunsMatchPaddedRunsOnTheRealPositions) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t kSeq = 16;
  for (const char* fixture : {"variants/st_mean_tiny_opset14.onnx", "bert_tiny_opset14_pooler.onnx",
                              "torch/bert_dynamo_sdpa.onnx", "variants/roberta_tiny_opset17.onnx"})
    for (const auto& [precision, max_abs, min_cos] :
         {std::tuple{"fp32", 1e-5, 0.999999}, std::tuple{"fp16", 2e-2, 0.9999}}) {
      SCOPED_TRACE(std::string(fixture) + " at " + precision);
      auto plan = CompileFor(Fixture(fixture), PlanTarget::kCuda, precision,
                             {{"batch", {1, 4}}, {"sequence", {8, kSeq}}, {"tokens", {16, 32}}});
      ASSERT_TRUE(plan);
      ASSERT_TRUE(HasProgram(*plan, PlanProgram::kPacked));
      auto exec = Executor::Create(plan);
      ASSERT_TRUE(exec.ok()) << exec.status();
      for (const std::vector<int64_t>& lengths :
           {std::vector<int64_t>{16, 1, 9, 5}, {16, 16, 16, 1}, {3}}) {
        const std::vector<Tensor> in = PaddedBatch(*plan, lengths, kSeq, 11);
        RunStats packed_stats, padded_stats;
        RunOptions no_pack;
        no_pack.pack = false;
        auto packed = (*exec)->Run(Views(in), &packed_stats);
        auto padded = (*exec)->Run(Views(in), &padded_stats, no_pack);
        ASSERT_TRUE(packed.ok() && padded.ok()) << packed.status() << padded.status();
        EXPECT_TRUE(packed_stats.packed);
        EXPECT_FALSE(padded_stats.packed);
        // Per-token outputs [B, S, ...]: padding positions are zeros in the packed run and
        // excluded from the comparison (the padded program computes something there).
        std::vector<Tensor> a = *std::move(packed), b = *std::move(padded);
        for (size_t o = 0; o < a.size(); ++o) {
          const std::vector<int64_t>& d = a[o].dims();
          if (d.size() < 3 || d[1] != kSeq || !IsFloat(a[o].dtype())) continue;
          const int64_t row = a[o].NumElements() / (d[0] * d[1]);
          for (int64_t e = 0; e < a[o].NumElements(); ++e)
            if ((e / row) % kSeq >= lengths[e / row / kSeq]) {
              EXPECT_EQ(a[o].GetAsDouble(e), 0.0) << "output " << o << " padding element " << e;
              b[o].SetFromDouble(e, 0.0);
            }
        }
        const Diff diff = Compare(a, b);
        EXPECT_LE(diff.max_abs, max_abs);
        EXPECT_GE(diff.min_cos, min_cos);
      }
    }
}

// Direct runs of the packed program: lengths that do not add up to the tokens given are
// refused with the numbers, from host memory and from device memory (read back first).
TEST(CudaExecutor, PackedLengthsAreChecked) {
  SKIP_WITHOUT_GPU();
  auto plan = CompileFor(Fixture("variants/st_mean_tiny_opset14.onnx"), PlanTarget::kCuda, "fp32",
                         {{"batch", {2}}, {"sequence", {8}}, {"tokens", {16}}});
  ASSERT_TRUE(plan);
  auto exec = Executor::Create(plan);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const PlanIo io = IoOf(*plan, PlanProgram::kPacked);
  std::vector<Tensor> in;
  for (const PlanTensorSig& sig : io.inputs)
    in.push_back(sig.name == "sequence_lengths"
                     ? Tensor::FromI64({2}, {5, 11})
                     : Tensor::FromI64({16}, std::vector<int64_t>(16, 1)));
  RunOptions o;
  o.program = PlanProgram::kPacked;
  ASSERT_TRUE((*exec)->Run(Views(in), nullptr, o).ok());
  for (size_t i = 0; i < io.inputs.size(); ++i)
    if (io.inputs[i].name == "sequence_lengths") in[i].data<int64_t>()[1] = -11;
  auto host = (*exec)->Run(Views(in), nullptr, o);
  EXPECT_EQ(host.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(host.status().message()), ::testing::HasSubstr("sequence_lengths[1]"));
  std::vector<void*> dev;
  std::vector<TensorView> vin;
  for (const Tensor& t : in) {
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, std::max<size_t>(t.NumBytes(), 1)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(p, t.raw(), t.NumBytes(), cudaMemcpyHostToDevice), cudaSuccess);
    dev.push_back(p);
    vin.push_back({t.dtype(), t.dims(), p, MemoryKind::kCuda});
  }
  auto device = (*exec)->Run(vin, nullptr, o);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(device.status().message()), ::testing::HasSubstr("sequence_lengths[1]"));
  for (void* p : dev) cudaFree(p);
  // The executor is still usable.
  for (size_t i = 0; i < io.inputs.size(); ++i)
    if (io.inputs[i].name == "sequence_lengths") in[i].data<int64_t>()[1] = 11;
  EXPECT_TRUE((*exec)->Run(Views(in), nullptr, o).ok());
}

// The packed steps' own check (kernels/cuda/packed.h), behind the executor's: bad lengths
// record the step's error code and give all-zero offsets with every row zero-filled; good
// ones give the prefix offsets, zero only the rows of no sequence, and positions.
TEST(CudaPackedKernels, SegmentsCheckTheLengthsAndZeroTheRowsOfNoSequence) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t kT = 8, kRow = 6;  // 6-byte rows: the byte-wise fill
  int64_t* lengths = nullptr;
  int32_t* cu = nullptr;
  uint32_t* err = nullptr;
  unsigned char* rows = nullptr;
  int64_t* pos = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&lengths), 3 * sizeof(int64_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&cu), 4 * sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&err), sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&rows), kT * kRow), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&pos), kT * sizeof(int64_t)), cudaSuccess);
  for (const std::vector<int64_t>& l :
       {std::vector<int64_t>{5, -1, 3}, std::vector<int64_t>{4, 4, 1}, {2, 0, 3}}) {
    const bool bad = l[1] < 0 || l[0] + l[1] + l[2] > kT;
    ASSERT_EQ(cudaMemcpy(lengths, l.data(), 3 * sizeof(int64_t), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemset(err, 0, sizeof(uint32_t)), cudaSuccess);
    ASSERT_EQ(cudaMemset(rows, 0x7f, kT * kRow), cudaSuccess);
    cuda::PackedSegmentsArgs a;
    a.lengths = lengths;
    a.sequences = 3;
    a.tokens = kT;
    a.cu = cu;
    a.zero = rows;
    a.zero_row_bytes = kRow;
    a.err = {err, 5};
    ASSERT_EQ(cuda::PackedSegments(a, nullptr), cudaSuccess);
    cuda::PackedPositionsArgs p{cu, 3, kT, pos};
    ASSERT_EQ(cuda::PackedPositions(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    uint32_t code = 0;
    std::vector<int32_t> got_cu(4);
    std::vector<unsigned char> got_rows(kT * kRow);
    std::vector<int64_t> got_pos(kT);
    cudaMemcpy(&code, err, sizeof(code), cudaMemcpyDeviceToHost);
    cudaMemcpy(got_cu.data(), cu, 4 * sizeof(int32_t), cudaMemcpyDeviceToHost);
    cudaMemcpy(got_rows.data(), rows, kT * kRow, cudaMemcpyDeviceToHost);
    cudaMemcpy(got_pos.data(), pos, kT * sizeof(int64_t), cudaMemcpyDeviceToHost);
    const int64_t used = bad ? 0 : l[0] + l[1] + l[2];
    EXPECT_EQ(code, bad ? 5u : 0u);
    const std::vector<int32_t> want_cu =
        bad ? std::vector<int32_t>{0, 0, 0, 0} : std::vector<int32_t>{0, 2, 2, 5};
    EXPECT_EQ(got_cu, want_cu);
    for (int64_t i = 0; i < kT * kRow; ++i)
      ASSERT_EQ(got_rows[i], i / kRow < used ? 0x7f : 0) << "byte " << i;
    const std::vector<int64_t> want_pos =
        bad ? std::vector<int64_t>(kT, 0) : std::vector<int64_t>{0, 1, 0, 1, 2, 0, 0, 0};
    EXPECT_EQ(got_pos, want_pos);
  }
  cudaFree(lengths);
  cudaFree(cu);
  cudaFree(err);
  cudaFree(rows);
  cudaFree(pos);
}

TEST(CudaExecutor, TraceHasOneEventPerStep) {
  SKIP_WITHOUT_GPU();
  auto plan = CompileFor(Fixture("default.onnx"), PlanTarget::kCuda, "fp16",
                         {{"batch", {2}}, {"sequence", {16}}});
  ASSERT_TRUE(plan);
  auto exec = Executor::Create(plan);
  ASSERT_TRUE(exec.ok());
  const std::vector<Tensor> in = Inputs(*plan, {{"batch", 2}, {"sequence", 16}}, 2);
  RunStats stats;
  stats.collect_trace = true;
  ASSERT_TRUE((*exec)->Run(Views(in), &stats).ok());
  EXPECT_EQ(stats.trace.size(), plan->buckets[0].steps.size());
  for (const TraceEvent& e : stats.trace) {
    EXPECT_GE(e.duration_ns, 0);
    EXPECT_FALSE(e.provenance.empty()) << e.kernel;
  }
}

}  // namespace
}  // namespace kiln::runtime_test
