// VerifyPlan, CompileToFileGated and CompileGated (kiln/verify.h): the plan and the model's
// fp32 plan on the same input sets, each output compared, the gates checked; --precision
// auto's attempts, lowest precision first.
#include "kiln/verify.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "compiler/calibration.h"
#include "kiln/ir/dim_expr.h"
#include "kiln/onnx/importer.h"
#include "kiln/support/status.h"
#include "verify/verify_internal.h"

namespace kiln {
namespace {

constexpr const char* kMetrics[] = {"cosine", "cosine_mean", "max_abs", "max_rel",
                                    "rank_agreement"};

// An output whose last dim is below this holds scores (logits of a few labels).
constexpr int64_t kScoreWidth = 8;

std::string Num(double v) { return absl::StrFormat("%.6g", v); }

// max and min that keep a NaN: a NaN difference must fail a max_abs gate, not vanish.
double NanMax(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double NanMin(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

// Accumulates one output's comparison over the samples.
struct Accum {
  OutputAccuracy acc;
  double max_ref = 0, cos_sum = 0;
  std::vector<std::vector<double>> want_cols, got_cols;  // scores: per column, every row

  void Row(const double* w, const double* g, int64_t n) {
    double dot = 0, nw = 0, ng = 0;
    for (int64_t i = 0; i < n; ++i) {
      acc.max_abs = NanMax(acc.max_abs, std::fabs(w[i] - g[i]));
      max_ref = NanMax(max_ref, std::fabs(w[i]));
      dot += w[i] * g[i];
      nw += w[i] * w[i];
      ng += g[i] * g[i];
    }
    // Two zero vectors agree; one zero vector against another does not.
    const double cos = nw == 0 && ng == 0   ? 1.0
                       : nw == 0 || ng == 0 ? 0.0
                                            : dot / std::sqrt(nw * ng);
    acc.cosine_worst = std::min(acc.cosine_worst, std::isnan(cos) ? -1.0 : cos);
    cos_sum += std::isnan(cos) ? -1.0 : cos;
    ++acc.rows;
  }
};

// `t` as doubles.
std::vector<double> Doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.NumElements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.GetAsDouble(static_cast<int64_t>(i));
  return v;
}

// Whether output `sig` holds scores: its last dim is fixed and below kScoreWidth (a rank-0
// or rank-1 output, one score per row, too). Decided from the signature, not per sample, so
// that every sample of an output is compared the same way.
bool IsScoreOutput(const PlanTensorSig& sig) {
  if (sig.dims.size() < 2) return true;
  const Dim& last = sig.dims.back();
  return last.is_known() && last.value() < kScoreWidth;
}

// Compares one output of one sample. `mask` (may be null): a [batch, seq] attention mask;
// an output whose leading dims are those skips the rows it marks as padding.
void Compare(const Tensor& want, const Tensor& got, const Tensor* mask, Accum& a) {
  const std::vector<double> w = Doubles(want), g = Doubles(got);
  const std::vector<int64_t>& dims = want.dims();
  const int64_t last = dims.size() < 2 ? 1 : dims.back();
  if (a.acc.scores) {  // collected; compared over every sample at once (Finish)
    a.want_cols.resize(last);
    a.got_cols.resize(last);
    for (size_t i = 0; i < w.size(); ++i) {
      a.want_cols[i % last].push_back(w[i]);
      a.got_cols[i % last].push_back(g[i]);
    }
    return;
  }
  const bool masked = mask != nullptr && dims.size() >= 3 && mask->rank() == 2 &&
                      dims[0] == mask->dims()[0] && dims[1] == mask->dims()[1] &&
                      dims[0] * dims[1] > 0;
  const int64_t rows = last > 0 ? static_cast<int64_t>(w.size()) / last : 0;
  const int64_t per_position = masked ? rows / (dims[0] * dims[1]) : 1;
  for (int64_t r = 0; r < rows; ++r) {
    if (masked && mask->GetAsDouble(r / per_position) == 0) continue;
    a.Row(w.data() + r * last, g.data() + r * last, last);
  }
}

OutputAccuracy Finish(Accum& a) {
  if (a.acc.scores) {
    // One vector of every score of every sample: a batch-1 sample's single logit has no
    // direction of its own.
    std::vector<double> w, g;
    for (size_t c = 0; c < a.want_cols.size(); ++c) {
      w.insert(w.end(), a.want_cols[c].begin(), a.want_cols[c].end());
      g.insert(g.end(), a.got_cols[c].begin(), a.got_cols[c].end());
    }
    if (!w.empty()) a.Row(w.data(), g.data(), static_cast<int64_t>(w.size()));
    a.acc.rows = a.want_cols.empty() ? 0 : static_cast<int64_t>(a.want_cols[0].size());
  }
  OutputAccuracy o = a.acc;
  o.max_rel = a.max_ref > 0 ? o.max_abs / a.max_ref : o.max_abs;
  o.cosine_mean = o.scores     ? o.cosine_worst
                  : o.rows > 0 ? a.cos_sum / static_cast<double>(o.rows)
                               : 1.0;
  for (size_t c = 0; c < a.want_cols.size(); ++c) {
    const std::optional<double> rho = verify_internal::Spearman(a.want_cols[c], a.got_cols[c]);
    if (rho) o.rank_agreement = o.rank_agreement ? NanMin(*o.rank_agreement, *rho) : *rho;
  }
  return o;
}

// The dims of each model input in bucket `b`: its signature with the bucket's bindings.
std::vector<std::vector<int64_t>> BucketInputDims(const Plan& plan, const PlanBucket& b) {
  const PlanIo io = IoOf(plan, b.program);
  std::vector<std::vector<int64_t>> dims(io.inputs.size());
  for (size_t i = 0; i < dims.size(); ++i)
    for (const Dim& d : io.inputs[i].dims) {
      const Dim v = SubstituteDim(d, b.bindings);
      dims[i].push_back(v.is_known() ? v.value() : 1);
    }
  return dims;
}

// Runs `exec` on `set` (model program, graph input order) and returns its outputs.
absl::StatusOr<std::vector<Tensor>> RunOn(const Executor& exec,
                                          const std::map<std::string, Tensor>& set) {
  const PlanIo io = IoOf(exec.plan(), PlanProgram::kModel);
  std::vector<TensorView> in;
  std::vector<std::vector<int64_t>> dims;
  for (const PlanTensorSig& s : io.inputs) {
    auto it = set.find(s.name);
    if (it == set.end())
      return absl::InvalidArgumentError(absl::StrCat("input '", s.name, "' missing"));
    in.push_back({it->second.dtype(), it->second.dims(), it->second.raw()});
    dims.push_back(it->second.dims());
  }
  KILN_ASSIGN_OR_RETURN(auto out_dims, exec.OutputDims(dims));
  std::vector<Tensor> outs;
  std::vector<MutableTensorView> views;
  for (size_t o = 0; o < io.outputs.size(); ++o) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(io.outputs[o].dtype, out_dims[o]));
    outs.push_back(std::move(t));
  }
  for (Tensor& t : outs) views.push_back({t.dtype(), t.dims(), t.raw()});
  KILN_RETURN_IF_ERROR(exec.Run(in, views));
  return outs;
}

// A generation plan's prefill gives `logits` at each sequence's last token ([B, 1, V],
// docs/generation.md) where the fp32 plan it is compared with gives every position
// ([B, S, V]): the fp32 rows it is to match are those at the last nonzero attention_mask
// position of each sequence (kiln.Pool{mode="last"}'s rule; zeros for a mask of none).
// nullopt when `want` is not that case.
std::optional<Tensor> LastTokenRows(const Tensor& want, const Tensor& got,
                                    const std::map<std::string, Tensor>& set) {
  auto mask = set.find("attention_mask");
  if (want.rank() != 3 || got.rank() != 3 || want.dtype() != DType::kF32 ||
      got.dims() != std::vector<int64_t>{want.dims()[0], 1, want.dims()[2]} || mask == set.end() ||
      mask->second.rank() != 2 || mask->second.dims()[0] != want.dims()[0] ||
      mask->second.dims()[1] != want.dims()[1])
    return std::nullopt;
  const int64_t b = want.dims()[0], s = want.dims()[1], v = want.dims()[2];
  Tensor rows(DType::kF32, {b, 1, v});
  for (int64_t i = 0; i < b; ++i) {
    int64_t last = s - 1;
    while (last >= 0 && mask->second.GetAsDouble(i * s + last) == 0.0) --last;
    for (int64_t j = 0; j < v; ++j)
      rows.data<float>()[i * v + j] = last < 0 ? 0.0f : want.data<float>()[(i * s + last) * v + j];
  }
  return rows;
}

}  // namespace

