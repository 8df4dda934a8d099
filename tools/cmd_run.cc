// `kiln run MODEL.onnx ...`: imports a model, binds inputs (from .npy files or seeded
// random data), runs it on the reference executor, prints a summary of every output and
// the wall time, and optionally writes each output as OUTDIR/<output name>.npy.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kiln/onnx/importer.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/reference/executor.h"
#include "kiln/support/npy.h"
#include "kiln/support/status.h"
#include "tools/cli.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln run MODEL.onnx [options]\n"
    "\n"
    "Runs MODEL.onnx on kiln's reference executor and prints, for each output, its dtype,\n"
    "shape, min, max and mean, then the wall time.\n"
    "\n"
    "options:\n"
    "  --input NAME=FILE.npy    bind graph input NAME to a NumPy file (repeatable)\n"
    "  --shape SPEC             concrete dims for random inputs (repeatable; SPEC is a\n"
    "                           comma-separated list of NAME=D0xD1... for a graph input, or\n"
    "                           SYMBOL=N for a symbolic dim, e.g. --shape batch=1,sequence=128)\n"
    "  --random-inputs          generate inputs not given with --input (seeded)\n"
    "  --seed N                 seed for --random-inputs (default 0)\n"
    "  --vocab N                integer inputs are drawn from [0, N) (default 100)\n"
    "  --int-range NAME=LO:HI   integer input NAME is drawn from [LO, HI) instead (repeatable).\n"
    "                           Defaults: inputs whose name contains 'mask' are all 1,\n"
    "                           'token_type' or 'segment' inputs are all 0\n"
    "  --output-dir DIR         write each output to DIR/<output name>.npy\n"
    "  -O0 | -O1 | -O2          optimize the graph before running it (default -O0): the\n"
    "                           pipeline of `kiln opt`, specialized to the bound inputs'\n"
    "                           shapes; outputs must not change beyond float rounding\n"
    "  --quiet                  print only the time line\n";

struct Options {
  std::string model;
  std::map<std::string, std::string> input_files;
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::map<std::string, int64_t> symbols;
  std::map<std::string, std::pair<int64_t, int64_t>> int_ranges;
  bool random_inputs = false;
  uint64_t seed = 0;
  int64_t vocab = 100;
  std::string output_dir;
  bool quiet = false;
  int opt_level = 0;
};

// Binds symbols from the declared shapes of inputs given as files.
void BindSymbolsFrom(const Type& declared, const Tensor& t, Options* o) {
  if (!declared.shape || static_cast<int>(declared.shape->size()) != t.rank()) return;
  for (int i = 0; i < t.rank(); ++i) {
    const Dim& d = (*declared.shape)[i];
    if (d.is_symbol() && !o->symbols.count(d.symbol())) o->symbols[d.symbol()] = t.dims()[i];
  }
}

absl::StatusOr<std::vector<int64_t>> ResolveShape(const std::string& name, const Type& declared,
                                                  const Options& o) {
  auto it = o.input_shapes.find(name);
  if (it != o.input_shapes.end()) return it->second;
  if (!declared.shape)
    return absl::InvalidArgumentError(
        absl::StrCat("input '", name, "' has unknown rank: give --shape ", name, "=D0xD1..."));
  std::vector<int64_t> dims;
  std::vector<std::string> missing;
  for (const Dim& d : *declared.shape) {
    if (d.is_known()) {
      dims.push_back(d.value());
    } else if (d.is_symbol() && o.symbols.count(d.symbol())) {
      dims.push_back(o.symbols.at(d.symbol()));
    } else {
      missing.push_back(d.is_symbol() ? d.symbol() : "?");
      dims.push_back(0);
    }
  }
  if (!missing.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "' has dims [", absl::StrJoin(missing, ", "),
        "] with no size: give --shape SYMBOL=N or --shape ", name, "=D0xD1..."));
  return dims;
}

