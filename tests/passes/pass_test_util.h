// Shared helpers for pass tests: Before/Expected IR text, "does nothing", "second run
// changes nothing", numeric equivalence on the reference executor, fusion runs with their
// report and counters, the one near-miss of a fusion, and a graph output's inferred type.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/text.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/fusion_report.h"
#include "kiln/passes/pass.h"
#include "kiln/reference/executor.h"

namespace kiln::testing {

inline std::unique_ptr<Graph> Parse(const std::string& text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

// Runs pass `name` on `g`; returns "changed". Fails the test on error or verifier failure.
inline bool RunPass(const std::string& name, Graph& g, PassContext ctx = {}) {
  ctx.verify_each = true;
  std::unique_ptr<Pass> pass = CreatePass(name);
  EXPECT_NE(pass, nullptr) << "unknown pass " << name;
  if (!pass) return false;
  absl::StatusOr<bool> changed = pass->Run(g, ctx);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
  return changed.ok() && *changed;
}

// Parses `before`, runs the pass, expects it changed the graph and prints as `expected`
// (both normalized through the printer), then expects a second run to change nothing.
inline void ExpectRewrite(const std::string& pass, const std::string& before,
                          const std::string& expected, PassContext ctx = {}) {
  auto g = Parse(before);
  auto want = Parse(expected);
  ASSERT_TRUE(g && want);
  EXPECT_TRUE(RunPass(pass, *g, ctx)) << "pass did not report a change";
  EXPECT_EQ(PrintGraph(*g), PrintGraph(*want));
  const std::string once = PrintGraph(*g);
  EXPECT_FALSE(RunPass(pass, *g, ctx)) << "second run changed the graph";
  EXPECT_EQ(PrintGraph(*g), once);
}

// Expects the pass to leave `text` unchanged and to say so.
inline void ExpectNoChange(const std::string& pass, const std::string& text, PassContext ctx = {}) {
  auto g = Parse(text);
  ASSERT_TRUE(g);
  const std::string before = PrintGraph(*g);
  EXPECT_FALSE(RunPass(pass, *g, ctx));
  EXPECT_EQ(PrintGraph(*g), before);
}

// Seeded random inputs for every graph input (static shapes required, or `symbols`).
inline absl::flat_hash_map<std::string, Tensor> RandomInputs(
    const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& symbols = {},
    int64_t int_high = 4) {
  std::mt19937_64 rng(seed);
  absl::flat_hash_map<std::string, Tensor> feeds;
  for (const Node* in : g.inputs()) {
    const Type& t = in->output_info(0).type;
    std::vector<int64_t> dims;
    for (const Dim& d : *t.shape) dims.push_back(d.is_known() ? d.value() : symbols.at(d.symbol()));
    Tensor x(t.dtype, dims);
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      x.SetFromDouble(i, IsFloat(t.dtype) ? 2 * u - 1 : std::floor(u * int_high));
    }
    feeds[in->output_info(0).name] = x;
  }
  return feeds;
}

// Max abs difference between the outputs of `a` and `b` on the same inputs; fails the
// test when shapes or dtypes differ or either run fails.
inline double MaxAbsDiff(const Graph& a, const Graph& b,
                         const absl::flat_hash_map<std::string, Tensor>& feeds) {
  auto ra = RunReference(a, feeds);
  auto rb = RunReference(b, feeds);
  EXPECT_TRUE(ra.ok()) << ra.status();
  EXPECT_TRUE(rb.ok()) << rb.status();
  if (!ra.ok() || !rb.ok()) return INFINITY;
  EXPECT_EQ(ra->size(), rb->size());
  double worst = 0;
  for (size_t i = 0; i < std::min(ra->size(), rb->size()); ++i) {
    const Tensor& x = (*ra)[i];
    const Tensor& y = (*rb)[i];
    EXPECT_EQ(x.dtype(), y.dtype()) << "output " << i;
    EXPECT_EQ(x.dims(), y.dims()) << "output " << i;
    if (x.dims() != y.dims() || x.dtype() != y.dtype()) return INFINITY;
    for (int64_t j = 0; j < x.NumElements(); ++j)
      worst = std::max(worst, std::abs(x.GetAsDouble(j) - y.GetAsDouble(j)));
  }
  return worst;
}

// Runs `pass` on a copy of the graph parsed from `text` and checks the outputs agree with
// the original within 1e-5 (structural rewrites reorder at most a few float ops).
// `expect_change` (default) also requires the pass to rewrite the graph, so that the
// comparison cannot pass vacuously when a rule stops matching.
inline void ExpectNumericallyEquivalent(const std::string& pass, const std::string& text,
                                        PassContext ctx = {},
                                        const std::map<std::string, int64_t>& symbols = {},
                                        bool expect_change = true) {
  auto original = Parse(text);
  ASSERT_TRUE(original);
  auto optimized = original->Clone();
  const bool changed = RunPass(pass, *optimized, ctx);
  if (expect_change) EXPECT_TRUE(changed) << "the pass did not rewrite the graph";
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto feeds = RandomInputs(*original, seed, symbols);
    EXPECT_LE(MaxAbsDiff(*original, *optimized, feeds), 1e-5) << "seed " << seed;
  }
}