namespace verify_internal {

std::optional<double> Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n < 3 || b.size() != n) return std::nullopt;
  // A NaN score has no rank: the agreement is NaN, which meets no gate.
  if (std::any_of(a.begin(), a.end(), [](double v) { return std::isnan(v); }) ||
      std::any_of(b.begin(), b.end(), [](double v) { return std::isnan(v); }))
    return NAN;
  auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * static_cast<double>(i + j);
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

}  // namespace verify_internal

std::string PlanPrecision(const Plan& plan) {
  for (absl::string_view part : absl::StrSplit(plan.compile_options, ' '))
    if (absl::ConsumePrefix(&part, "precision=")) return std::string(part);
  return "fp32";
}

std::string AccuracyGate::ToString() const {
  return absl::StrCat(output.empty() ? "" : output + ":", metric,
                      at_least ? ">=" : "<=", absl::StrFormat("%.10g", bound));
}

absl::StatusOr<std::vector<AccuracyGate>> ParseAccuracyGates(std::string_view spec) {
  std::vector<AccuracyGate> gates;
  if (spec == "none") return gates;
  const absl::string_view text(spec.data(), spec.size());
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    AccuracyGate g;
    const size_t colon = part.find(':');
    if (colon != absl::string_view::npos) {
      g.output = std::string(part.substr(0, colon));
      part.remove_prefix(colon + 1);
    }
    size_t op = part.find(">=");
    g.at_least = op != absl::string_view::npos;
    if (!g.at_least) op = part.find("<=");
    if (op == absl::string_view::npos)
      return absl::InvalidArgumentError(absl::StrCat(
          "--accept: '", std::string(part), "' is not METRIC>=BOUND or METRIC<=BOUND (metrics: ",
          absl::StrJoin(kMetrics, ", "), ")"));
    g.metric = std::string(absl::StripAsciiWhitespace(part.substr(0, op)));
    if (std::none_of(std::begin(kMetrics), std::end(kMetrics),
                     [&](const char* m) { return g.metric == m; }))
      return absl::InvalidArgumentError(absl::StrCat("--accept: unknown metric '", g.metric, "' (",
                                                     absl::StrJoin(kMetrics, ", "), ")"));
    const absl::string_view bound = absl::StripAsciiWhitespace(part.substr(op + 2));
    if (!absl::SimpleAtod(bound, &g.bound) || !std::isfinite(g.bound))
      return absl::InvalidArgumentError(
          absl::StrCat("--accept: bad bound '", std::string(bound), "' for ", g.metric));
    gates.push_back(std::move(g));
  }
  if (gates.empty())
    return absl::InvalidArgumentError(
        "--accept: no gate given (e.g. cosine>=0.99,max_abs<=0.05; \"none\" for no gate)");
  return gates;
}

