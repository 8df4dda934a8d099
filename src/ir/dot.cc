#include "kiln/ir/dot.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

// Quotes for a DOT string; a "\\n" the label builder put in stays a line break.
std::string Escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"' || (c == '\\' && (i + 1 >= s.size() || s[i + 1] != 'n'))) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string GraphToDot(const Graph& g) {
  std::string out =
      absl::StrCat("digraph \"", Escape(g.name().empty() ? "kiln" : g.name()),
                   "\" {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n");
  for (const auto& p : g.nodes()) {
    const Node& n = *p;
    std::vector<std::string> types;
    for (int i = 0; i < n.num_outputs(); ++i) types.push_back(n.output_info(i).type.ToString());
    const std::string types_text = absl::StrJoin(types, ", ");
    std::string label, attrs;
    if (n.is_input()) {
      label = absl::StrCat("input ", n.output_info(0).name, "\\n", types_text);
      attrs = "shape=invhouse, style=filled, fillcolor=\"#d8e8ff\"";
    } else if (n.is_constant()) {
      label = absl::StrCat(n.output_info(0).name.empty() ? "const" : n.output_info(0).name, "\\n",
                           types_text);
      attrs = "shape=box, style=filled, fillcolor=\"#eeeeee\", fontsize=8";
    } else {
      const std::string op = n.domain().empty() ? n.op() : absl::StrCat(n.domain(), ".", n.op());
      label = absl::StrCat(op, "\\n", types_text);
      if (!n.provenance().empty()) {
        std::vector<std::string> prov(
            n.provenance().begin(),
            n.provenance().begin() + std::min<size_t>(3, n.provenance().size()));
        absl::StrAppend(
            &label, "\\n@ ", absl::StrJoin(prov, ", "),
            n.provenance().size() > 3 ? absl::StrCat(" +", n.provenance().size() - 3) : "");
      }
      attrs = n.domain().empty() ? "shape=box, style=rounded"
                                 : "shape=box, style=\"rounded,filled\", fillcolor=\"#ffe8c0\"";
    }
    absl::StrAppend(&out, "  n", n.id(), " [label=\"", Escape(label), "\", ", attrs, "];\n");
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Value v = n.input(i);
      if (!v) continue;
      absl::StrAppend(&out, "  n", v.node->id(), " -> n", n.id());
      if (v.node->num_outputs() > 1) absl::StrAppend(&out, " [label=\"", v.index, "\"]");
      absl::StrAppend(&out, ";\n");
    }
  }
  int k = 0;
  for (const auto& o : g.outputs()) {
    absl::StrAppend(&out, "  out", k, " [label=\"output ", Escape(o.name),
                    "\", shape=house, style=filled, fillcolor=\"#d8ffd8\"];\n");
    absl::StrAppend(&out, "  n", o.value.node->id(), " -> out", k, ";\n");
    ++k;
  }
  out += "}\n";
  return out;
}

}  // namespace kiln