// What one run of a pass returned (its status is kept: a test may expect an error) and
// the counters it recorded.
struct PassRun {
  absl::StatusOr<bool> changed;
  PassCounters counters;
};

// Runs pass `name` once on `g` with verify_each on, without failing the test on error.
inline PassRun RunPassOnce(const std::string& name, Graph& g, PassContext ctx = {}) {
  ctx.verify_each = true;
  std::unique_ptr<Pass> pass = CreatePass(name);
  if (!pass) {
    ADD_FAILURE() << "unknown pass " << name;
    return {absl::NotFoundError(name), {}};
  }
  PassRun run{pass->Run(g, ctx), {}};
  run.counters = pass->counters();
  return run;
}

// Runs pass `name` once on the graph parsed from `text` and returns its counters; fails
// the test when the text does not parse or the pass returns an error.
inline PassCounters CountersOf(const std::string& name, const std::string& text,
                               PassContext ctx = {}) {
  auto g = Parse(text);
  if (!g) return {};
  PassRun run = RunPassOnce(name, *g, ctx);
  EXPECT_TRUE(run.changed.ok()) << run.changed.status();
  return run.counters;
}

// Counter `name`, 0 when the pass never recorded it.
inline int64_t Counter(const PassCounters& c, const std::string& name) {
  auto it = c.find(name);
  return it == c.end() ? 0 : it->second;
}

// Expects the pass to leave the already-built graph `g` unchanged and to say so.
inline void ExpectNoChange(const std::string& pass, Graph& g, PassContext ctx = {}) {
  const std::string before = PrintGraph(g);
  EXPECT_FALSE(RunPass(pass, g, ctx));
  EXPECT_EQ(PrintGraph(g), before);
}

// Expects `optimized` to compute what `original` does on seeded random inputs, within
// 1e-5 (structural rewrites reorder at most a few float ops).
inline void ExpectSameOutputs(const Graph& original, const Graph& optimized,
                              std::initializer_list<uint64_t> seeds = {1u, 2u}) {
  for (uint64_t seed : seeds)
    EXPECT_LE(MaxAbsDiff(original, optimized, RandomInputs(original, seed)), 1e-5)
        << "seed " << seed;
}

// `text` with the first `from` replaced by `to` (the test fails when there is none): a
// variant of a fixture that differs in one place. Near-misses are written out in full.
inline std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// `text` with every `from` replaced by `to` (a dtype or a shape throughout).
inline std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  EXPECT_NE(text.find(from), std::string::npos) << from;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// What running fusion passes on a text gave: the graph after them, the fusion report,
// the last pass's counters and whether any pass changed the graph.
struct FusionRun {
  std::unique_ptr<Graph> graph;
  FusionReport report;
  PassCounters counters;
  bool changed = false;
};

// Runs `passes` in order on the graph parsed from `text` with a fusion report (and
// verify_each); fails the test when the text does not parse or a pass returns an error.
inline FusionRun RunWithReport(const std::vector<std::string>& passes, const std::string& text,
                               PassContext ctx = {}) {
  FusionRun r;
  r.graph = Parse(text);
  if (!r.graph) return r;
  ctx.fusion_report = &r.report;
  for (const std::string& p : passes) {
    PassRun run = RunPassOnce(p, *r.graph, ctx);
    EXPECT_TRUE(run.changed.ok()) << p << ": " << run.changed.status();
    r.changed |= run.changed.ok() && *run.changed;
    r.counters = std::move(run.counters);
  }
  return r;
}

// Expects `pass` to leave `text` unchanged, to fuse no `kind` and to report exactly one
// `kind` near-miss with `reason`; returns that miss (for its node names).
inline FusionMiss ExpectOneMiss(const std::string& pass, const std::string& text,
                                const std::string& kind, const std::string& reason) {
  ExpectNoChange(pass, text);
  const FusionRun r = RunWithReport({pass}, text);
  const auto it = r.report.kinds().find(kind);
  if (it == r.report.kinds().end()) {
    ADD_FAILURE() << "no '" << kind << "' entry in the fusion report";
    return {};
  }
  EXPECT_EQ(it->second.fused, 0);
  EXPECT_EQ(it->second.missed.size(), 1u);
  if (it->second.missed.empty()) return {};
  EXPECT_EQ(it->second.missed[0].reason, reason);
  return it->second.missed[0];
}

// Runs shape-inference on `text`; the type of graph output `name` as Type::ToString, or
// "error: <message>" when the pass fails.
inline std::string OutType(const std::string& text, const std::string& name, PassContext ctx = {}) {
  auto g = Parse(text);
  if (!g) return "<parse error>";
  absl::StatusOr<bool> r = CreatePass("shape-inference")->Run(*g, ctx);
  if (!r.ok()) return absl::StrCat("error: ", r.status().message());
  EXPECT_TRUE(VerifyGraph(*g).ok()) << VerifyGraph(*g);
  for (const GraphOutput& o : g->outputs())
    if (o.name == name) return o.value.type().ToString();
  return "<no output " + name + ">";
}

}  // namespace kiln::testing
