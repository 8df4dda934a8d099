// `kiln compile MODEL.onnx -o OUT.kiln ...`: kiln::CompileToFile (import, optimize, lower
// per shape bucket, stream the weights into the plan file). Progress lines from the
// compiler go to stderr, but only once the compile has taken more than a second (lines
// from the first second are held and flushed at the one-second mark), so fast compiles
// print nothing but the final summary.
// Limits: --shape entries with one value are resolved against the model's input names by
// parsing the model once more (cheap next to the compile itself).
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kiln/kiln.h"
#include "kiln/onnx/importer.h"
#include "kiln/verify.h"
#include "tools/cli.h"
#include "tools/json.h"
#include "tools/plan_info_json.h"
#include "tools/plan_util.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln compile MODEL.onnx -o OUT.kiln [options]\n"
    "\n"
    "Compiles MODEL.onnx ahead of time into a plan file: imports it, optimizes it, and for\n"
    "every shape bucket re-optimizes it with static shapes, plans activation memory and\n"
    "lowers it to kernel calls; writes the plan (docs/plan-format.md) to OUT.kiln. Run it\n"
    "with `kiln run OUT.kiln`, measure it with `kiln bench`, describe it with `kiln plan-info`\n"
    "or `kiln inspect`. Same model and options -> byte-identical plan.\n"
    "\n"
    "options:\n"
    "  -o OUT.kiln              the plan file to write (required)\n"
    "  -O0 | -O1 | -O2 | -O3    optimization pipeline, as `kiln opt` (default -O2)\n"
    "  --target cpu|cuda        the executor the plan is for (default cpu). A cuda plan has\n"
    "                           no host steps: an op no device kernel takes fails the\n"
    "                           compile naming the node (exit 3); it compiles on machines\n"
    "                           without a GPU (`kiln plan-info` says where it can run)\n"
    "  --cuda-arch LIST         cuda: the GPU architectures the plan is for, e.g.\n"
    "                           sm_90,sm_80 (default sm_80,sm_90)\n"
    "  --allow-tf32             cuda fp32 plans: GEMMs may use TF32 tensor cores (10-bit\n"
    "                           mantissa inputs); off by default\n"
    "  --no-flash-attention     cuda fp16/bf16 plans: keep the simple attention kernel\n"
    "                           instead of the tensor-core flash kernel (for comparison)\n"
    "  --shape SPEC             one static shape: comma-separated NAME=D0xD1... for a graph\n"
    "                           input or SYMBOL=N for a symbolic dim (repeatable), e.g.\n"
    "                           --shape batch=1,sequence=128\n"
    "  --profile SPEC           shape buckets: comma-separated SYMBOL=VALUES, VALUES either\n"
    "                           a:b:c (these values) or lo..hi (lo, hi and the powers of two\n"
    "                           between), e.g. --profile batch=1:8,sequence=16..128 gives\n"
    "                           2 x 4 buckets (sequence 16, 32, 64, 128); repeatable. A bucket\n"
    "                           is compiled for every combination of the values.\n"
    "                           tokens=T1:T2:... (encoders with an attention_mask): also a\n"
    "                           packed program, one bucket per token count and batch value,\n"
    "                           that runs a batch's real tokens end to end; a model it cannot\n"
    "                           prove token-wise keeps padded execution, with a warning saying\n"
    "                           why (docs/packing.md); cpu and cuda\n"
    "  --precision P            fp32 (default), bf16, int8 or auto (cpu), fp16, bf16 or int8\n"
    "                           (cuda);\n"
    "                           graph I/O stays in the model's dtypes (docs/precision.md).\n"
    "                           cpu bf16: GEMM weights and inputs in bf16 (AVX-512 BF16;\n"
    "                           other CPUs widen the weights to fp32 at load), fp32 sums;\n"
    "                           cpu int8: GEMM weights s8 per output channel, inputs\n"
    "                           quantized per row at run time; everything else, and output\n"
    "                           heads, stays fp32 (`kiln plan-info` lists what and why).\n"
    "                           auto: int8, then int8 with the attention GEMMs in bf16,\n"
    "                           then bf16, then fp32: the first that meets its gate.\n"
    "                           cuda fp16/bf16: the compute path in 16 bits, fp32\n"
    "                           statistics inside the kernels. cuda int8: the GEMMs on\n"
    "                           cuBLASLt's int8 tensor cores (s8 weights, inputs per row),\n"
    "                           the rest as fp16.\n"
    "  --head-precision P       cpu int8/bf16/auto: the output heads' GEMMs (an LM head, a\n"
    "                           classifier: a Linear whose result is a graph output) at\n"
    "                           int8, bf16 or fp32 (default fp32). An int8 LM head reads a\n"
    "                           quarter of the fp32 bytes per generated token\n"
    "  --accept SPEC            below fp32: the accuracy gate, checked after compiling by\n"
    "                           running the plan beside the model's fp32 plan (kiln verify);\n"
    "                           not met: no plan is written, exit 4. Default: bf16/fp16\n"
    "                           cosine>=0.9999, int8 cosine>=0.99 (worst row, every output).\n"
    "                           SPEC e.g. cosine>=0.999,max_abs<=0.05,logits:rank_agreement\n"
    "                           >=0.99 (see kiln verify --help); none: no gate\n"
    "  --calib DIR              input sets (as kiln verify --calib) for the gate, int8's\n"
    "                           smoothing and static ranges, and fp16's numeric-safety pass\n"
    "                           (ops whose values exceed fp16's range stay fp32); default:\n"
    "                           seeded random valid inputs\n"
    "  --int8-activations M     int8: dynamic (default: each row quantized at run time\n"
    "                           with its own range) or static (one range per GEMM input\n"
    "                           from the calibration sets, stored in the plan)\n"
    "  --observer O             static int8: how a range is chosen from the calibration\n"
    "                           values: percentile (default; of |x|, see --percentile),\n"
    "                           minmax or entropy (KL divergence, as TensorRT)\n"
    "  --percentile P           the percentile observer's P in (0, 100] (default 99.99)\n"
    "  --verify-samples N       the gate's random input sets (default 4)\n"
    "  --decode-context LIST    KV-cache decoders (past_key_values.* in, present.* out):\n"
    "                           the cache capacities in tokens per sequence, e.g. 256,1024.\n"
    "                           The plan gets a prefill program (the --profile buckets with\n"
    "                           an empty past) and a decode program (one token per sequence,\n"
    "                           appending to the cache in place) for each capacity and batch;\n"
    "                           run it with `kiln generate` (docs/generation.md); the\n"
    "                           cache stays f32 at every precision\n"
    "  --kv-block-size N        generation plans: cache slots per block of the paged cache\n"
    "                           (default: the largest power of two <= 128 dividing every\n"
    "                           capacity); must divide every capacity\n"
    "  --kv-cache-blocks N      generation plans: blocks in each K/V pool, shared by all\n"
    "                           sequences (default: largest batch x largest capacity /\n"
    "                           block size, + 1 scratch block); reserved address space,\n"
    "                           committed as blocks fill\n"
    "  --prefill-logits M       generation plans: last (default: output logits is\n"
    "                           [batch, 1, vocab], each sequence's last token, and the LM\n"
    "                           head runs on that row only) or all ([batch, sequence,\n"
    "                           vocab] as exported: every prompt position scored)\n"
    "  --disable-pass NAME      skip an optimization pass wherever the pipeline has it\n"
    "                           (repeatable; `kiln opt --list-passes` lists them)\n"
    "  --verbose, -v            print progress (passes, fusions, buckets) from the start\n"
    "  --quiet                  print nothing but errors\n"
    "\n"
    "Every symbolic input dim must be bound by --shape or --profile. Progress goes to\n"
    "stderr once the compile runs longer than a second; at the end (unless --quiet) a\n"
    "summary on stderr: time, buckets, steps per kernel, arena per bucket, weights, file.\n";

