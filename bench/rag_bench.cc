// kiln_rag_bench: the RAG scenario of the end-to-end benchmark (bench/README.md), kiln side.
//
// One query embedding (bi-encoder plan, batch 1) then re-ranking N candidates with the
// cross-encoder plan in batches of --batch rows (100 = 32+32+32+4 by default), through the
// public API only: kiln::LoadPlanFile + kiln::Executor. The inputs are .npy files written
// by bench/rag_bench.py (so onnxruntime sees the very same tokens): DIR/query_<input>.npy
// ([1, Sq]) and DIR/docs_<input>.npy ([N, Sd]) for every graph input of each plan. Each
// batch is a zero-copy view of rows of the docs arrays; outputs go to preallocated buffers.
// Prints exactly one JSON object on stdout: per-repetition pipeline times, p50/p90/min,
// per-stage p50s, load time, the bucket each call ran in, and the scores and query output
// (for the harness to check against onnxruntime). Errors: one line on stderr, exit 2.
// Limits: dense row-major inputs of any integer/float dtype; the first output of each
// plan is the one reported (last_hidden_state / logits for the bench models).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/kiln.h"
#include "kiln/support/npy.h"
#include "kiln/support/status.h"

namespace kiln::bench {
namespace {

constexpr char kUsage[] =
    "usage: kiln_rag_bench --embed PLAN.kiln --rerank PLAN.kiln --inputs DIR\n"
    "                      [--reps N (20)] [--warmup N (3)] [--threads N (0: all cores)]\n"
    "                      [--batch N (32)]\n"
    "Runs query embedding + cross-encoder re-ranking of every row of DIR/docs_*.npy in\n"
    "batches of --batch rows; prints one JSON object (times in ms) on stdout.\n";

struct Options {
  std::string embed_plan, rerank_plan, inputs_dir;
  int reps = 20, warmup = 3, threads = 0;
  int64_t batch = 32;
};

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The q-quantile (0..1) of `v`: the sorted sample at index round(q * (n-1)), as `kiln bench`.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// One loaded plan, its executor, and its inputs read from DIR/<prefix>_<name>.npy.
struct Model {
  std::unique_ptr<Executor> exec;
  std::vector<Tensor> inputs;  // graph input order, all with the same leading dim
};

absl::StatusOr<Model> LoadModel(const std::string& plan_path, const std::string& dir,
                                const std::string& prefix, int threads) {
  KILN_ASSIGN_OR_RETURN(Plan plan, LoadPlanFile(plan_path));
  Model m;
  for (const PlanTensorSig& sig : plan.inputs) {
    const std::string path = absl::StrCat(dir, "/", prefix, "_", sig.name, ".npy");
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadNpy(path));
    if (t.dtype() != sig.dtype)
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' holds ", std::string(DTypeName(t.dtype())), " but plan input '", sig.name,
          "' of '", plan_path, "' is ", std::string(DTypeName(sig.dtype))));
    if (t.rank() < 1 || t.dims()[0] < 1 ||
        (!m.inputs.empty() && t.dims()[0] != m.inputs[0].dims()[0]))
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' must have a leading (batch) dim >= 1 equal to the other inputs'"));
    m.inputs.push_back(std::move(t));
  }
  ExecutorOptions eo;
  eo.num_threads = threads;
  KILN_ASSIGN_OR_RETURN(m.exec, Executor::Create(std::make_shared<Plan>(std::move(plan)), eo));
  return m;
}

// Views of rows [row, row + n) of every input (row-major: a pointer offset, no copy).
std::vector<TensorView> RowViews(const Model& m, int64_t row, int64_t n) {
  std::vector<TensorView> views;
  for (const Tensor& t : m.inputs) {
    const int64_t row_bytes = static_cast<int64_t>(t.NumBytes()) / t.dims()[0];
    TensorView v;
    v.dtype = t.dtype();
    v.dims = t.dims();
    v.dims[0] = n;
    v.data = t.raw() + row * row_bytes;
    views.push_back(std::move(v));
  }
  return views;
}

