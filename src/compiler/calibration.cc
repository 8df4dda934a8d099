// Input sets for running a model (calibration.h): synthesized from the model's graph, or
// read from a folder.
#include "compiler/calibration.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/dim_expr.h"
#include "kiln/support/npy.h"
#include "kiln/support/status.h"

namespace kiln::compiler {
namespace {

bool IsIndexPreserving(const Node& n) {
  static const std::set<std::string> kOps = {"Cast",    "Reshape",  "Unsqueeze", "Squeeze",
                                             "Flatten", "Identity", "Expand",    "Slice"};
  return n.domain().empty() && kOps.count(n.op()) > 0;
}

// The rows of the smallest constant table `input` indexes, or nullopt.
std::optional<int64_t> TableRows(Node* input) {
  std::optional<int64_t> rows;
  std::vector<Value> todo = {input->output(0)};
  std::set<std::pair<int, int>> seen;
  while (!todo.empty()) {
    const Value v = todo.back();
    todo.pop_back();
    if (!seen.insert({v.node->id(), v.index}).second) continue;
    for (const Use& u : v.node->output_info(v.index).uses) {
      const Node& user = *u.user;
      if (user.domain().empty() && user.op() == "Gather" && u.operand == 1) {
        const Tensor* table = user.input(0) ? user.input(0).node->constant_value() : nullptr;
        if (table == nullptr || table->rank() == 0) continue;
        int64_t axis = user.attr_int_or("axis", 0);
        if (axis < 0) axis += table->rank();
        if (axis < 0 || axis >= table->rank()) continue;
        const int64_t r = table->dims()[axis];
        rows = rows ? std::min(*rows, r) : r;
      } else if (IsIndexPreserving(user) && u.operand == 0) {
        for (int o = 0; o < user.num_outputs(); ++o)
          todo.push_back(const_cast<Node&>(user).output(o));
      }
    }
  }
  return rows;
}

bool NameHas(const std::string& name, std::string_view what) {
  return absl::AsciiStrToLower(name).find(what) != std::string::npos;
}

}  // namespace

InputRanges AnalyzeInputs(const Graph& g) {
  InputRanges r;
  for (Node* in : g.inputs())
    if (auto rows = TableRows(in)) r.table_rows[in->output_info(0).name] = *rows;
  return r;
}

absl::StatusOr<std::map<std::string, Tensor>> SyntheticInputs(
    const std::vector<PlanTensorSig>& sigs, const std::vector<std::vector<int64_t>>& dims,
    const InputRanges& ranges, uint64_t seed) {
  std::mt19937_64 gen(seed * 0x9e3779b97f4a7c15ull + 1);
  std::map<std::string, Tensor> out;
  // One set of row lengths per input set, shared by every mask of the same [batch, seq].
  std::map<std::vector<int64_t>, std::vector<int64_t>> lengths_of;
  for (size_t i = 0; i < sigs.size(); ++i) {
    const PlanTensorSig& sig = sigs[i];
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(sig.dtype, dims[i]));
    const int64_t n = t.NumElements();
    const int64_t last = dims[i].empty() ? 1 : dims[i].back();
    if (NameHas(sig.name, "mask") &&
        (IsInteger(sig.dtype) || sig.dtype == DType::kBool || IsFloat(sig.dtype))) {
      const int64_t rows = last > 0 ? n / last : 0;
      std::vector<int64_t>& len = lengths_of[dims[i]];
      if (len.empty()) {
        std::uniform_int_distribution<int64_t> pick(1, std::max<int64_t>(last, 1));
        for (int64_t r = 0; r < rows; ++r) len.push_back(r == 0 ? last : pick(gen));
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < last; ++j) t.SetFromDouble(r * last + j, j < len[r] ? 1.0 : 0.0);
    } else if (IsInteger(sig.dtype)) {
      auto it = ranges.table_rows.find(sig.name);
      if (it != ranges.table_rows.end() && it->second > 0) {
        std::uniform_int_distribution<int64_t> pick(0, it->second - 1);
        for (int64_t j = 0; j < n; ++j) t.SetFromDouble(j, static_cast<double>(pick(gen)));
      } else if (NameHas(sig.name, "position")) {
        for (int64_t j = 0; j < n; ++j) t.SetFromDouble(j, static_cast<double>(j % last));
      } else {
        for (int64_t j = 0; j < n; ++j) t.SetFromDouble(j, 0.0);
      }
    } else if (IsFloat(sig.dtype)) {
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      for (int64_t j = 0; j < n; ++j) t.SetFromDouble(j, u(gen));
    } else if (sig.dtype == DType::kBool) {
      for (int64_t j = 0; j < n; ++j) t.SetFromDouble(j, static_cast<double>(gen() & 1));
    } else {
      return absl::UnimplementedError(absl::StrCat("cannot synthesize input '", sig.name,
                                                   "' of dtype ", std::string(DTypeName(sig.dtype)),
                                                   "; give input sets (--calib DIR)"));
    }
    out.emplace(sig.name, std::move(t));
  }
  return out;
}

