// kiln_conformance: runs the ONNX backend node tests (the test/data/node folder
// of the pinned onnx wheel) through kiln's importer and reference executor.
//
// Each test folder holds model.onnx and test_data_set_*/{input,output}_<i>.pb.
// A test is
//   unsupported - the importer or the executor answers Unimplemented (the
//   documented code
//                 for "well-formed but not supported"): an op, dtype or
//                 attribute mode;
//   fail        - any other error, or an output whose dtype, shape or values
//   differ; pass        - every output of every data set matches.
// Values compare like ONNX's own backend runner (numpy.testing.assert_allclose
// with rtol=1e-3, atol=1e-7 against the expected tensor): |got - want| <= atol
// + rtol*|want|, NaN matches NaN, an infinity matches the same infinity;
// integers and bools are exact.
//
// Policy (checked when --allow-fail-file / --floor-file are given; exit 1 on
// violation): every test whose ops are all supported (in kiln's op catalogue
// with a reference kernel) must pass unless the allow-fail file lists it with a
// reason; a listed test that no longer fails must be removed from the list;
// passes must reach the floor. Failures of tests with unsupported ops are
// reported (and written to the doc) but not violations.
//
// Limits: tests run one after another in this process, so a crash in a kernel
// stops the run (use --verbose to see which test was running). The ops of a
// model are read from its ModelProto directly (nested graphs included) so
// unsupported tests are attributed too.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/narrow.h"
#include "kiln/ir/ops.h"
#include "kiln/ir/tensor.h"
#include "kiln/onnx/importer.h"
#include "kiln/reference/executor.h"

namespace fs = std::filesystem;

namespace kiln {
namespace {

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

enum class Outcome { kPass, kFail, kUnsupported };

struct TestResult {
  std::string name;
  Outcome outcome = Outcome::kPass;
  std::string reason;            // one line; empty on pass
  std::vector<std::string> ops;  // distinct ops of the model ("Op" or "domain::Op")
};

// What the runner needs from model.onnx, read independently of the importer.
struct ModelInfo {
  std::vector<std::string> inputs;   // graph inputs that are not initializers, in order
  std::vector<std::string> outputs;  // graph outputs, in order
  std::set<std::string> ops;
};

struct Options {
  std::string node_dir;
  std::string filter;
  std::string write_doc;
  std::string floor_file;
  std::string allow_fail_file;
  std::string exclusions_file;
  bool verbose = false;
};

// A group of tests kiln does not run by design (tests/conformance/exclusions.txt): the
// category, why, and the test names (a trailing '*' matches a prefix).
struct Exclusion {
  std::string category;
  std::string why;
  std::vector<std::string> patterns;
};

bool Matches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '*')
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return name == pattern;
}

std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  constexpr size_t kMax = 300;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

std::string NormalizeDomain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

std::string OpKey(const std::string& domain, const std::string& op) {
  std::string d = NormalizeDomain(domain);
  return d.empty() ? op : d + "::" + op;
}

// True when kiln's catalogue knows the op and the reference executor has a
// kernel.
bool OpSupported(const std::string& key) {
  size_t sep = key.find("::");
  std::string domain = sep == std::string::npos ? "" : key.substr(0, sep);
  std::string op = sep == std::string::npos ? key : key.substr(sep + 2);
  return FindOp(domain, op) != nullptr && HasReferenceKernel(domain, op);
}

void CollectOps(const onnx::GraphProto& graph, std::set<std::string>& ops) {
  for (const onnx::NodeProto& node : graph.node()) {
    ops.insert(OpKey(node.domain(), node.op_type()));
    for (const onnx::AttributeProto& attr : node.attribute()) {
      if (attr.has_g()) CollectOps(attr.g(), ops);
      for (const onnx::GraphProto& g : attr.graphs()) CollectOps(g, ops);
    }
  }
}