absl::StatusOr<Tensor> RandomTensor(const std::string& name, DType dtype,
                                    const std::vector<int64_t>& dims, const Options& o,
                                    std::mt19937_64& rng) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, dims));
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  int64_t lo = 0, hi = o.vocab;
  if (auto it = o.int_ranges.find(name); it != o.int_ranges.end()) {
    std::tie(lo, hi) = it->second;
  } else if (name.find("mask") != std::string::npos) {
    lo = 1, hi = 2;
  } else if (name.find("token_type") != std::string::npos ||
             name.find("segment") != std::string::npos) {
    lo = 0, hi = 1;
  }
  if (IsInteger(dtype)) {  // the drawn values must be representable in the input's dtype
    const size_t bits = 8 * DTypeSize(dtype);
    const bool is_unsigned = dtype == DType::kU8 || dtype == DType::kU16 || dtype == DType::kU32 ||
                             dtype == DType::kU64;
    const long double max = is_unsigned ? std::ldexp(1.0L, bits) - 1 : std::ldexp(1.0L, bits - 1) - 1;
    const long double min = is_unsigned ? 0 : -std::ldexp(1.0L, bits - 1);
    if (static_cast<long double>(lo) < min || static_cast<long double>(hi) - 1 > max)
      return absl::InvalidArgumentError(absl::StrCat(
          "random values for input '", name, "' would be drawn from [", lo, ", ", hi,
          "), which does not fit its dtype ", std::string(DTypeName(dtype)),
          ": use --vocab or --int-range NAME=LO:HI"));
  }
  // hi - lo computed unsigned: the span of any int64 range [lo, hi) fits in uint64.
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (IsFloat(dtype)) {
      t.SetFromDouble(i, 2.0 * uniform() - 1.0);
    } else if (dtype == DType::kBool) {
      t.SetFromDouble(i, uniform() < 0.5 ? 0 : 1);
    } else if (IsInteger(dtype)) {
      const uint64_t offset = rng() % span;  // span >= 1: hi > lo is checked at parse time
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(lo) + offset);
      if (dtype == DType::kI64) t.data<int64_t>()[i] = v;
      else if (dtype == DType::kU64) t.data<uint64_t>()[i] = static_cast<uint64_t>(v);
      else t.SetFromDouble(i, static_cast<double>(v));
    } else {
      return absl::UnimplementedError(absl::StrCat("cannot generate random input '", name,
                                                   "' of dtype ", std::string(DTypeName(dtype))));
    }
  }
  return t;
}

int RunImpl(Options& o, const std::vector<std::string>& shape_specs) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto imported = ImportOnnxFile(o.model);
  if (!imported.ok()) return Fail(imported.status());
  Graph& g = **imported;
  const auto t1 = Clock::now();
  for (const std::string& spec : shape_specs)
    if (absl::Status s = ParseShapeSpec(spec, g, &o.input_shapes, &o.symbols); !s.ok())
      return Fail(s);

  for (const auto& [name, file] : o.input_files) {
    bool found = false;
    for (const Node* in : g.inputs()) found |= in->output_info(0).name == name;
    if (!found)
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--input: the model has no input named '", name, "'")));
  }

  absl::flat_hash_map<std::string, Tensor> feeds;
  for (const Node* in : g.inputs()) {
    const std::string& name = in->output_info(0).name;
    auto it = o.input_files.find(name);
    if (it == o.input_files.end()) continue;
    auto t = ReadNpy(it->second);
    if (!t.ok()) return Fail(t.status());
    if (t->dtype() != in->output_info(0).type.dtype)
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "input '", name, "' is declared ", in->output_info(0).type.ToString(), " but '",
          it->second, "' holds ", std::string(DTypeName(t->dtype())))));
    BindSymbolsFrom(in->output_info(0).type, *t, &o);
    feeds[name] = *std::move(t);
  }
  std::mt19937_64 rng(o.seed);
  for (const Node* in : g.inputs()) {
    const std::string& name = in->output_info(0).name;
    if (feeds.contains(name)) continue;
    if (!o.random_inputs)
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "input '", name, "' is not bound: use --input ", name, "=FILE.npy or --random-inputs")));
    auto dims = ResolveShape(name, in->output_info(0).type, o);
    if (!dims.ok()) return Fail(dims.status());
    auto t = RandomTensor(name, in->output_info(0).type.dtype, *dims, o, rng);
    if (!t.ok()) return Fail(t.status());
    feeds[name] = *std::move(t);
  }

  std::string opt_line;
  if (o.opt_level > 0) {
    const auto o0 = Clock::now();
    PassContext ctx;
    for (const auto& [name, t] : feeds) ctx.input_shapes[name] = t.dims();
    auto pipeline = StandardPipeline(o.opt_level);
    if (!pipeline.ok()) return Fail(pipeline.status());
    const int before = CountComputeNodes(g);
    PassManager pm;
    if (absl::Status s = pm.Run(*pipeline, g, ctx); !s.ok()) return Fail(s);
    opt_line = absl::StrFormat(", optimize -O%d %.1f ms (%d -> %d nodes)", o.opt_level,
                               std::chrono::duration<double, std::milli>(Clock::now() - o0).count(),
                               before, CountComputeNodes(g));
  }
  const auto t2 = Clock::now();
  auto outputs = RunReference(g, feeds);
  if (!outputs.ok()) return Fail(outputs.status());
  const auto t3 = Clock::now();

  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec)
      return Fail(absl::PermissionDeniedError(
          absl::StrCat("cannot create output dir '", o.output_dir, "': ", ec.message())));
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    const Tensor& t = (*outputs)[i];
    const std::string& name = g.outputs()[i].name;
    if (!o.quiet) {
      double mn = INFINITY, mx = -INFINITY, sum = 0;
      const int64_t n = t.NumElements();
      for (int64_t j = 0; j < n; ++j) {
        const double v = t.GetAsDouble(j);
        mn = std::min(mn, v);
        mx = std::max(mx, v);
        sum += v;
      }
      if (n == 0) {
        std::printf("%-24s %-5s [%s]  (empty)\n", name.c_str(),
                    std::string(DTypeName(t.dtype())).c_str(), absl::StrJoin(t.dims(), ",").c_str());
      } else {
        std::printf("%-24s %-5s [%s]  min %.6g  max %.6g  mean %.6g\n", name.c_str(),
                    std::string(DTypeName(t.dtype())).c_str(), absl::StrJoin(t.dims(), ",").c_str(),
                    mn, mx, sum / n);
      }
    }
    if (!o.output_dir.empty()) {
      std::string safe = name;
      for (char& c : safe)
        if (c == '/' || c == '\\' || c == ':') c = '_';
      if (safe.empty() || safe == "." || safe == "..") safe = absl::StrCat("output_", i);
      if (absl::Status s = WriteNpy((std::filesystem::path(o.output_dir) / (safe + ".npy")).string(), t);
          !s.ok())
        return Fail(s);
    }
  }
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("import %.1f ms%s, run %.1f ms (reference executor, %zu outputs)\n",
              ms(t1 - t0), opt_line.c_str(), ms(t3 - t2), outputs->size());
  return kExitOk;
}

}  // namespace