// Calls `visit` on each entry of `dir`; an error (not `throw`) where it cannot be listed.
absl::Status ListFolder(const std::filesystem::path& dir,
                        const std::function<void(const std::filesystem::directory_entry&)>& visit) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) visit(*it);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("input sets: cannot list '", dir.string(), "': ", ec.message()));
  return absl::OkStatus();
}

// An input set's array against its input's shape (where the model gives one): the rank, the
// fixed extents, and each symbol one extent across the set's arrays.
absl::Status CheckShape(const PlanTensorSig& sig, const Tensor& t, const std::string& where,
                        std::map<std::string, std::pair<int64_t, std::string>>& bound) {
  if (sig.dims.empty()) return absl::OkStatus();
  auto wrong = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": input '", sig.name, "' is ", t.ShapeString(), ", ", why));
  };
  if (t.rank() != static_cast<int>(sig.dims.size()))
    return wrong(absl::StrCat("the model takes rank ", sig.dims.size()));
  for (size_t i = 0; i < sig.dims.size(); ++i) {
    const Dim& d = sig.dims[i];
    const int64_t got = t.dims()[i];
    if (d.is_known() && got != d.value())
      return wrong(absl::StrCat("the model takes ", d.value(), " in dimension ", i));
    if (!d.is_symbol()) continue;
    auto [it, fresh] = bound.emplace(d.symbol(), std::pair(got, sig.name));
    if (!fresh && it->second.first != got)
      return wrong(absl::StrCat("its '", d.symbol(), "' is ", got, " where input '",
                                it->second.second, "' has ", it->second.first));
  }
  return absl::OkStatus();
}

