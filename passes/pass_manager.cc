// The pass manager: runs pipeline stages, fixed-point groups with an iteration cap and a
// graph-hash cycle check, per-pass statistics and --print-before/--print-after hooks.
#include "kiln/passes/pass_manager.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

bool Listed(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end() ||
         std::find(list.begin(), list.end(), "all") != list.end();
}

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
uint64_t HashStr(const std::string& s) { return std::hash<std::string>{}(s); }

}  // namespace

int CountComputeNodes(const Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += !node->is_input() && !node->is_constant();
  return n;
}

uint64_t GraphHash(const Graph& g) {
  absl::flat_hash_map<const Node*, uint64_t> index;
  uint64_t h = 0;
  uint64_t i = 0;
  for (const auto& p : g.nodes()) index[p.get()] = i++;
  for (const auto& p : g.nodes()) {
    const Node& n = *p;
    h = Mix(h, HashStr(n.domain() + "::" + n.op()));
    for (const Value& v : n.inputs())
      h = Mix(h, v ? (index.at(v.node) << 8) + static_cast<uint64_t>(v.index) : ~0ull);
    for (int o = 0; o < n.num_outputs(); ++o) h = Mix(h, HashStr(n.output_info(o).type.ToString()));
    for (const auto& [k, a] : n.attrs()) {
      h = Mix(h, HashStr(k));
      h = Mix(h, a.index());
      if (const auto* t = std::get_if<Tensor>(&a)) {
        h = Mix(h, reinterpret_cast<uintptr_t>(t->raw()));
        h = Mix(h, HashStr(t->ShapeString()));
      } else if (const auto* v = std::get_if<int64_t>(&a)) {
        h = Mix(h, static_cast<uint64_t>(*v));
      } else if (const auto* s = std::get_if<std::string>(&a)) {
        h = Mix(h, HashStr(*s));
      } else if (const auto* vs = std::get_if<std::vector<int64_t>>(&a)) {
        for (int64_t x : *vs) h = Mix(h, static_cast<uint64_t>(x));
      } else if (const auto* f = std::get_if<float>(&a)) {
        h = Mix(h, std::hash<float>{}(*f));
      }
    }
  }
  for (const auto& o : g.outputs())
    h = Mix(h, (index.at(o.value.node) << 8) + static_cast<uint64_t>(o.value.index));
  return h;
}

absl::StatusOr<Pipeline> CustomPipeline(const std::vector<std::string>& names) {
  Pipeline p;
  p.name = "custom";
  for (const std::string& n : names) {
    if (!CreatePass(n))
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown pass '", n, "' (known: ", absl::StrJoin(RegisteredPassNames(), ", "), ")"));
    p.stages.push_back({{n}, 1, "requested with --passes", "the order given"});
  }
  return p;
}

PassStats& PassManager::StatsFor(const std::string& pass) {
  for (PassStats& s : stats_)
    if (s.pass == pass) return s;
  stats_.push_back(PassStats{});
  stats_.back().pass = pass;
  return stats_.back();
}

absl::Status PassManager::Run(const Pipeline& pipeline, Graph& g, const PassContext& ctx) {
  for (const std::string& d : options_.disabled)
    if (!CreatePass(d))
      return absl::InvalidArgumentError(absl::StrCat("--disable-pass: unknown pass '", d, "'"));
  for (const auto* list : {&options_.print_before, &options_.print_after})
    for (const std::string& d : *list)
      if (d != "all" && !CreatePass(d))
        return absl::InvalidArgumentError(
            absl::StrCat("--print-before/--print-after: unknown pass '", d, "'"));

  for (const PipelineStage& stage : pipeline.stages) {
    std::vector<std::unique_ptr<Pass>> passes;
    for (const std::string& name : stage.passes) {
      if (std::find(options_.disabled.begin(), options_.disabled.end(), name) !=
          options_.disabled.end())
        continue;
      std::unique_ptr<Pass> p = CreatePass(name);
      if (!p) return absl::InvalidArgumentError(absl::StrCat("unknown pass '", name, "'"));
      passes.push_back(std::move(p));
    }
    absl::flat_hash_set<uint64_t> seen;
    if (stage.max_iterations > 1) seen.insert(GraphHash(g));
    for (int iter = 0; iter < std::max(1, stage.max_iterations); ++iter) {
      bool any_changed = false;
      for (auto& pass : passes) {
        const std::string name(pass->name());
        if (options_.printer && Listed(options_.print_before, name))
          options_.printer(absl::StrCat("IR before ", name), g);
        PassStats& st = StatsFor(name);
        if (st.nodes_before < 0) st.nodes_before = CountComputeNodes(g);
        const auto t0 = std::chrono::steady_clock::now();
        absl::StatusOr<bool> changed = pass->Run(g, ctx);
        st.millis +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (!changed.ok())
          return absl::Status(changed.status().code(),
                              absl::StrCat(name, ": ", changed.status().message()));
        ++st.runs;
        st.changed_runs += *changed;
        st.nodes_after = CountComputeNodes(g);
        for (const auto& [k, v] : pass->counters()) st.counters[k] += v;
        any_changed |= *changed;
        if (options_.printer && Listed(options_.print_after, name))
          options_.printer(absl::StrCat("IR after ", name), g);
      }
      if (!any_changed) break;
      // A group that returns to a graph it already produced would loop forever.
      if (stage.max_iterations > 1 && !seen.insert(GraphHash(g)).second) break;
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