// Holds progress lines for the first second, then streams them: a watcher thread flushes
// the held lines when the second is up even if the compiler is silent at that moment.
class ProgressSink {
 public:
  // verbose: stream from the first line instead of holding the first second.
  ProgressSink(bool quiet, bool verbose) : quiet_(quiet), streaming_(verbose) {
    if (quiet_ || verbose) return;
    watcher_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) FlushLocked();
    });
  }
  ~ProgressSink() { Finish(); }
  // Stops the watcher; lines still held (a compile under a second) are dropped.
  void Finish() {
    if (!watcher_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    watcher_.join();
  }
  // Lines starting "warning: " are printed at once, whatever the second says.
  void Line(std::string_view line) {
    if (quiet_) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (streaming_ || line.starts_with("warning: ")) {
      std::fprintf(stderr, "%s\n", std::string(line).c_str());
    } else {
      held_.emplace_back(line);
    }
  }

 private:
  void FlushLocked() {
    streaming_ = true;
    for (const std::string& l : held_) std::fprintf(stderr, "%s\n", l.c_str());
    held_.clear();
  }
  const bool quiet_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool streaming_;
  std::vector<std::string> held_;
  std::thread watcher_;
};

void PrintSummary(const PlanInfo& info, const std::string& out, double seconds) {
  const Plan& plan = info.plan;
  std::map<std::string, int> by_kernel;
  int64_t steps = 0;
  for (const PlanBucket& b : plan.buckets)
    for (const PlanStep& s : b.steps) by_kernel[s.kernel]++, ++steps;
  std::vector<std::string> kernels;
  for (const auto& [k, n] : by_kernel) kernels.push_back(absl::StrCat(k, " ", n));
  std::fprintf(stderr, "kiln compile: %s in %.2f s: %zu bucket%s, %lld steps, weights %.2f MiB\n",
               out.c_str(), seconds, plan.buckets.size(), plan.buckets.size() == 1 ? "" : "s",
               static_cast<long long>(steps),
               static_cast<double>(info.weights_bytes) / (1024.0 * 1024.0));
  std::fprintf(stderr, "  steps by kernel (all buckets): %s\n",
               kernels.empty() ? "none" : absl::StrJoin(kernels, ", ").c_str());
  for (size_t i = 0; i < plan.buckets.size(); ++i) {
    const PlanBucket& b = plan.buckets[i];
    const std::string label = BucketLabel(plan, static_cast<int>(i));
    std::fprintf(stderr, "  bucket %zu [%s]: %zu steps, arena %s\n", i,
                 label.empty() ? "static" : label.c_str(), b.steps.size(),
                 HumanBytes(b.arena_bytes).c_str());
  }
  // The precision notes: in full for an fp32 plan (an imported quantized model's notes);
  // a low-precision plan's fp32 ops only counted (kiln plan-info says why each stays).
  std::vector<std::string> precision;
  int64_t kept = 0;
  const bool lowered =
      std::any_of(plan.precision_notes.begin(), plan.precision_notes.end(),
                  [](const PlanPrecisionNote& n) { return n.precision != "fp32"; });
  for (const std::string& line : PrecisionLines(plan)) {
    if (lowered && absl::StartsWith(line, "fp32: ")) continue;
    precision.push_back(line);
  }
  for (const PlanPrecisionNote& n : plan.precision_notes) kept += lowered && n.precision == "fp32";
  if (kept > 0)
    precision.push_back(absl::StrCat("fp32: ", kept, " ops kept (kiln plan-info says why)"));
  if (!precision.empty())
    std::fprintf(stderr, "  precision: %s\n", absl::StrJoin(precision, "; ").c_str());
  std::fprintf(stderr, "  file %s (%s)\n", out.c_str(),
               HumanBytes(static_cast<int64_t>(info.file_bytes)).c_str());
}