// One prepared call: views of rows [row, row+n) of a model's inputs, and output buffers
// sized by Executor::OutputDims (allocated once, reused by every repetition).
struct Call {
  std::vector<TensorView> in;
  std::vector<Tensor> out;
  std::vector<MutableTensorView> out_views;
  RunStats stats;
};

absl::StatusOr<Call> PrepareCall(const Model& m, int64_t row, int64_t n) {
  Call c;
  c.in = RowViews(m, row, n);
  std::vector<std::vector<int64_t>> dims;
  for (const TensorView& v : c.in) dims.push_back(v.dims);
  KILN_ASSIGN_OR_RETURN(auto out_dims, m.exec->OutputDims(dims));
  const auto& sigs = m.exec->plan().outputs;
  for (size_t i = 0; i < out_dims.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(sigs[i].dtype, out_dims[i]));
    c.out.push_back(std::move(t));
  }
  for (Tensor& t : c.out) c.out_views.push_back({t.dtype(), t.dims(), t.raw()});
  return c;
}

std::string JsonList(const std::vector<double>& v) {
  std::vector<std::string> s;
  for (double x : v) s.push_back(absl::StrFormat("%.9g", x));
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

absl::Status Main(const Options& o) {
  const auto t_load = Clock::now();
  KILN_ASSIGN_OR_RETURN(Model embed, LoadModel(o.embed_plan, o.inputs_dir, "query", o.threads));
  KILN_ASSIGN_OR_RETURN(Model rerank, LoadModel(o.rerank_plan, o.inputs_dir, "docs", o.threads));
  const double load_ms = MsSince(t_load);

  // The calls of one pipeline run, prepared once: the query, then the candidate batches.
  KILN_ASSIGN_OR_RETURN(Call query, PrepareCall(embed, 0, embed.inputs[0].dims()[0]));
  std::vector<Call> batches;
  std::vector<int64_t> batch_rows;
  const int64_t candidates = rerank.inputs[0].dims()[0];
  for (int64_t row = 0; row < candidates; row += o.batch) {
    const int64_t n = std::min(o.batch, candidates - row);
    KILN_ASSIGN_OR_RETURN(Call c, PrepareCall(rerank, row, n));
    batches.push_back(std::move(c));
    batch_rows.push_back(n);
  }
  const auto run_call = [](const Model& m, Call& c) {
    return m.exec->Run(c.in, c.out_views, &c.stats);
  };

  std::vector<double> total_ms, embed_ms, rerank_ms;
  for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
    const auto t0 = Clock::now();
    KILN_RETURN_IF_ERROR(run_call(embed, query));
    const auto t1 = Clock::now();
    for (Call& c : batches) KILN_RETURN_IF_ERROR(run_call(rerank, c));
    const auto t2 = Clock::now();
    if (rep < o.warmup) continue;
    total_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    embed_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    rerank_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }

  // Scores: the first output of each batch, flattened, in candidate order.
  std::vector<double> scores;
  for (const Call& c : batches)
    for (int64_t i = 0; i < c.out[0].NumElements(); ++i) scores.push_back(c.out[0].GetAsDouble(i));
  std::vector<double> query_head;
  double query_sum = 0;
  for (int64_t i = 0; i < query.out[0].NumElements(); ++i) {
    const double v = query.out[0].GetAsDouble(i);
    query_sum += v;
    if (i < 16) query_head.push_back(v);
  }
  std::vector<std::string> buckets, padded;
  buckets.push_back(absl::StrCat(query.stats.bucket));
  padded.push_back(query.stats.padded ? "true" : "false");
  for (const Call& c : batches) {
    buckets.push_back(absl::StrCat(c.stats.bucket));
    padded.push_back(c.stats.padded ? "true" : "false");
  }
  std::vector<std::string> rows_s;
  for (int64_t n : batch_rows) rows_s.push_back(absl::StrCat(n));
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);

  std::string j = "{";
  absl::StrAppendFormat(&j, "\"kiln_version\":\"%s\",", std::string(Version()));
  absl::StrAppendFormat(&j, "\"reps\":%d,\"warmup\":%d,\"threads\":%d,", o.reps, o.warmup,
                        o.threads);
  absl::StrAppendFormat(&j, "\"candidates\":%d,\"batches\":[%s],", candidates,
                        absl::StrJoin(rows_s, ","));
  absl::StrAppendFormat(&j, "\"load_ms\":%.6g,", load_ms);
  absl::StrAppendFormat(
      &j, "\"p50_ms\":%.6g,\"p90_ms\":%.6g,\"min_ms\":%.6g,", Quantile(total_ms, 0.5),
      Quantile(total_ms, 0.9),
      total_ms.empty() ? 0.0 : *std::min_element(total_ms.begin(), total_ms.end()));
  absl::StrAppendFormat(&j, "\"embed_p50_ms\":%.6g,\"rerank_p50_ms\":%.6g,",
                        Quantile(embed_ms, 0.5), Quantile(rerank_ms, 0.5));
  absl::StrAppendFormat(&j, "\"times_ms\":%s,\"embed_times_ms\":%s,\"rerank_times_ms\":%s,",
                        JsonList(total_ms), JsonList(embed_ms), JsonList(rerank_ms));
  absl::StrAppendFormat(&j, "\"buckets\":[%s],\"padded\":[%s],", absl::StrJoin(buckets, ","),
                        absl::StrJoin(padded, ","));
  absl::StrAppendFormat(&j, "\"peak_rss_mb\":%.6g,", ru.ru_maxrss / 1024.0);
  absl::StrAppendFormat(&j, "\"query_output_sum\":%.9g,\"query_output_head\":%s,", query_sum,
                        JsonList(query_head));
  absl::StrAppendFormat(&j, "\"scores\":%s}", JsonList(scores));
  std::printf("%s\n", j.c_str());
  return absl::OkStatus();
}