std::vector<AccuracyGate> DefaultAccuracyGates(std::string_view precision) {
  if (precision == "fp16" || precision == "bf16") return {{"", "cosine", true, 0.9999}};
  if (precision == "int8") return {{"", "cosine", true, 0.99}};
  return {};
}

std::optional<double> OutputAccuracy::Metric(std::string_view metric) const {
  if (metric == "cosine") return cosine_worst;
  if (metric == "cosine_mean") return cosine_mean;
  if (metric == "max_abs") return max_abs;
  if (metric == "max_rel") return max_rel;
  if (metric == "rank_agreement") return rank_agreement;
  return std::nullopt;
}

std::string AccuracyReport::Text() const {
  std::string s =
      absl::StrFormat("accuracy of the %s plan against fp32, %d %s:\n", precision, samples, inputs);
  absl::StrAppendFormat(&s, "  %-24s %7s %11s %11s %12s %12s %8s\n", "output", "rows", "max_abs",
                        "max_rel", "cosine_mean", "cosine_worst", "rank");
  for (const OutputAccuracy& o : outputs)
    absl::StrAppendFormat(&s, "  %-24s %7d %11.4g %11.4g %12.7f %12.7f %8s\n", o.name, o.rows,
                          o.max_abs, o.max_rel, o.cosine_mean, o.cosine_worst,
                          o.rank_agreement ? absl::StrFormat("%.4f", *o.rank_agreement) : "-");
  if (gates.empty()) {
    s += "  gates: none\n";
  } else {
    std::vector<std::string> g;
    for (const AccuracyGate& x : gates) g.push_back(x.ToString());
    absl::StrAppend(&s, "  gates: ", absl::StrJoin(g, ","), ok() ? " (all met)" : "", "\n");
  }
  for (const std::string& f : failures) absl::StrAppend(&s, "  NOT MET: ", f, "\n");
  return s;
}

