// kiln_gpu_bench: the GPU measurements bench/gpu/check.sh needs from C++, one JSON object
// per line on stdout.
//   plan PLAN.kiln --shape batch=B,sequence=S [--runs N] [--warmup N] [--no-cuda-graph]
//       p50/p90/min of Run with every input and output in device memory on the caller's
//       stream, timed with CUDA events around Run ("device_io"), and the same with host
//       memory ("host_io", copies included); token ids in [0, 100), masks all 1. Then 5
//       traced runs (steps launched one by one, an event pair each): the sum of the steps'
//       median times and of the attention steps' ("traced_steps_ms", "traced_attention_ms").
//   create PLAN.kiln
//       LoadPlanFile + Executor::Create (weight upload + graph capture of every bucket), ms.
//   kernels [--rows R] [--hidden H]
//       the roofline references: device-to-device copy bandwidth (cudaMemcpy of R x H fp16
//       rows, bytes read + written), fp16 SkipLayerNorm over the same rows against it, and
//       the dense fp16 GEMM rate (cuBLASLt, 8192^3) against which Linear is judged.
//   attention [--runs N]
//       the fused attention kernels on the shapes of issue 10 (fp16, packed QKV in place):
//       32x128x12x64 with a key-padding mask (row b keeps 128 - 37b mod 64 keys, as
//       attn_bench.py gives SDPA), 8x512x12x64 and 4x1024x16x128 without mask and causal;
//       per case the flash kernel at every instantiated launch shape and the simple kernel:
//       p50 ms and TFLOP/s (4·B·N·S²·D, halved when causal, as FlashAttention counts),
//       and max |flash - simple| over the outputs (inputs in ±[0.125, 1)).
//   rerank PLAN.kiln --lengths FILE [--runs N] [--warmup N]
//       the re-ranking scenario of docs/packing.md on a plan with a packed program: FILE
//       holds one (query, passage) pair length per line, the pair laid out as a
//       cross-encoder takes it (token types 0 for the first `query` tokens, where the
//       second column gives the query length, then 1); batches of 32 in file order, each
//       padded to its own longest pair; ids in [0, 100). Wall time of running every batch
//       with host I/O (Run synchronizes), packed (the default) and padded (pack = false),
//       sides interleaved: p50/min ms per pass over all candidates, and how many batches
//       ran packed.
// Medians over --runs after --warmup; every CUDA call checked (exit 1 with the error).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kiln/kiln.h"

namespace {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "kiln_gpu_bench: %s\n", msg.c_str());
  std::exit(1);
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Die(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Stats {
  double p50, p90, min;
};
Stats Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double p) { return ms[static_cast<size_t>(p * (ms.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.9), ms.front()};
}

// Times `fn` (which enqueues work on `stream`) with CUDA events: median of `runs`.
template <typename Fn>
Stats TimeEvents(cudaStream_t stream, int warmup, int runs, Fn fn) {
  cudaEvent_t a, b;
  Check(cudaEventCreate(&a), "cudaEventCreate");
  Check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    Check(cudaEventRecord(a, stream), "cudaEventRecord");
    fn();
    Check(cudaEventRecord(b, stream), "cudaEventRecord");
    Check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    Check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return Summarize(ms);
}

std::map<std::string, int64_t> ParseShape(const std::string& spec) {
  std::map<std::string, int64_t> out;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::vector<std::string> kv = absl::StrSplit(part, '=');
    int64_t v = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &v)) Die("bad --shape " + spec);
    out[kv[0]] = v;
  }
  return out;
}