absl::StatusOr<ModelInfo> ReadModelInfo(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + path.string());
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) {
    return absl::InvalidArgumentError("cannot parse " + path.string());
  }
  ModelInfo info;
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  for (const onnx::ValueInfoProto& v : model.graph().input()) {
    if (!initializers.count(v.name())) info.inputs.push_back(v.name());
  }
  for (const onnx::ValueInfoProto& v : model.graph().output()) info.outputs.push_back(v.name());
  CollectOps(model.graph(), info.ops);
  return info;
}

// Files "<prefix><i>.pb" in index order (input_0, input_1, ..., input_10).
std::vector<fs::path> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<long, fs::path>> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || e.path().extension() != ".pb") continue;
    std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - 3);
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
      continue;
    found.emplace_back(std::stol(digits), e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> paths;
  for (auto& [index, path] : found) paths.push_back(path);
  return paths;
}

std::string IndexString(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    if (dims[i] > 0) {
      idx[i] = flat % dims[i];
      flat /= dims[i];
    }
  }
  return "[" + absl::StrJoin(idx, ",") + "]";
}

// Compares one output; nullopt when it matches, else a one-line reason.
std::optional<std::string> CompareTensor(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return absl::StrFormat("dtype %s, expected %s", std::string(DTypeName(got.dtype())),
                           std::string(DTypeName(want.dtype())));
  }
  if (got.dims() != want.dims()) {
    return absl::StrFormat("shape [%s], expected [%s]", absl::StrJoin(got.dims(), ","),
                           absl::StrJoin(want.dims(), ","));
  }
  if (want.dtype() == DType::kString) return std::string("string outputs are not compared");
  const int64_t n = want.NumElements();
  const bool is_float = IsFloat(want.dtype()) || IsNarrowFloat(want.dtype());
  int64_t mismatches = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (is_float) {
      double g = got.GetAsDouble(i), w = want.GetAsDouble(i);
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (std::isinf(w) || std::isinf(g)) {
        ok = g == w;
      } else {
        ok = std::fabs(g - w) <= kAtol + kRtol * std::fabs(w);
      }
    } else {
      ok = got.GetAsInt64(i) == want.GetAsInt64(i);
    }
    if (!ok && mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return std::nullopt;
  if (is_float) {
    return absl::StrFormat("%d of %d values differ; first at %s: got %.9g, expected %.9g",
                           mismatches, n, IndexString(first, want.dims()), got.GetAsDouble(first),
                           want.GetAsDouble(first));
  }
  return absl::StrFormat("%d of %d values differ; first at %s: got %d, expected %d", mismatches, n,
                         IndexString(first, want.dims()), got.GetAsInt64(first),
                         want.GetAsInt64(first));
}

TestResult Unsupported(TestResult r, const std::string& why) {
  r.outcome = Outcome::kUnsupported;
  r.reason = OneLine(why);
  return r;
}

TestResult Fail(TestResult r, const std::string& why) {
  r.outcome = Outcome::kFail;
  r.reason = OneLine(why);
  return r;
}

// Runs one data set; returns nullopt on success or the result to report.
std::optional<TestResult> RunDataSet(const TestResult& base, const Graph& graph,
                                     const ModelInfo& info, const fs::path& set_dir) {
  const std::string set = set_dir.filename().string();
  absl::flat_hash_map<std::string, Tensor> feeds;
  std::vector<fs::path> input_files = NumberedFiles(set_dir, "input_");
  if (input_files.size() > info.inputs.size()) {
    return Fail(base, absl::StrFormat("%s: %d input files for %d graph inputs", set,
                                      input_files.size(), info.inputs.size()));
  }
  for (size_t i = 0; i < input_files.size(); ++i) {
    absl::StatusOr<Tensor> t = ReadTensorProtoFile(input_files[i].string());
    if (!t.ok()) {
      return Fail(base,
                  absl::StrFormat("%s: reading %s: %s", set, input_files[i].filename().string(),
                                  std::string(t.status().message())));
    }
    feeds[info.inputs[i]] = *std::move(t);
  }
  absl::StatusOr<std::vector<Tensor>> outputs = RunReference(graph, feeds);
  if (!outputs.ok()) {
    std::string msg = absl::StrFormat("%s: run: %s", set, outputs.status().ToString());
    return outputs.status().code() == absl::StatusCode::kUnimplemented ? Unsupported(base, msg)
                                                                       : Fail(base, msg);
  }
  std::vector<fs::path> output_files = NumberedFiles(set_dir, "output_");
  if (outputs->size() != info.outputs.size() || output_files.size() > outputs->size()) {
    return Fail(base, absl::StrFormat("%s: %d outputs produced, model declares %d, %d files", set,
                                      outputs->size(), info.outputs.size(), output_files.size()));
  }
  for (size_t i = 0; i < output_files.size(); ++i) {
    if (info.outputs[i].empty()) continue;  // an omitted optional output: nothing to check
    absl::StatusOr<Tensor> want = ReadTensorProtoFile(output_files[i].string());
    if (!want.ok()) {
      return Fail(base,
                  absl::StrFormat("%s: reading %s: %s", set, output_files[i].filename().string(),
                                  std::string(want.status().message())));
    }
    if (std::optional<std::string> diff = CompareTensor((*outputs)[i], *want)) {
      return Fail(base, absl::StrFormat("%s: output %d '%s': %s", set, i, info.outputs[i], *diff));
    }
  }
  return std::nullopt;
}