std::string AccuracyReport::Json() const {
  auto quote = [](const std::string& v) {
    std::string q = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        absl::StrAppendFormat(&q, "\\u%04x", c);
        continue;
      }
      q += c;
    }
    return q + "\"";
  };
  auto num = [](double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "null"; };
  std::vector<std::string> outs;
  for (const OutputAccuracy& o : outputs)
    outs.push_back(absl::StrCat(
        "{\"name\": ", quote(o.name), ", \"scores\": ", o.scores ? "true" : "false", ", \"rows\": ",
        o.rows, ", \"max_abs\": ", num(o.max_abs), ", \"max_rel\": ", num(o.max_rel),
        ", \"cosine_mean\": ", num(o.cosine_mean), ", \"cosine_worst\": ", num(o.cosine_worst),
        ", \"rank_agreement\": ", o.rank_agreement ? num(*o.rank_agreement) : "null", "}"));
  std::vector<std::string> g, f;
  for (const AccuracyGate& x : gates) g.push_back(quote(x.ToString()));
  for (const std::string& x : failures) f.push_back(quote(x));
  return absl::StrCat("{\"precision\": ", quote(precision), ", \"samples\": ", samples,
                      ", \"inputs\": ", quote(inputs), ", \"outputs\": [",
                      absl::StrJoin(outs, ", "), "], \"gates\": [", absl::StrJoin(g, ", "),
                      "], \"failures\": [", absl::StrJoin(f, ", "),
                      "], \"ok\": ", ok() ? "true" : "false", "}");
}