int PlanBench(const std::string& path, const std::map<std::string, int64_t>& shape, int runs,
              int warmup, bool graphs) {
  absl::StatusOr<kiln::Plan> plan = kiln::LoadPlanFile(path);
  if (!plan.ok()) Die(std::string(plan.status().message()));
  auto exec = kiln::Executor::Create(std::make_shared<const kiln::Plan>(*std::move(plan)),
                                     {.cuda_graphs = graphs});
  if (!exec.ok()) Die(std::string(exec.status().message()));
  const kiln::Plan& p = (*exec)->plan();
  std::vector<kiln::Tensor> host_in;
  std::vector<std::vector<int64_t>> in_dims;
  std::mt19937 gen(1);
  for (const kiln::PlanTensorSig& sig : p.inputs) {
    std::vector<int64_t> dims;
    for (const kiln::Dim& d : sig.dims)
      dims.push_back(d.is_known() ? d.value() : shape.count(d.symbol()) ? shape.at(d.symbol()) : 1);
    kiln::Tensor t(sig.dtype, dims);
    const bool mask = sig.name.find("mask") != std::string::npos;
    const bool types = sig.name.find("type") != std::string::npos;
    for (int64_t i = 0; i < t.NumElements(); ++i)
      t.SetFromDouble(i, mask ? 1.0 : types ? 0.0 : static_cast<double>(gen() % 100));
    in_dims.push_back(dims);
    host_in.push_back(std::move(t));
  }
  auto out_dims = (*exec)->OutputDims(in_dims);
  if (!out_dims.ok()) Die(std::string(out_dims.status().message()));
  std::vector<kiln::Tensor> host_out;
  for (size_t o = 0; o < out_dims->size(); ++o)
    host_out.emplace_back(p.outputs[o].dtype, (*out_dims)[o]);
  std::vector<void*> dev;
  std::vector<kiln::TensorView> dv, hv;
  std::vector<kiln::MutableTensorView> dov, hov;
  for (const kiln::Tensor& t : host_in) {
    void* d = nullptr;
    Check(cudaMalloc(&d, std::max<size_t>(t.NumBytes(), 1)), "cudaMalloc");
    Check(cudaMemcpy(d, t.raw(), t.NumBytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
    dev.push_back(d);
    dv.push_back({t.dtype(), t.dims(), d, kiln::MemoryKind::kCuda});
    hv.push_back({t.dtype(), t.dims(), t.raw()});
  }
  for (kiln::Tensor& t : host_out) {
    void* d = nullptr;
    Check(cudaMalloc(&d, std::max<size_t>(t.NumBytes(), 1)), "cudaMalloc");
    dev.push_back(d);
    dov.push_back({t.dtype(), t.dims(), d, kiln::MemoryKind::kCuda});
    hov.push_back({t.dtype(), t.dims(), t.raw()});
  }
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  auto run = [&](bool device) {
    absl::Status s = device ? (*exec)->Run(dv, dov, nullptr, {.cuda_stream = stream})
                            : (*exec)->Run(hv, hov, nullptr, {.cuda_stream = stream});
    if (!s.ok()) Die(std::string(s.message()));
  };
  const Stats d = TimeEvents(stream, warmup, runs, [&] { run(true); });
  const Stats h = TimeEvents(stream, warmup, runs, [&] { run(false); });
  // One traced run, warm (steps launched one by one with an event pair each): the share of
  // the step time spent in attention steps; the median of 5 traced runs per step.
  std::vector<std::vector<double>> step_ms;
  std::vector<std::string> step_kernel;
  for (int i = 0; i < 5; ++i) {
    kiln::RunStats stats;
    stats.collect_trace = true;
    absl::Status st = (*exec)->Run(dv, dov, &stats, {.cuda_stream = stream});
    if (!st.ok()) Die(std::string(st.message()));
    step_ms.resize(stats.trace.size());
    step_kernel.resize(stats.trace.size());
    for (size_t s = 0; s < stats.trace.size(); ++s) {
      step_ms[s].push_back(stats.trace[s].duration_ns / 1e6);
      step_kernel[s] = stats.trace[s].kernel;
    }
  }
  double total_ms = 0, attention_ms = 0;
  for (size_t s = 0; s < step_ms.size(); ++s) {
    const double ms = Summarize(step_ms[s]).p50;
    total_ms += ms;
    if (step_kernel[s] == "attention" || step_kernel[s] == "flash_attention") attention_ms += ms;
  }
  std::printf(
      "{\"plan\": \"%s\", \"graphs\": %s, \"device_io\": {\"p50_ms\": %.4f, \"p90_ms\": %.4f, "
      "\"min_ms\": %.4f}, \"host_io\": {\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"min_ms\": %.4f}, "
      "\"traced_steps_ms\": %.4f, \"traced_attention_ms\": %.4f}\n",
      path.c_str(), graphs ? "true" : "false", d.p50, d.p90, d.min, h.p50, h.p90, h.min, total_ms,
      attention_ms);
  for (void* x : dev) cudaFree(x);
  cudaStreamDestroy(stream);
  return 0;
}

int CreateBench(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<kiln::Plan> plan = kiln::LoadPlanFile(path);
  if (!plan.ok()) Die(std::string(plan.status().message()));
  const size_t buckets = plan->buckets.size();
  auto exec = kiln::Executor::Create(std::make_shared<const kiln::Plan>(*std::move(plan)));
  if (!exec.ok()) Die(std::string(exec.status().message()));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"plan\": \"%s\", \"buckets\": %zu, \"load_and_create_ms\": %.1f}\n", path.c_str(),
              buckets, ms);
  return 0;
}

int KernelBench(int64_t rows, int64_t hidden, int runs) {
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const size_t n = static_cast<size_t>(rows * hidden), bytes = n * 2;
  void *x, *skip, *y, *sum, *gamma, *beta;
  for (void** p : {&x, &skip, &y, &sum}) Check(cudaMalloc(p, bytes), "cudaMalloc");
  for (void** p : {&gamma, &beta}) Check(cudaMalloc(p, hidden * 2), "cudaMalloc");
  for (void* p : {x, skip, y, sum})
    Check(cudaMemset(p, 0x3c, bytes), "cudaMemset");  // ~1.0 in fp16
  for (void* p : {gamma, beta}) Check(cudaMemset(p, 0x3c, hidden * 2), "cudaMemset");
  const Stats copy = TimeEvents(stream, 5, runs, [&] {
    Check(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  });
  const double copy_gbs = 2.0 * bytes / (copy.p50 * 1e-3) / 1e9;  // read + write
  kiln::cuda::NormArgs a;
  a.kind = kiln::cuda::NormKind::kSkipLayerNorm;
  a.dtype = kiln::cuda::ElemType::kF16;
  a.x = x, a.skip = skip, a.gamma = gamma, a.beta = beta, a.rows = rows, a.h = hidden, a.y = y;
  const Stats sln =
      TimeEvents(stream, 5, runs, [&] { Check(kiln::cuda::Norm(a, stream), "Norm"); });
  const double sln_gbs = 3.0 * bytes / (sln.p50 * 1e-3) / 1e9;  // x + skip read, y written
  a.sum = sum;
  const Stats sln_sum =
      TimeEvents(stream, 5, runs, [&] { Check(kiln::cuda::Norm(a, stream), "Norm"); });
  const double sln_sum_gbs = 4.0 * bytes / (sln_sum.p50 * 1e-3) / 1e9;
  // Dense fp16 GEMM, 8192^3, through the same cuBLASLt wrapper the Linear steps use.
  const int64_t g = 8192;
  void *ga, *gb, *gc, *ws;
  for (void** p : {&ga, &gb, &gc}) Check(cudaMalloc(p, g * g * 2), "cudaMalloc");
  Check(cudaMalloc(&ws, kiln::cuda::kGemmWorkspaceBytes), "cudaMalloc");
  for (void* p : {ga, gb}) Check(cudaMemset(p, 0x2c, g * g * 2), "cudaMemset");
  std::string lt_why;
  const kiln::cuda::LtApi* api = kiln::cuda::Lt(&lt_why);
  if (api == nullptr) Die("cuBLASLt: " + lt_why);
  cublasLtHandle_t lt;
  if (api->Create(&lt) != CUBLAS_STATUS_SUCCESS) Die("cublasLtCreate");
  kiln::cuda::GemmDesc gd;
  gd.dtype = kiln::cuda::ElemType::kF16;
  gd.m = gd.n = gd.k = g;
  kiln::cuda::LtGemm gemm;
  if (cublasStatus_t s = gemm.Init(lt, gd, kiln::cuda::kGemmWorkspaceBytes);
      s != CUBLAS_STATUS_SUCCESS)
    Die(std::string("cuBLASLt init: ") + kiln::cuda::CublasStatusName(s));
  const Stats mm = TimeEvents(stream, 3, std::max(5, runs / 4), [&] {
    if (gemm.Run(lt, ga, gb, nullptr, gc, ws, kiln::cuda::kGemmWorkspaceBytes, stream) !=
        CUBLAS_STATUS_SUCCESS)
      Die("cuBLASLt matmul");
  });
  const double tflops = 2.0 * g * g * g / (mm.p50 * 1e-3) / 1e12;
  std::printf(
      "{\"rows\": %lld, \"hidden\": %lld, \"d2d_copy_gbs\": %.1f, \"skip_layer_norm_gbs\": %.1f, "
      "\"skip_layer_norm_over_copy\": %.3f, \"skip_layer_norm_sum_gbs\": %.1f, "
      "\"skip_layer_norm_sum_over_copy\": %.3f, \"skip_layer_norm_ms\": %.4f, "
      "\"gemm_fp16_8192_tflops\": %.1f}\n",
      static_cast<long long>(rows), static_cast<long long>(hidden), copy_gbs, sln_gbs,
      sln_gbs / copy_gbs, sln_sum_gbs, sln_sum_gbs / copy_gbs, sln.p50, tflops);
  api->Destroy(lt);
  for (void* p : {x, skip, y, sum, gamma, beta, ga, gb, gc, ws}) cudaFree(p);
  cudaStreamDestroy(stream);
  return 0;
}

// IEEE half bits -> float (host; normals, subnormals, inf and NaN).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

struct AttentionCase {
  int64_t b, s, n, d;
  bool keypad, causal;
};

int AttentionBench(int runs) {
  namespace kc = kiln::cuda;
  const AttentionCase cases[] = {{32, 128, 12, 64, true, false},
                                 {8, 512, 12, 64, false, false},
                                 {8, 512, 12, 64, false, true},
                                 {4, 1024, 16, 128, false, false},
                                 {4, 1024, 16, 128, false, true}};
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  int dev = 0;
  cudaDeviceProp prop;
  Check(cudaGetDevice(&dev), "cudaGetDevice");
  Check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  const int sm = prop.major * 10 + prop.minor;
  for (const AttentionCase& c : cases) {
    const int64_t nd = c.n * c.d, qkv_elems = c.b * c.s * 3 * nd;
    std::vector<uint16_t> host(qkv_elems);
    std::mt19937 gen(3);
    for (uint16_t& h : host)
      h = 0x3000 + static_cast<uint16_t>(gen() % 0x0c00);           // fp16 in ~[0.125, 1)
    for (size_t i = 0; i < host.size(); i += 2) host[i] |= 0x8000;  // half negative
    void *qkv, *y, *mask = nullptr;
    Check(cudaMalloc(&qkv, qkv_elems * 2), "cudaMalloc");
    Check(cudaMalloc(&y, c.b * c.s * nd * 2), "cudaMalloc");
    Check(cudaMemcpy(qkv, host.data(), qkv_elems * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (c.keypad) {
      std::vector<float> m(c.b * c.s);
      for (int64_t r = 0; r < c.b; ++r)
        for (int64_t j = 0; j < c.s; ++j)
          m[r * c.s + j] = j < c.s - (37 * r) % (c.s / 2) ? 0.f : -3.4028234663852886e38f;
      Check(cudaMalloc(&mask, m.size() * 4), "cudaMalloc");
      Check(cudaMemcpy(mask, m.data(), m.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    const double flops = 4.0 * c.b * c.n * c.s * c.s * c.d * (c.causal ? 0.5 : 1.0);
    auto report = [&](const char* kernel, const std::string& launch, const Stats& st) {
      std::printf(
          "{\"attention\": \"%lldx%lldx%lldx%lld\", \"mask\": \"%s\", \"kernel\": \"%s\", "
          "\"launch\": \"%s\", \"p50_ms\": %.4f, \"tflops\": %.1f, \"sm\": %d}\n",
          static_cast<long long>(c.b), static_cast<long long>(c.s), static_cast<long long>(c.n),
          static_cast<long long>(c.d),
          c.keypad   ? "keypad"
          : c.causal ? "causal"
                     : "none",
          kernel, launch.c_str(), st.p50, flops / (st.p50 * 1e-3) / 1e12, sm);
      std::fflush(stdout);
    };
    kc::FlashAttentionArgs f;
    f.dtype = kc::ElemType::kF16;
    f.q = qkv;
    f.k = static_cast<const uint16_t*>(qkv) + nd;
    f.v = static_cast<const uint16_t*>(qkv) + 2 * nd;
    f.q_row_stride = f.kv_row_stride = 3 * nd;
    f.q_batch_stride = f.kv_batch_stride = c.s * 3 * nd;
    f.batch = c.b;
    f.q_len = f.kv_len = c.s;
    f.heads = f.kv_heads = c.n;
    f.head_size = c.d;
    f.scale = 1.f / std::sqrt(static_cast<float>(c.d));
    f.causal = c.causal;
    f.mask = mask;
    f.mask_type = kc::ElemType::kF32;
    f.mask_stride[0] = mask ? c.s : 0;
    f.mask_stride[3] = mask ? 1 : 0;
    f.y = y;
    f.y_row_stride = nd;
    f.y_batch_stride = c.s * nd;
    const kc::FlashLaunch chosen = kc::ChooseFlashLaunch(sm, c.d);
    const size_t y_elems = static_cast<size_t>(c.b * c.s * nd);
    std::vector<uint16_t> y_flash(y_elems), y_simple(y_elems);
    for (const kc::FlashLaunch& l : kc::kFlashLaunches) {
      if (l.SmemBytes(c.d) > static_cast<int64_t>(prop.sharedMemPerBlockOptin)) {
        std::fprintf(stderr,
                     "attention: launch %dx%d needs %lld bytes of shared memory; the "
                     "device allows %zu: skipped\n",
                     l.block_q, l.block_k, static_cast<long long>(l.SmemBytes(c.d)),
                     prop.sharedMemPerBlockOptin);
        continue;
      }
      Check(kc::FlashAttentionInit(f.dtype, c.d, l), "FlashAttentionInit");
      const Stats st = TimeEvents(
          stream, 10, runs, [&] { Check(kc::FlashAttention(f, l, stream), "FlashAttention"); });
      const bool is_chosen = l.block_q == chosen.block_q && l.block_k == chosen.block_k;
      if (is_chosen)
        Check(cudaMemcpy(y_flash.data(), y, y_elems * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
      report(is_chosen ? "flash (chosen)" : "flash",
             std::to_string(l.block_q) + "x" + std::to_string(l.block_k), st);
    }
    kc::AttentionArgs a;
    a.dtype = kc::ElemType::kF16;
    a.qkv = qkv;
    a.batch = c.b;
    a.seq = c.s;
    a.heads = c.n;
    a.head_size = c.d;
    a.scale = f.scale;
    a.causal = c.causal;
    a.mask = mask;
    a.mask_stride[0] = f.mask_stride[0];
    a.mask_stride[3] = f.mask_stride[3];
    a.y = y;
    const Stats st = TimeEvents(stream, 3, std::max(5, runs / 5),
                                [&] { Check(kc::Attention(a, stream), "Attention"); });
    report("simple", "8 warps", st);
    // The two kernels on the same inputs: both fp32 softmax and accumulation, so they
    // differ by the flash kernel's 16-bit P and the output rounding (a few fp16 ulps).
    Check(cudaMemcpy(y_simple.data(), y, y_elems * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
    double max_abs = 0;
    for (size_t i = 0; i < y_elems; ++i)
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(HalfToFloat(y_flash[i])) -
                                            HalfToFloat(y_simple[i])));
    std::printf(
        "{\"attention\": \"%lldx%lldx%lldx%lld\", \"mask\": \"%s\", "
        "\"flash_vs_simple_max_abs\": %.3g}\n",
        static_cast<long long>(c.b), static_cast<long long>(c.s), static_cast<long long>(c.n),
        static_cast<long long>(c.d),
        c.keypad   ? "keypad"
        : c.causal ? "causal"
                   : "none",
        max_abs);
    for (void* p : {qkv, y, mask})
      if (p) cudaFree(p);
  }
  cudaStreamDestroy(stream);
  return 0;
}

struct RerankBatch {
  std::vector<kiln::Tensor> inputs;  // the plan's model signature, padded to the longest
};

int RerankBench(const std::string& path, const std::string& lengths_file, int runs, int warmup) {
  constexpr int64_t kBatch = 32;
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (pair length, query length)
  {
    FILE* f = std::fopen(lengths_file.c_str(), "r");
    if (f == nullptr) Die("cannot read --lengths " + lengths_file);
    long long len = 0, query = 0;
    while (std::fscanf(f, "%lld %lld", &len, &query) == 2) {
      if (len < 1 || query < 0 || query > len) Die("bad pair length in " + lengths_file);
      pairs.emplace_back(len, query);
    }
    std::fclose(f);
  }
  if (pairs.empty()) Die("no pair lengths in " + lengths_file);
  absl::StatusOr<kiln::Plan> plan = kiln::LoadPlanFile(path);
  if (!plan.ok()) Die(std::string(plan.status().message()));
  if (!kiln::HasProgram(*plan, kiln::PlanProgram::kPacked))
    Die(path + " has no packed program (compile it with --profile tokens=...)");
  auto exec = kiln::Executor::Create(std::make_shared<const kiln::Plan>(*std::move(plan)));
  if (!exec.ok()) Die(std::string(exec.status().message()));
  const kiln::Plan& p = (*exec)->plan();
  std::mt19937 gen(1);
  std::vector<RerankBatch> batches;
  for (size_t first = 0; first < pairs.size(); first += kBatch) {
    const size_t end = std::min(pairs.size(), first + static_cast<size_t>(kBatch));
    const int64_t b = static_cast<int64_t>(end - first);
    int64_t s = 0;
    for (size_t i = first; i < end; ++i) s = std::max(s, pairs[i].first);
    RerankBatch rb;
    for (const kiln::PlanTensorSig& sig : p.inputs) {
      if (sig.dims.size() != 2) Die("input '" + sig.name + "' is not [batch, sequence]");
      kiln::Tensor t(sig.dtype, {b, s});
      const bool mask = sig.name.find("mask") != std::string::npos;
      const bool types = sig.name.find("type") != std::string::npos;
      for (int64_t r = 0; r < b; ++r)
        for (int64_t c = 0; c < s; ++c) {
          const auto [len, query] = pairs[first + r];
          double v = 0;
          if (mask)
            v = c < len ? 1 : 0;
          else if (types)
            v = c < query || c >= len ? 0 : 1;
          else
            v = c < len ? static_cast<double>(gen() % 100) : 0;
          t.SetFromDouble(r * s + c, v);
        }
      rb.inputs.push_back(std::move(t));
    }
    batches.push_back(std::move(rb));
  }
  int packed_batches = 0;
  auto pass = [&](bool pack) {
    kiln::RunOptions o;
    o.pack = pack;
    packed_batches = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const RerankBatch& rb : batches) {
      std::vector<kiln::TensorView> views;
      for (const kiln::Tensor& t : rb.inputs) views.push_back({t.dtype(), t.dims(), t.raw()});
      kiln::RunStats stats;
      auto out = (*exec)->Run(views, &stats, o);
      if (!out.ok()) Die(std::string(out.status().message()));
      packed_batches += stats.packed;
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < warmup; ++i) pass(true), pass(false);
  std::vector<double> packed_ms, padded_ms;
  int packed_count = 0;
  for (int i = 0; i < runs; ++i) {
    packed_ms.push_back(pass(true));
    packed_count = packed_batches;
    padded_ms.push_back(pass(false));
  }
  const Stats pk = Summarize(packed_ms), pd = Summarize(padded_ms);
  int64_t tokens = 0;
  for (const auto& pr : pairs) tokens += pr.first;
  std::printf(
      "{\"mode\": \"rerank\", \"plan\": \"%s\", \"candidates\": %zu, \"tokens\": %lld, "
      "\"batches\": %zu, \"packed_batches\": %d, \"packed_p50_ms\": %.4f, "
      "\"packed_min_ms\": %.4f, \"padded_p50_ms\": %.4f, \"padded_min_ms\": %.4f}\n",
      path.c_str(), pairs.size(), static_cast<long long>(tokens), batches.size(), packed_count,
      pk.p50, pk.min, pd.p50, pd.min);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    Die("usage: kiln_gpu_bench plan|create|kernels|attention|rerank ... (see bench/gpu/README.md)");
  const std::string mode = argv[1];
  std::string path, shape, lengths;
  int runs = 100, warmup = 20;
  int64_t rows = 8192, hidden = 768;
  bool graphs = true;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--shape")
      shape = next();
    else if (a == "--runs")
      runs = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--rows")
      rows = std::atoll(next().c_str());
    else if (a == "--hidden")
      hidden = std::atoll(next().c_str());
    else if (a == "--lengths")
      lengths = next();
    else if (a == "--no-cuda-graph")
      graphs = false;
    else if (path.empty() && a[0] != '-')
      path = a;
    else
      Die("unexpected argument " + a);
  }
  if (runs < 1) Die("--runs must be >= 1");
  if (mode == "plan") return PlanBench(path, ParseShape(shape), runs, warmup, graphs);
  if (mode == "create") return CreateBench(path);
  if (mode == "kernels") return KernelBench(rows, hidden, runs);
  if (mode == "attention") return AttentionBench(runs);
  if (mode == "rerank") return RerankBench(path, lengths, runs, warmup);
  Die("unknown mode " + mode);
}