TestResult RunTest(const fs::path& dir) {
  TestResult r;
  r.name = dir.filename().string();
  absl::StatusOr<ModelInfo> info = ReadModelInfo(dir / "model.onnx");
  if (!info.ok()) return Fail(r, "reading model: " + info.status().ToString());
  r.ops.assign(info->ops.begin(), info->ops.end());

  absl::StatusOr<std::unique_ptr<Graph>> graph = ImportOnnxFile((dir / "model.onnx").string());
  if (!graph.ok()) {
    std::string msg = "import: " + graph.status().ToString();
    return graph.status().code() == absl::StatusCode::kUnimplemented ? Unsupported(r, msg)
                                                                     : Fail(r, msg);
  }
  std::vector<fs::path> sets;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(e.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return Fail(r, "no test_data_set_* folder");
  for (const fs::path& set : sets) {
    if (std::optional<TestResult> bad = RunDataSet(r, **graph, *info, set)) return *bad;
  }
  return r;
}

// "name reason..." per line; '#' starts a comment line. A name without a reason
// is an error.
absl::StatusOr<std::map<std::string, std::string>> ReadAllowFailFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot open " + path);
  std::map<std::string, std::string> allowed;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream ss(line);
    std::string name;
    if (!(ss >> name) || name[0] == '#') continue;
    std::string reason;
    std::getline(ss, reason);
    reason.erase(0, reason.find_first_not_of(" \t"));
    if (reason.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:%d: '%s' needs a reason after the name", path, line_no, name));
    }
    allowed[name] = reason;
  }
  return allowed;
}

// "[category] why" starts a group; the lines below it are test names or prefixes*.
absl::StatusOr<std::vector<Exclusion>> ReadExclusions(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot open " + path);
  std::vector<Exclusion> groups;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    line.erase(0, line.find_first_not_of(" \t"));
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      const size_t close = line.find(']');
      std::string why = close == std::string::npos ? "" : line.substr(close + 1);
      why.erase(0, why.find_first_not_of(" \t"));
      if (close == std::string::npos || why.empty())
        return absl::InvalidArgumentError(
            absl::StrFormat("%s:%d: a group is '[category] why'", path, line_no));
      groups.push_back({line.substr(1, close - 1), why, {}});
      continue;
    }
    if (groups.empty())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:%d: a test name before any '[category] why' line", path, line_no));
    groups.back().patterns.push_back(line.substr(0, line.find_first_of(" \t")));
  }
  return groups;
}

// The first non-comment token: the minimum number of passing tests.
absl::StatusOr<int64_t> ReadFloorFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot open " + path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string token;
    if (!(ss >> token) || token[0] == '#') continue;
    char* end = nullptr;
    long long v = std::strtoll(token.c_str(), &end, 10);
    if (*end != '\0' || v < 0) {
      return absl::InvalidArgumentError(path + ": expected a non-negative integer, got '" + token +
                                        "'");
    }
    return static_cast<int64_t>(v);
  }
  return absl::InvalidArgumentError(path + ": no floor value");
}