absl::Status CheckInputSet(const std::vector<PlanTensorSig>& sigs,
                           const std::map<std::string, Tensor>& set, const std::string& where) {
  // The set's symbols: the extent and the input that bound each first.
  std::map<std::string, std::pair<int64_t, std::string>> bound;
  for (const auto& [name, t] : set) {
    auto sig = std::find_if(sigs.begin(), sigs.end(),
                            [&](const PlanTensorSig& s) { return s.name == name; });
    if (sig == sigs.end())
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": array '", name, "' is not an input of the model"));
    if (t.dtype() != sig->dtype)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": input '", name, "' is ", std::string(DTypeName(t.dtype())),
                       ", the model takes ", std::string(DTypeName(sig->dtype))));
    KILN_RETURN_IF_ERROR(CheckShape(*sig, t, where, bound));
    if (IsFloat(t.dtype()))
      for (int64_t i = 0; i < t.NumElements(); ++i)
        if (!std::isfinite(t.GetAsDouble(i)))
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": input '", name, "' holds ",
                           std::isnan(t.GetAsDouble(i)) ? "NaN" : "inf", " (element ", i, ")"));
  }
  for (const PlanTensorSig& s : sigs)
    if (!set.count(s.name))
      return absl::InvalidArgumentError(absl::StrCat(where, ": input '", s.name, "' is missing"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::map<std::string, Tensor>>> ReadInputSets(
    const std::vector<PlanTensorSig>& sigs, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return absl::NotFoundError(absl::StrCat("input sets: '", dir, "' is not a folder"));
  std::vector<fs::path> entries;
  KILN_RETURN_IF_ERROR(ListFolder(dir, [&](const fs::directory_entry& e) {
    std::error_code kind;
    if (e.is_directory(kind) || e.path().extension() == ".npz") entries.push_back(e.path());
  }));
  std::sort(entries.begin(), entries.end());
  if (entries.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "input sets: '", dir,
        "' holds no .npz file and no sub-folder of .npy files (one input set each, arrays named "
        "by graph input)"));
  std::vector<std::map<std::string, Tensor>> sets;
  for (const fs::path& p : entries) {
    std::map<std::string, Tensor> set;
    const std::string where = p.string();
    if (p.extension() == ".npz") {
      KILN_ASSIGN_OR_RETURN(auto arrays, ReadNpz(where));
      for (auto& [name, t] : arrays) set.emplace(name, std::move(t));
    } else {
      std::vector<fs::path> arrays;
      KILN_RETURN_IF_ERROR(ListFolder(p, [&](const fs::directory_entry& f) {
        if (f.path().extension() == ".npy") arrays.push_back(f.path());
      }));
      for (const fs::path& a : arrays) {
        KILN_ASSIGN_OR_RETURN(Tensor t, ReadNpy(a.string()));
        set.emplace(a.stem().string(), std::move(t));
      }
    }
    KILN_RETURN_IF_ERROR(CheckInputSet(sigs, set, where));
    sets.push_back(std::move(set));
  }
  return sets;
}

absl::StatusOr<std::vector<absl::flat_hash_map<std::string, Tensor>>> CalibrationSets(
    const Graph& g, const CompileOptions& options, const KvSignature* kv) {
  std::vector<PlanTensorSig> sigs;
  std::vector<std::vector<int64_t>> dims;
  std::map<std::string, int64_t> values = options.symbols;
  std::set<std::string> free_symbols;  // those a profile binds: calibration may shrink them
  for (const auto& [sym, v] : options.profile)
    if (!v.empty() && !values.count(sym)) {
      values[sym] = *std::min_element(v.begin(), v.end());
      free_symbols.insert(sym);
    }
  if (kv != nullptr) {  // a prefill bucket's past: empty (its total follows the sequence)
    values[kv->past] = 0;
    free_symbols.erase(kv->past);
  }
  // The reference executor runs these sets (in double, ~1 GMAC/s): keep each input's
  // symbols' product at most kMaxCalibrationElements, halving the largest profile symbol
  // (batch 8 x sequence 128 becomes 8 x 16; 1 x 256 stays).
  constexpr int64_t kMaxCalibrationElements = 256;
  for (Node* in : g.inputs()) {
    const Type& t = in->output_info(0).type;
    if (!t.shape) continue;
    for (;;) {
      int64_t product = 1;
      std::string largest;
      for (const Dim& d : *t.shape)
        if (d.is_symbol() && values.count(d.symbol())) {
          product *= values[d.symbol()];
          if (free_symbols.count(d.symbol()) &&
              (largest.empty() || values[d.symbol()] > values[largest]))
            largest = d.symbol();
        }
      if (product <= kMaxCalibrationElements || largest.empty() || values[largest] < 2) break;
      values[largest] /= 2;
    }
  }
  if (kv != nullptr && !kv->total.empty() && values.count(kv->sequence))
    values[kv->total] = values[kv->sequence];
  for (Node* in : g.inputs()) {
    const Type& t = in->output_info(0).type;
    PlanTensorSig sig;
    sig.name = in->output_info(0).name;
    sig.dtype = t.dtype;
    std::vector<int64_t> d;
    if (auto it = options.input_shapes.find(sig.name); it != options.input_shapes.end()) {
      d = it->second;
      for (int64_t v : d) sig.dims.push_back(Dim::Known(v));
    } else if (t.shape) {
      for (const Dim& dim : *t.shape) sig.dims.push_back(SubstituteDim(dim, options.symbols));
      for (const Dim& dim : *t.shape) {
        const Dim v = SubstituteDim(dim, values);
        d.push_back(v.is_known() ? v.value() : 1);
      }
    }
    sigs.push_back(std::move(sig));
    dims.push_back(std::move(d));
  }
  std::vector<absl::flat_hash_map<std::string, Tensor>> out;
  auto add = [&](std::map<std::string, Tensor> set) {
    absl::flat_hash_map<std::string, Tensor> m;
    for (auto& [k, v] : set) m.emplace(k, std::move(v));
    out.push_back(std::move(m));
  };
  if (!options.calib_dir.empty()) {
    KILN_ASSIGN_OR_RETURN(auto sets, ReadInputSets(sigs, options.calib_dir));
    for (auto& set : sets) add(std::move(set));
    return out;
  }
  const InputRanges ranges = AnalyzeInputs(g);
  for (uint64_t seed : {0u, 1u}) {
    KILN_ASSIGN_OR_RETURN(auto set, SyntheticInputs(sigs, dims, ranges, seed));
    add(std::move(set));
  }
  return out;
}

}  // namespace kiln::compiler
