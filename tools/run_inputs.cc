// Input binding and output reporting shared by `kiln run` and `kiln bench` (run_inputs.h).
#include "tools/run_inputs.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kiln/support/npy.h"
#include "kiln/support/status.h"

namespace kiln::cli {
namespace {

// Binds symbols from the declared shapes of inputs given as files.
void BindSymbolsFrom(const Type& declared, const Tensor& t, InputOptions* o) {
  if (!declared.shape || static_cast<int>(declared.shape->size()) != t.rank()) return;
  for (int i = 0; i < t.rank(); ++i) {
    const Dim& d = (*declared.shape)[i];
    if (d.is_symbol() && !o->symbols.count(d.symbol())) o->symbols[d.symbol()] = t.dims()[i];
  }
}

absl::StatusOr<std::vector<int64_t>> ResolveShape(const std::string& name, const Type& declared,
                                                  const InputOptions& o) {
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
    } else if (d.is_symbol() && o.default_symbols.count(d.symbol())) {
      dims.push_back(o.default_symbols.at(d.symbol()));
    } else {
      missing.push_back(d.is_symbol() ? d.symbol() : "?");
      dims.push_back(0);
    }
  }
  if (!missing.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("input '", name, "' has dims [", absl::StrJoin(missing, ", "),
                     "] with no size: give --shape SYMBOL=N or --shape ", name, "=D0xD1..."));
  return dims;
}

absl::StatusOr<Tensor> RandomTensor(const std::string& name, DType dtype,
                                    const std::vector<int64_t>& dims, const InputOptions& o,
                                    std::mt19937_64& rng) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, dims));
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  int64_t lo = 0, hi = o.vocab;
  const std::string lname = absl::AsciiStrToLower(name);
  auto it = o.int_ranges.find(name);
  if (it != o.int_ranges.end()) {
    std::tie(lo, hi) = it->second;
  } else if (name == "sequence_lengths" && dims.size() == 1 && dims[0] > 0 && IsInteger(dtype)) {
    // A packed program's lengths (docs/packing.md): the tokens split evenly, the remainder
    // to the first sequences, so that random inputs fill the bucket exactly.
    int64_t tokens = dims[0];
    if (auto s = o.symbols.find("tokens"); s != o.symbols.end())
      tokens = s->second;
    else if (auto d = o.default_symbols.find("tokens"); d != o.default_symbols.end())
      tokens = d->second;
    for (int64_t i = 0; i < dims[0]; ++i)
      t.SetFromDouble(i, static_cast<double>(tokens / dims[0] + (i < tokens % dims[0] ? 1 : 0)));
    return t;
  } else if (lname.find("mask") != std::string::npos) {
    // Masks keep every position, whatever their dtype: 1, 1.0 or true.
    for (int64_t i = 0; i < t.NumElements(); ++i) t.SetFromDouble(i, 1.0);
    return t;
  } else if (lname.find("token_type") != std::string::npos ||
             lname.find("segment") != std::string::npos) {
    lo = 0, hi = 1;
  }
  if (IsInteger(dtype)) {  // the drawn values must be representable in the input's dtype
    const size_t bits = 8 * DTypeSize(dtype);
    const bool is_unsigned =
        dtype == DType::kU8 || dtype == DType::kU16 || dtype == DType::kU32 || dtype == DType::kU64;
    const long double max =
        is_unsigned ? std::ldexp(1.0L, bits) - 1 : std::ldexp(1.0L, bits - 1) - 1;
    const long double min = is_unsigned ? 0 : -std::ldexp(1.0L, bits - 1);
    if (static_cast<long double>(lo) < min || static_cast<long double>(hi) - 1 > max)
      return absl::InvalidArgumentError(
          absl::StrCat("random values for input '", name, "' would be drawn from [", lo, ", ", hi,
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
      if (dtype == DType::kI64)
        t.data<int64_t>()[i] = v;
      else if (dtype == DType::kU64)
        t.data<uint64_t>()[i] = static_cast<uint64_t>(v);
      else
        t.SetFromDouble(i, static_cast<double>(v));
    } else {
      return absl::UnimplementedError(absl::StrCat("cannot generate random input '", name,
                                                   "' of dtype ", std::string(DTypeName(dtype))));
    }
  }
  return t;
}

}  // namespace