struct Counts {
  int64_t tests = 0, pass = 0, fail = 0, unsupported = 0;
  void Add(Outcome o) {
    ++tests;
    (o == Outcome::kPass ? pass : o == Outcome::kFail ? fail : unsupported)++;
  }
};

std::string EscapeCell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// The exclusion group a test falls in, or -1.
int ExclusionOf(const std::vector<Exclusion>& groups, const std::string& name) {
  for (size_t g = 0; g < groups.size(); ++g)
    for (const std::string& p : groups[g].patterns)
      if (Matches(p, name)) return static_cast<int>(g);
  return -1;
}

absl::Status WriteDoc(const std::string& path, const std::vector<TestResult>& results,
                      const Counts& total, const std::vector<Exclusion>& groups) {
  std::map<std::string, Counts> per_op;
  for (const TestResult& r : results) {
    for (const std::string& op : r.ops) per_op[op].Add(r.outcome);
  }
  std::ofstream out(path);
  if (!out) return absl::PermissionDeniedError("cannot write " + path);
  out << "# ONNX backend conformance\n\n"
      << "Generated by `kiln_conformance --write-doc` "
         "(tests/conformance/runner.cc); do not\n"
      << "edit by hand. It runs every ONNX backend *node* test shipped in the "
         "pinned onnx\n"
      << "wheel (requirements-test.txt) through the importer and the reference "
         "executor.\n\n"
      << "- **pass**: every output of every data set matches (dtype and shape "
         "exactly; "
         "values with\n  rtol 1e-3, atol 1e-7 as ONNX's backend runner; "
         "integers and "
         "bools exactly).\n"
      << "- **fail**: any other error or mismatch. A failing test whose ops "
         "are all "
         "supported\n  must be listed in tests/conformance/known_failures.txt "
         "with a "
         "reason, or the ctest\n  fails.\n"
      << "- **unsupported**: the importer or executor answered Unimplemented "
         "(an op, "
         "dtype or\n  attribute mode kiln does not support).\n"
      << "- **excluded**: unsupported by design, in a group of "
         "tests/conformance/exclusions.txt\n  with the reason (below). Excluded tests stay "
         "in the denominator.\n\n"
      << "## Totals\n\n"
      << "| tests | pass | fail | unsupported | of which excluded | pass rate |\n"
         "|---:|---:|---:|---:|---:|---:|\n";
  int64_t excluded = 0;
  for (const TestResult& r : results)
    if (r.outcome == Outcome::kUnsupported && ExclusionOf(groups, r.name) >= 0) ++excluded;
  out << absl::StrFormat("| %d | %d | %d | %d | %d | %.1f %% |\n\n", total.tests, total.pass,
                         total.fail, total.unsupported, excluded,
                         total.tests ? 100.0 * total.pass / total.tests : 0.0)
      << "## Per op\n\n"
      << "A test counts once for every distinct op in its model (nested graphs "
         "included), "
         "so\ncolumns do not add up to the totals.\n\n"
      << "| op | tests | pass | fail | unsupported "
         "|\n|---|---:|---:|---:|---:|\n";
  for (const auto& [op, c] : per_op) {
    out << absl::StrFormat("| %s | %d | %d | %d | %d |\n", EscapeCell(op), c.tests, c.pass, c.fail,
                           c.unsupported);
  }
  out << "\n## Failures\n\n";
  bool any = false;
  for (const TestResult& r : results) {
    if (r.outcome != Outcome::kFail) continue;
    any = true;
    out << "- `" << r.name << "`: " << r.reason << "\n";
  }
  if (!any) out << "None.\n";
  out << "\n## Excluded by design\n";
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::string> names;
    for (const TestResult& r : results)
      if (r.outcome == Outcome::kUnsupported && ExclusionOf(groups, r.name) == static_cast<int>(g))
        names.push_back("`" + r.name + "`");
    out << "\n### " << groups[g].category << " (" << names.size() << ")\n\n"
        << groups[g].why << "\n\n"
        << absl::StrJoin(names, ", ") << "\n";
  }
  out << "\n## Not supported yet\n\nEach with the importer's or executor's reason.\n\n";
  any = false;
  for (const TestResult& r : results) {
    if (r.outcome != Outcome::kUnsupported || ExclusionOf(groups, r.name) >= 0) continue;
    any = true;
    out << "- `" << r.name << "`: " << r.reason << "\n";
  }
  if (!any) out << "None.\n";
  out.close();
  if (!out) return absl::DataLossError("error writing " + path);
  return absl::OkStatus();
}