// Counts and sizes: [lo, 1e6].
bool ParseInt(const char* s, int64_t lo, int64_t* out) {
  return absl::SimpleAtoi(s, out) && *out >= lo && *out <= 1000000;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::bench::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kiln::bench::kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kiln_rag_bench: '%s' needs a value (or is unknown)\n%s", a.c_str(),
                   kiln::bench::kUsage);
      return 2;
    }
    const char* v = argv[++i];
    struct IntFlag {
      const char* name;
      int64_t min;
      int64_t* out;
    };
    int64_t reps = o.reps, warmup = o.warmup, threads = o.threads;
    const IntFlag int_flags[] = {{"--reps", 1, &reps},
                                 {"--warmup", 0, &warmup},
                                 {"--threads", 0, &threads},
                                 {"--batch", 1, &o.batch}};
    bool ok = true;
    if (a == "--embed") {
      o.embed_plan = v;
    } else if (a == "--rerank") {
      o.rerank_plan = v;
    } else if (a == "--inputs") {
      o.inputs_dir = v;
    } else {
      ok = false;
      for (const IntFlag& f : int_flags)
        if (a == f.name) ok = kiln::bench::ParseInt(v, f.min, f.out);
    }
    o.reps = static_cast<int>(reps);
    o.warmup = static_cast<int>(warmup);
    o.threads = static_cast<int>(threads);
    if (!ok) {
      std::fprintf(stderr, "kiln_rag_bench: bad option %s %s\n%s", a.c_str(), v,
                   kiln::bench::kUsage);
      return 2;
    }
  }
  if (o.embed_plan.empty() || o.rerank_plan.empty() || o.inputs_dir.empty()) {
    std::fprintf(stderr, "kiln_rag_bench: --embed, --rerank and --inputs are required\n%s",
                 kiln::bench::kUsage);
    return 2;
  }
  if (absl::Status s = kiln::bench::Main(o); !s.ok()) {
    std::fprintf(stderr, "kiln_rag_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return 0;
}