// "sm_90,sm_80" (or "90,80") -> {90, 80}.
absl::Status ParseCudaArchs(const std::string& text, std::vector<int>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::string p(absl::StripAsciiWhitespace(part));
    if (absl::StartsWith(p, "sm_")) p = p.substr(3);
    int sm = 0;
    if (p.empty() || !absl::SimpleAtoi(p, &sm))
      return absl::InvalidArgumentError(
          absl::StrCat("--cuda-arch: '", std::string(part), "' is not an architecture like sm_90"));
    out->push_back(sm);
  }
  if (out->empty()) return absl::InvalidArgumentError("--cuda-arch: no architecture given");
  return absl::OkStatus();
}

}  // namespace

int RunCompile(int argc, char** argv) {
#ifdef __GLIBC__
  // glibc raises its mmap threshold (up to 32 MiB) at the first free of a large block;
  // after that, weight-sized buffers come from the heap, whose holes are not given back:
  // the --shape parse below, or old constants a fusion replaces, then stay resident beside
  // their successors (BERT-base: 1.22x its weights instead of 1.05x). A fixed threshold
  // keeps every block of 256 KiB or more in a mapping of its own, returned when freed.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
#endif
  Args args(argc, argv, 2);
  std::string model, out, v;
  std::vector<std::string> shape_specs;
  bool quiet = false, verbose = false;
  CompileOptions co;
  VerifyOptions vo;
  std::optional<std::string> accept;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    bool matched_level = false;
    for (int l = 0; l <= 3; ++l)
      if (args.Flag(absl::StrCat("-O", l))) co.opt_level = l, matched_level = true;
    if (matched_level) continue;
    if (args.Flag("--quiet")) {
      quiet = true;
      continue;
    }
    if (args.Flag("--allow-tf32")) {
      co.allow_tf32 = true;
      continue;
    }
    if (args.Flag("--no-flash-attention")) {
      co.cuda_flash_attention = false;
      continue;
    }
    if (args.Flag("--verbose") || args.Flag("-v")) {
      verbose = true;
      continue;
    }
    if (args.Option("-o", &v) || args.Option("--output", &v)) {
      out = v;
      continue;
    }
    if (args.Option("--target", &v)) {
      if (v == "cpu")
        co.target = PlanTarget::kCpu;
      else if (v == "cuda")
        co.target = PlanTarget::kCuda;
      else
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("--target: unknown target '", v, "' (want cpu or cuda)")));
      continue;
    }
    if (args.Option("--shape", &v)) {
      shape_specs.push_back(v);
      continue;
    }
    if (args.Option("--profile", &v)) {
      if (absl::Status s = ParseProfileSpec(v, &co.profile); !s.ok()) return Fail(s);
      continue;
    }
    if (args.Option("--precision", &v)) {
      co.precision = v;
      continue;
    }
    if (args.Option("--accept", &v)) {
      accept = v;
      continue;
    }
    if (args.Option("--calib", &v)) {
      vo.calib_dir = co.calib_dir = v;
      continue;
    }
    if (args.Option("--head-precision", &v)) {
      co.head_precision = v;
      continue;
    }
    if (args.Option("--prefill-logits", &v)) {
      co.prefill_logits = v;
      continue;
    }
    if (args.Option("--int8-activations", &v)) {
      co.int8_activations = v;
      continue;
    }
    if (args.Option("--observer", &v)) {
      co.observer = v;
      continue;
    }
    if (args.Option("--percentile", &v)) {
      if (!absl::SimpleAtod(v, &co.percentile))
        return Fail(absl::InvalidArgumentError(absl::StrCat("--percentile: bad value '", v, "'")));
      continue;
    }
    if (args.Option("--verify-samples", &v)) {
      if (!absl::SimpleAtoi(v, &vo.samples) || vo.samples < 1 || vo.samples > 1000)
        return Fail(
            absl::InvalidArgumentError(absl::StrCat("--verify-samples: bad value '", v, "'")));
      continue;
    }
    if (args.Option("--cuda-arch", &v)) {
      if (absl::Status s = ParseCudaArchs(v, &co.cuda_sms); !s.ok()) return Fail(s);
      continue;
    }
    if (args.Option("--disable-pass", &v)) {
      co.disabled_passes.push_back(v);
      continue;
    }
    bool matched = false;
    for (auto [flag, field] : {std::pair{"--kv-block-size", &co.kv_block_size},
                               std::pair{"--kv-cache-blocks", &co.kv_cache_blocks}})
      if (args.Option(flag, &v)) {
        if (!absl::SimpleAtoi(v, field) || *field <= 0)
          return Fail(absl::InvalidArgumentError(
              absl::StrCat(flag, ": '", v, "' is not a positive count")));
        matched = true;
      }
    if (matched) continue;
    if (args.Option("--decode-context", &v)) {
      for (absl::string_view part : absl::StrSplit(v, ',')) {
        int64_t c = 0;
        if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &c))
          return Fail(absl::InvalidArgumentError(absl::StrCat(
              "--decode-context: '", std::string(part), "' is not a token count like 256")));
        co.decode_context.push_back(c);
      }
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    if (model.empty() && args.Positional(&model)) continue;
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "compile: unexpected argument '", args.Next(), "' (see kiln compile --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  if (model.empty())
    return Fail(absl::InvalidArgumentError("compile: no model given (see kiln compile --help)"));
  if (out.empty()) return Fail(absl::InvalidArgumentError("compile: no output given: -o OUT.kiln"));

  if (!shape_specs.empty()) {
    // Tell graph inputs from symbols by the model's input names (a parse, not an import:
    // a second import's freed weights would stay in the heap through the compile).
    absl::StatusOr<std::vector<std::string>> names = OnnxGraphInputNames(model);
    if (!names.ok()) return Fail(names.status());
    for (const std::string& spec : shape_specs)
      if (absl::Status s = ParseShapeSpec(spec, *names, &co.input_shapes, &co.symbols); !s.ok())
        return Fail(s);
  }
  for (const auto& [sym, values] : co.profile)
    if (co.symbols.count(sym))
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("compile: symbol '", sym, "' is given by both --shape and --profile")));

  if (accept) {
    absl::StatusOr<std::vector<AccuracyGate>> gates = ParseAccuracyGates(*accept);
    if (!gates.ok()) return Fail(gates.status());
    vo.gates = *std::move(gates);
  } else {
    vo.default_gates = true;  // each precision's own (fp32: none)
  }
  if (co.target != PlanTarget::kCpu) {
    if (accept && *accept != "none")
      return Fail(absl::UnimplementedError(
          "--accept: the accuracy gate runs cpu plans; check a cuda plan on a GPU "
          "(bench/gpu/check.sh)"));
    vo.gates.clear();  // the cuda defaults are checked on a GPU, not here
    vo.default_gates = false;
  }
  const bool gated = !vo.gates.empty() || (vo.default_gates && co.precision != "fp32");
  if (!vo.calib_dir.empty() && !gated && co.precision != "fp16" && co.precision != "int8")
    return Fail(absl::InvalidArgumentError(
        "--calib: nothing to calibrate or gate (an fp32 plan, or --accept none)"));

  ProgressSink sink(quiet, verbose);
  co.progress = [&sink](std::string_view line) { sink.Line(line); };
  const auto t0 = std::chrono::steady_clock::now();
  AccuracyReport report;
  absl::StatusOr<PlanInfo> info = CompileToFileGated(model, out, co, vo, &report);
  sink.Finish();
  if (!report.outputs.empty() && (!quiet || !info.ok())) std::fputs(report.Text().c_str(), stderr);
  if (!info.ok()) return Fail(info.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) PrintSummary(*info, out, seconds);
  return kExitOk;
}

}  // namespace kiln::cli