void Usage() {
  std::fprintf(stderr,
               "usage: kiln_conformance NODE_TEST_DIR [--filter SUBSTRING] [--verbose]\n"
               "         [--write-doc docs/conformance.md] [--floor-file FILE]\n"
               "         [--allow-fail-file FILE] [--exclusions FILE]\n");
}

std::optional<Options> ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= argc) return false;
      dst = argv[++i];
      return true;
    };
    bool ok = true;
    if (a == "--filter")
      ok = value(o.filter);
    else if (a == "--write-doc")
      ok = value(o.write_doc);
    else if (a == "--floor-file")
      ok = value(o.floor_file);
    else if (a == "--allow-fail-file")
      ok = value(o.allow_fail_file);
    else if (a == "--exclusions")
      ok = value(o.exclusions_file);
    else if (a == "--verbose" || a == "-v")
      o.verbose = true;
    else if (!a.empty() && a[0] != '-' && o.node_dir.empty())
      o.node_dir = a;
    else
      ok = false;
    if (!ok) return std::nullopt;
  }
  if (o.node_dir.empty()) return std::nullopt;
  return o;
}

int Main(int argc, char** argv) {
  std::optional<Options> opts = ParseArgs(argc, argv);
  if (!opts) {
    Usage();
    return 2;
  }
  std::error_code ec;
  if (!fs::is_directory(opts->node_dir, ec)) {
    std::fprintf(stderr, "kiln_conformance: not a directory: %s\n", opts->node_dir.c_str());
    return 2;
  }
  std::map<std::string, std::string> allowed;
  if (!opts->allow_fail_file.empty()) {
    absl::StatusOr<std::map<std::string, std::string>> a = ReadAllowFailFile(opts->allow_fail_file);
    if (!a.ok()) {
      std::fprintf(stderr, "kiln_conformance: %s\n", a.status().ToString().c_str());
      return 2;
    }
    allowed = *std::move(a);
  }
  std::vector<Exclusion> groups;
  if (!opts->exclusions_file.empty()) {
    absl::StatusOr<std::vector<Exclusion>> g = ReadExclusions(opts->exclusions_file);
    if (!g.ok()) {
      std::fprintf(stderr, "kiln_conformance: %s\n", g.status().ToString().c_str());
      return 2;
    }
    groups = *std::move(g);
  }
  std::optional<int64_t> floor;
  if (!opts->floor_file.empty()) {
    absl::StatusOr<int64_t> f = ReadFloorFile(opts->floor_file);
    if (!f.ok()) {
      std::fprintf(stderr, "kiln_conformance: %s\n", f.status().ToString().c_str());
      return 2;
    }
    floor = *f;
  }

  std::vector<fs::path> dirs;
  for (const fs::directory_entry& e : fs::directory_iterator(opts->node_dir)) {
    std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("test_", 0) != 0) continue;
    if (!opts->filter.empty() && name.find(opts->filter) == std::string::npos) continue;
    dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());

  std::vector<TestResult> results;
  Counts total;
  std::set<std::string> ran;
  for (const fs::path& dir : dirs) {
    if (opts->verbose) std::printf("RUN  %s\n", dir.filename().string().c_str());
    std::fflush(stdout);
    results.push_back(RunTest(dir));
    const TestResult& r = results.back();
    total.Add(r.outcome);
    ran.insert(r.name);
    if (opts->verbose && r.outcome != Outcome::kPass) {
      std::printf("     %s: %s\n", r.outcome == Outcome::kFail ? "FAIL" : "unsupported",
                  r.reason.c_str());
    }
  }

  int violations = 0;
  std::printf("\nFailures:\n");
  for (const TestResult& r : results) {
    if (r.outcome != Outcome::kFail) continue;
    std::vector<std::string> missing;
    for (const std::string& op : r.ops) {
      if (!OpSupported(op)) missing.push_back(op);
    }
    const bool listed = allowed.count(r.name) > 0;
    const bool violation = !listed && missing.empty() && !opts->allow_fail_file.empty();
    std::printf("  %s %s: %s%s\n",
                listed      ? "(known)"
                : violation ? "FAIL"
                            : "fail",
                r.name.c_str(), r.reason.c_str(),
                missing.empty()
                    ? ""
                    : (" [ops without kernel: " + absl::StrJoin(missing, ",") + "]").c_str());
    if (violation) ++violations;
  }
  for (const auto& [name, reason] : allowed) {
    if (!ran.count(name)) {
      if (opts->filter.empty()) {
        std::printf("  note: %s is listed in %s but is not a test\n", name.c_str(),
                    opts->allow_fail_file.c_str());
      }
      continue;
    }
    auto it = std::find_if(results.begin(), results.end(),
                           [&](const TestResult& r) { return r.name == name; });
    if (it->outcome != Outcome::kFail) {
      std::printf("  NOW %s: %s is listed in %s; remove it from the list\n",
                  it->outcome == Outcome::kPass ? "PASSES" : "UNSUPPORTED", name.c_str(),
                  opts->allow_fail_file.c_str());
      ++violations;
    }
  }

  // Exclusions must stay true: an excluded test that runs, or a pattern that matches no
  // test, is stale.
  for (const TestResult& r : results) {
    if (r.outcome == Outcome::kUnsupported || ExclusionOf(groups, r.name) < 0) continue;
    std::printf("  NOW %s: %s is excluded in %s; remove it\n",
                r.outcome == Outcome::kPass ? "PASSES" : "FAILS", r.name.c_str(),
                opts->exclusions_file.c_str());
    ++violations;
  }
  if (opts->filter.empty())
    for (const Exclusion& g : groups)
      for (const std::string& p : g.patterns)
        if (std::none_of(results.begin(), results.end(),
                         [&](const TestResult& r) { return Matches(p, r.name); })) {
          std::printf("  STALE: '%s' in %s matches no test\n", p.c_str(),
                      opts->exclusions_file.c_str());
          ++violations;
        }

  std::printf(
      "\nkiln_conformance: %lld tests: %lld pass, %lld fail, %lld "
      "unsupported\n",
      static_cast<long long>(total.tests), static_cast<long long>(total.pass),
      static_cast<long long>(total.fail), static_cast<long long>(total.unsupported));
  if (floor && opts->filter.empty() && total.pass < *floor) {
    std::printf("kiln_conformance: %lld passes is below the floor of %lld (%s)\n",
                static_cast<long long>(total.pass), static_cast<long long>(*floor),
                opts->floor_file.c_str());
    ++violations;
  } else if (floor && opts->filter.empty() && total.pass > *floor) {
    std::printf("kiln_conformance: passes exceed the floor; raise %s to %lld\n",
                opts->floor_file.c_str(), static_cast<long long>(total.pass));
  }
  if (violations) {
    std::printf(
        "kiln_conformance: %d policy violation(s): a test whose ops are all "
        "supported must pass or be listed in the allow-fail file with a "
        "reason, "
        "listed tests must still fail, passes must reach the floor\n",
        violations);
  }

  if (!opts->write_doc.empty()) {
    absl::Status s = WriteDoc(opts->write_doc, results, total, groups);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln_conformance: %s\n", s.ToString().c_str());
      return 2;
    }
    std::printf("kiln_conformance: wrote %s\n", opts->write_doc.c_str());
  }
  return violations ? 1 : 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