bool ParseInputFlag(Args& args, InputOptions* o, absl::Status* error) {
  std::string v;
  if (args.Flag("--random-inputs")) {
    o->random_inputs = true;
    return true;
  }
  if (args.Option("--input", &v)) {
    std::pair<std::string, std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty())
      *error =
          absl::InvalidArgumentError(absl::StrCat("--input: want NAME=FILE.npy, got '", v, "'"));
    else
      o->input_files[kv.first] = kv.second;
    return true;
  }
  if (args.Option("--shape", &v)) {
    o->shape_specs.push_back(v);
    return true;
  }
  if (args.Option("--seed", &v)) {
    if (!absl::SimpleAtoi(v, &o->seed))
      *error = absl::InvalidArgumentError(absl::StrCat("--seed: bad value '", v, "'"));
    return true;
  }
  if (args.Option("--vocab", &v)) {
    if (!absl::SimpleAtoi(v, &o->vocab) || o->vocab <= 0)
      *error = absl::InvalidArgumentError(absl::StrCat("--vocab: bad value '", v, "'"));
    return true;
  }
  if (args.Option("--int-range", &v)) {
    std::pair<std::string, std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
    std::pair<std::string, std::string> lh = absl::StrSplit(kv.second, absl::MaxSplits(':', 1));
    int64_t lo, hi;
    if (kv.first.empty() || !absl::SimpleAtoi(lh.first, &lo) || !absl::SimpleAtoi(lh.second, &hi) ||
        hi <= lo)
      *error = absl::InvalidArgumentError(
          absl::StrCat("--int-range: want NAME=LO:HI with LO < HI, got '", v, "'"));
    else
      o->int_ranges[kv.first] = {lo, hi};
    return true;
  }
  return false;
}

absl::StatusOr<std::vector<Tensor>> BindInputs(const std::vector<InputDecl>& decls,
                                               InputOptions* o) {
  std::vector<std::string> names;
  for (const InputDecl& d : decls) names.push_back(d.name);
  for (const std::string& spec : o->shape_specs)
    KILN_RETURN_IF_ERROR(ParseShapeSpec(spec, names, &o->input_shapes, &o->symbols));
  for (const auto& [name, file] : o->input_files) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      return absl::InvalidArgumentError(
          absl::StrCat("--input: the model has no input named '", name, "'"));
  }
  std::vector<Tensor> feeds(decls.size());
  std::vector<bool> bound(decls.size(), false);
  for (size_t i = 0; i < decls.size(); ++i) {
    const InputDecl& d = decls[i];
    auto it = o->input_files.find(d.name);
    if (it == o->input_files.end()) continue;
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadNpy(it->second));
    if (t.dtype() != d.type.dtype)
      return absl::InvalidArgumentError(
          absl::StrCat("input '", d.name, "' is declared ", d.type.ToString(), " but '", it->second,
                       "' holds ", std::string(DTypeName(t.dtype()))));
    BindSymbolsFrom(d.type, t, o);
    feeds[i] = std::move(t);
    bound[i] = true;
  }
  std::mt19937_64 rng(o->seed);
  for (size_t i = 0; i < decls.size(); ++i) {
    if (bound[i]) continue;
    const InputDecl& d = decls[i];
    if (!o->random_inputs)
      return absl::InvalidArgumentError(absl::StrCat("input '", d.name,
                                                     "' is not bound: use --input ", d.name,
                                                     "=FILE.npy or --random-inputs"));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ResolveShape(d.name, d.type, *o));
    KILN_ASSIGN_OR_RETURN(feeds[i], RandomTensor(d.name, d.type.dtype, dims, *o, rng));
  }
  return feeds;
}

void PrintOutputSummary(const std::string& name, const Tensor& t) {
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  const int64_t n = t.NumElements();
  for (int64_t j = 0; j < n; ++j) {
    const double v = t.GetAsDouble(j);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
  }
  const std::string dtype(DTypeName(t.dtype()));
  const std::string dims = absl::StrJoin(t.dims(), ",");
  if (n == 0) {
    std::printf("%-24s %-5s [%s]  (empty)\n", name.c_str(), dtype.c_str(), dims.c_str());
  } else {
    std::printf("%-24s %-5s [%s]  min %.6g  max %.6g  mean %.6g\n", name.c_str(), dtype.c_str(),
                dims.c_str(), mn, mx, sum / n);
  }
}

absl::Status WriteOutputs(const std::string& dir, const std::vector<std::string>& names,
                          const std::vector<Tensor>& outputs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create output dir '", dir, "': ", ec.message()));
  for (size_t i = 0; i < outputs.size() && i < names.size(); ++i) {
    std::string safe = names[i];
    for (char& c : safe)
      if (c == '/' || c == '\\' || c == ':') c = '_';
    if (safe.empty() || safe == "." || safe == "..") safe = absl::StrCat("output_", i);
    KILN_RETURN_IF_ERROR(
        WriteNpy((std::filesystem::path(dir) / (safe + ".npy")).string(), outputs[i]));
  }
  return absl::OkStatus();
}

bool LooksLikePlan(const std::string& path) {
  if (absl::EndsWith(path, ".kiln")) return true;
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  if (!f.read(magic, sizeof(magic))) return false;
  return std::memcmp(magic, "KILNPLAN", sizeof(magic)) == 0;
}

}  // namespace kiln::cli