absl::StatusOr<AccuracyReport> VerifyPlan(const std::string& model_path,
                                          std::shared_ptr<const Plan> plan,
                                          const VerifyOptions& options) {
  if (plan->target != PlanTarget::kCpu)
    return absl::UnimplementedError(
        "verify runs cpu plans; a cuda plan's accuracy is checked on a GPU by bench/gpu/check.sh");
  const PlanIo io = IoOf(*plan, PlanProgram::kModel);
  for (const AccuracyGate& g : options.gates) {
    if (g.output.empty()) continue;
    if (std::none_of(io.outputs.begin(), io.outputs.end(),
                     [&](const PlanTensorSig& s) { return s.name == g.output; }))
      return absl::InvalidArgumentError(
          absl::StrCat("--accept ", g.ToString(), ": the model has no output '", g.output, "'"));
  }
  AccuracyReport report;
  report.precision = PlanPrecision(*plan);
  report.gates = options.gates;
  // The input sets.
  std::vector<std::map<std::string, Tensor>> sets;
  if (!options.input_sets.empty()) {
    sets = options.input_sets;
    for (size_t i = 0; i < sets.size(); ++i)
      KILN_RETURN_IF_ERROR(compiler::CheckInputSet(
          io.inputs, sets[i], sets.size() == 1 ? "--input" : absl::StrCat("input set ", i)));
    report.inputs = "input sets given";
  } else if (!options.calib_dir.empty()) {
    KILN_ASSIGN_OR_RETURN(sets, ReadInputSets(*plan, options.calib_dir));
    report.inputs = absl::StrCat("input sets from ", options.calib_dir);
  } else {
    std::vector<const PlanBucket*> buckets;
    for (const PlanBucket& b : plan->buckets)
      if (b.program == PlanProgram::kModel) buckets.push_back(&b);
    if (buckets.empty())
      return absl::InvalidArgumentError("the plan has no model program to verify");
    compiler::InputRanges ranges;
    {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, ImportOnnxFile(model_path));
      ranges = compiler::AnalyzeInputs(*g);
    }
    const int samples = std::max(1, options.samples);
    for (int i = 0; i < samples; ++i) {
      // Spread over the buckets, smallest to largest, in the plan's order.
      const size_t b = samples == 1 ? 0 : i * (buckets.size() - 1) / (samples - 1);
      KILN_ASSIGN_OR_RETURN(
          auto set, compiler::SyntheticInputs(io.inputs, BucketInputDims(*plan, *buckets[b]),
                                              ranges, options.seed + static_cast<uint64_t>(i)));
      sets.push_back(std::move(set));
    }
    report.inputs = absl::StrCat("seeded random input sets (seed ", options.seed, ")");
  }
  report.samples = static_cast<int>(sets.size());

  ExecutorOptions eo;
  eo.num_threads = options.threads;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, Executor::Create(plan, eo));
  std::map<std::vector<std::vector<int64_t>>, std::unique_ptr<Executor>> oracles;
  std::vector<Accum> acc(io.outputs.size());
  for (size_t o = 0; o < acc.size(); ++o) {
    acc[o].acc.name = io.outputs[o].name;
    acc[o].acc.scores = IsScoreOutput(io.outputs[o]);
  }
  const Tensor* mask = nullptr;
  for (size_t s = 0; s < sets.size(); ++s) {
    const auto& set = sets[s];
    std::vector<std::vector<int64_t>> dims;
    for (const PlanTensorSig& sig : io.inputs) dims.push_back(set.at(sig.name).dims());
    std::unique_ptr<Executor>& oracle = oracles[dims];
    if (!oracle) {
      CompileOptions o = options.compile_options.value_or(CompileOptions{});
      o.target = PlanTarget::kCpu;
      o.precision = "fp32";
      o.profile.clear();
      o.symbols.clear();
      o.decode_context.clear();
      o.prefill_logits = "last";  // the option of generation plans only
      o.gemm_group_precision.clear();
      o.head_precision.clear();
      o.int8_activations = "dynamic";
      o.calib_dir.clear();
      o.input_shapes.clear();
      o.progress = nullptr;
      for (size_t i = 0; i < io.inputs.size(); ++i) o.input_shapes[io.inputs[i].name] = dims[i];
      absl::StatusOr<Plan> fp32 = Compile(model_path, o);
      if (!fp32.ok())
        return absl::Status(
            fp32.status().code(),
            absl::StrCat("compiling the fp32 plan to compare with: ", fp32.status().message()));
      KILN_ASSIGN_OR_RETURN(oracle, Executor::Create(std::make_shared<Plan>(*std::move(fp32)), eo));
    }
    absl::StatusOr<std::vector<Tensor>> got = RunOn(*exec, set);
    if (!got.ok())
      return absl::Status(got.status().code(),
                          absl::StrCat("input set ", s, ": ", got.status().message()));
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> want, RunOn(*oracle, set));
    mask = nullptr;
    for (const auto& [name, t] : set)
      if (absl::AsciiStrToLower(name).find("mask") != std::string::npos && t.rank() == 2) mask = &t;
    for (size_t o = 0; o < acc.size(); ++o) {
      if (io.outputs[o].name == "logits" && HasProgram(*plan, PlanProgram::kDecode))
        if (std::optional<Tensor> rows = LastTokenRows(want[o], (*got)[o], set))
          want[o] = *std::move(rows);
      if (want[o].dims() != (*got)[o].dims()) {
        // The executor sizes each output from the plan: a mismatch is the plan's error.
        report.failures.push_back(absl::StrCat(io.outputs[o].name, ": input set ", s,
                                               " gives it dims ", (*got)[o].ShapeString(),
                                               ", the fp32 plan ", want[o].ShapeString()));
        continue;
      }
      Compare(want[o], (*got)[o], mask, acc[o]);
    }
  }
  for (Accum& a : acc) report.outputs.push_back(Finish(a));
  for (const AccuracyGate& g : report.gates) {
    bool checked = false;
    for (const OutputAccuracy& o : report.outputs) {
      if (!g.output.empty() && g.output != o.name) continue;
      const std::optional<double> v = o.Metric(g.metric);
      if (!v) {
        if (!g.output.empty())
          report.failures.push_back(absl::StrCat(o.name, ": ", g.metric,
                                                 " is not defined for it (not a score output "
                                                 "with 3 rows or more)"));
        continue;
      }
      checked = true;
      const bool met = g.at_least ? *v >= g.bound : *v <= g.bound;
      if (!met)
        report.failures.push_back(
            absl::StrCat(o.name, ": ", g.metric, " ", Num(*v), ", wants ",
                         g.at_least ? ">= " : "<= ", absl::StrFormat("%.10g", g.bound)));
    }
    // A gate no output could be measured by is not met (rank_agreement without a score
    // output of 3 rows or more): a gate that checks nothing would pass every plan.
    if (!checked && g.output.empty())
      report.failures.push_back(absl::StrCat(g.ToString(), ": no output defines ", g.metric,
                                             " (a score output with 3 rows or more)"));
  }
  return report;
}