int RunRun(int argc, char** argv) {
  Args args(argc, argv, 2);
  Options o;
  std::vector<std::string> shape_specs;
  std::string v;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (args.Flag("--random-inputs")) { o.random_inputs = true; continue; }
    if (args.Flag("--quiet")) { o.quiet = true; continue; }
    if (args.Flag("-O0")) { o.opt_level = 0; continue; }
    if (args.Flag("-O1")) { o.opt_level = 1; continue; }
    if (args.Flag("-O2")) { o.opt_level = 2; continue; }
    if (args.Option("--input", &v)) {
      std::pair<std::string, std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
      if (kv.first.empty() || kv.second.empty())
        return Fail(absl::InvalidArgumentError(absl::StrCat("--input: want NAME=FILE.npy, got '", v, "'")));
      o.input_files[kv.first] = kv.second;
      continue;
    }
    if (args.Option("--shape", &v)) { shape_specs.push_back(v); continue; }
    if (args.Option("--output-dir", &v)) { o.output_dir = v; continue; }
    if (args.Option("--seed", &v)) {
      if (!absl::SimpleAtoi(v, &o.seed))
        return Fail(absl::InvalidArgumentError(absl::StrCat("--seed: bad value '", v, "'")));
      continue;
    }
    if (args.Option("--vocab", &v)) {
      if (!absl::SimpleAtoi(v, &o.vocab) || o.vocab <= 0)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--vocab: bad value '", v, "'")));
      continue;
    }
    if (args.Option("--int-range", &v)) {
      std::pair<std::string, std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
      std::pair<std::string, std::string> lh = absl::StrSplit(kv.second, absl::MaxSplits(':', 1));
      int64_t lo, hi;
      if (kv.first.empty() || !absl::SimpleAtoi(lh.first, &lo) || !absl::SimpleAtoi(lh.second, &hi) ||
          hi <= lo)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--int-range: want NAME=LO:HI with LO < HI, got '", v, "'")));
      o.int_ranges[kv.first] = {lo, hi};
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    if (o.model.empty() && args.Positional(&o.model)) continue;
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("run: unexpected argument '", args.Next(), "' (see kiln run --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  if (o.model.empty())
    return Fail(absl::InvalidArgumentError("run: no model given (see kiln run --help)"));
  return RunImpl(o, shape_specs);
}

}  // namespace kiln::cli