namespace {

// One compile the gated loop tries: the precision and GEMM group fallbacks.
struct Attempt {
  std::string precision;
  std::map<std::string, std::string> groups;
  std::string label;
};

// --precision auto on cpu: int8, int8 with the attention GEMMs in bf16, bf16, fp32 — the
// lowest precision first, falling back a group of GEMMs at a time.
std::vector<Attempt> Attempts(const CompileOptions& o) {
  if (o.precision != "auto") return {{o.precision, o.gemm_group_precision, o.precision}};
  return {{"int8", {}, "int8"},
          {"int8", {{"attention", "bf16"}}, "int8 with the attention GEMMs in bf16"},
          {"bf16", {}, "bf16"},
          {"fp32", {}, "fp32"}};
}

std::string GatesText(const std::vector<AccuracyGate>& gates) {
  return absl::StrJoin(gates, ",",
                       [](std::string* out, const AccuracyGate& g) { out->append(g.ToString()); });
}

// The gated loop both gated compiles share. `compile_one(options)` compiles an attempt and
// returns its plan for verification (or the error); `accept(last)` keeps the plan that
// passed (or, for the last attempt without gates, the only one) — rename the file, move the
// plan. An attempt without gates (fp32, or --accept none) is accepted as is.
absl::Status GatedLoop(
    const std::string& model_path, const CompileOptions& compile, const VerifyOptions& verify,
    AccuracyReport* report,
    const std::function<absl::StatusOr<std::shared_ptr<const Plan>>(const CompileOptions&)>&
        compile_one,
    const std::function<absl::Status()>& accept, const std::function<void()>& discard,
    const std::string& where) {
  if (compile.precision == "auto" && compile.target != PlanTarget::kCpu)
    return absl::UnimplementedError(
        "precision 'auto' picks by the accuracy gate, which runs cpu plans; give a cuda plan "
        "its precision");
  const std::vector<Attempt> attempts = Attempts(compile);
  for (size_t a = 0; a < attempts.size(); ++a) {
    CompileOptions c = compile;
    c.precision = attempts[a].precision;
    c.gemm_group_precision = attempts[a].groups;
    if (compile.precision == "auto" && c.precision != "int8")
      c.int8_activations = "dynamic";  // auto's bf16 / fp32 attempts
    // auto's fallbacks never keep a head below the attempt's precision.
    if (compile.precision == "auto" && c.precision == "fp32") c.head_precision.clear();
    if (compile.precision == "auto" && c.precision == "bf16" && c.head_precision == "int8")
      c.head_precision = "bf16";
    const std::vector<AccuracyGate> gates =
        verify.default_gates ? DefaultAccuracyGates(c.precision) : verify.gates;
    absl::StatusOr<std::shared_ptr<const Plan>> plan = compile_one(c);
    if (!plan.ok()) {
      discard();
      return plan.status();
    }
    if (gates.empty()) return accept();
    if (compile.progress)
      compile.progress(absl::StrCat("verify: the ", attempts[a].label, " plan against fp32, gates ",
                                    GatesText(gates)));
    VerifyOptions v = verify;
    v.gates = gates;
    v.compile_options = c;
    absl::StatusOr<AccuracyReport> r = VerifyPlan(model_path, *plan, v);
    if (!r.ok()) {
      discard();
      return absl::Status(r.status().code(),
                          absl::StrCat("verifying the plan: ", r.status().message()));
    }
    if (report) *report = *r;
    if (r->ok()) {
      if (compile.precision == "auto" && compile.progress)
        compile.progress(absl::StrCat("precision auto: ", attempts[a].label, " (gates met)"));
      return accept();
    }
    discard();
    if (a + 1 < attempts.size()) {
      if (compile.progress)
        compile.progress(absl::StrCat("precision auto: ", attempts[a].label, " fails its gate (",
                                      absl::StrJoin(r->failures, "; "), "); trying ",
                                      attempts[a + 1].label));
      continue;
    }
    return absl::AbortedError(
        absl::StrCat("the ", attempts[a].label, " plan fails its accuracy gate (",
                     absl::StrJoin(r->failures, "; "), "); no plan written", where,
                     " (kiln verify shows the figures; --accept sets the gates)"));
  }
  return KILN_INTERNAL("the gated compile tried nothing");
}

}  // namespace

absl::StatusOr<PlanInfo> CompileToFileGated(const std::string& model_path,
                                            const std::string& plan_path,
                                            const CompileOptions& compile,
                                            const VerifyOptions& verify, AccuracyReport* report) {
  // No gate to check (fp32 by default, --accept none): the plan is written as it is.
  if (compile.precision != "auto" &&
      (verify.default_gates ? DefaultAccuracyGates(compile.precision) : verify.gates).empty())
    return CompileToFile(model_path, plan_path, compile);
  const std::string tmp = absl::StrCat(plan_path, ".unverified.", ::getpid());
  absl::StatusOr<PlanInfo> info;
  auto discard = [&] {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
  };
  auto compile_one = [&](const CompileOptions& c) -> absl::StatusOr<std::shared_ptr<const Plan>> {
    info = CompileToFile(model_path, tmp, c);
    if (!info.ok()) return info.status();
    KILN_ASSIGN_OR_RETURN(Plan plan, LoadPlanFile(tmp));
    return std::make_shared<const Plan>(std::move(plan));
  };
  auto accept = [&]() -> absl::Status {
    std::error_code ec;
    std::filesystem::rename(tmp, plan_path, ec);
    if (!ec) return absl::OkStatus();
    discard();
    return absl::PermissionDeniedError(
        absl::StrCat("cannot move the verified plan to '", plan_path, "': ", ec.message()));
  };
  KILN_RETURN_IF_ERROR(GatedLoop(model_path, compile, verify, report, compile_one, accept, discard,
                                 absl::StrCat(" to ", plan_path)));
  return info;
}

absl::StatusOr<Plan> CompileGated(const std::string& model_path, const CompileOptions& compile,
                                  const VerifyOptions& verify, AccuracyReport* report) {
  std::shared_ptr<const Plan> last;
  auto compile_one = [&](const CompileOptions& c) -> absl::StatusOr<std::shared_ptr<const Plan>> {
    KILN_ASSIGN_OR_RETURN(Plan plan, Compile(model_path, c));
    last = std::make_shared<const Plan>(std::move(plan));
    return last;
  };
  KILN_RETURN_IF_ERROR(GatedLoop(
      model_path, compile, verify, report, compile_one, [] { return absl::OkStatus(); },
      [&] { last.reset(); }, ""));
  return *last;
}

}  // namespace kiln
