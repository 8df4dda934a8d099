// IR text parser: ParseGraph reads the text PrintGraph (text_print.cc) writes. A
// hand-written recursive-descent parser over the raw text (no token stream: a few places,
// such as `%N`, `#hex` and `domain.Op`, do not allow inner whitespace). The grammar is
// documented in include/kiln/ir/text.h and docs/ir.md.
// Limits: node ids are reassigned in text order; Graph::inputs() is taken to be the Input
// nodes in text order (the Graph API cannot express any other order). Operands may refer
// forward, so non-topological (even cyclic) graphs parse; the verifier, not the parser,
// rejects them.
#include <charconv>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/text.h"
#include "kiln/support/status.h"
#include "src/ir/text_parser.h"

namespace kiln {
namespace text_internal {

void Parser::SkipSpace() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

std::string Parser::Where(size_t pos) const {
  pos = std::min(pos, text_.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < pos; ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return absl::StrCat(line, ":", pos - line_start + 1);
}

std::string Parser::Found(size_t pos) const {
  if (pos >= text_.size()) return "end of input";
  size_t end = pos;
  while (end < text_.size() && end - pos < 16 && text_[end] != ' ' && text_[end] != '\n' &&
         text_[end] != '\t' && text_[end] != '\r')
    ++end;
  if (end == pos) end = pos + 1;
  std::string s;
  AppendQuoted(&s, text_.substr(pos, end - pos));
  return s;
}

absl::StatusOr<std::string> Parser::ParseIdent(std::string_view what) {
  SkipSpace();
  if (pos_ >= text_.size() || !IsIdentStart(text_[pos_])) return Expected(what);
  const size_t start = pos_;
  while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
  return std::string(text_.substr(start, pos_ - start));
}

absl::StatusOr<std::string> Parser::ParseString(std::string_view what) {
  if (Peek() != '"') return Expected(what);
  const size_t start = pos_++;
  std::string s;
  while (true) {
    if (pos_ >= text_.size()) return ErrorAt(start, "unterminated string");
    const char c = text_[pos_++];
    if (c == '"') break;
    if (c == '\n') return ErrorAt(start, "unterminated string (write a newline as \\n)");
    if (c != '\\') {
      s.push_back(c);
      continue;
    }
    if (pos_ >= text_.size()) return ErrorAt(start, "unterminated string");
    const char e = text_[pos_++];
    switch (e) {
      case 'n':
        s.push_back('\n');
        break;
      case 't':
        s.push_back('\t');
        break;
      case 'r':
        s.push_back('\r');
        break;
      case '"':
        s.push_back('"');
        break;
      case '\\':
        s.push_back('\\');
        break;
      case 'x':
        if (pos_ + 1 >= text_.size() || !IsHexDigit(text_[pos_]) || !IsHexDigit(text_[pos_ + 1]))
          return ErrorAt(pos_ - 2, "expected two hex digits after \\x");
        s.push_back(static_cast<char>(HexValue(text_[pos_]) * 16 + HexValue(text_[pos_ + 1])));
        pos_ += 2;
        break;
      default:
        return ErrorAt(pos_ - 2, "unknown escape in string (use \\n \\t \\r \\\" \\\\ \\xHH)");
    }
  }
  return s;
}

absl::StatusOr<std::string> Parser::ParseName(std::string_view what) {
  if (Peek() == '"') return ParseString(what);
  return ParseIdent(what);
}

absl::StatusOr<Parser::Ref> Parser::ParseValueRef(std::string_view what, bool allow_omitted) {
  SkipSpace();
  Ref ref;
  ref.pos = pos_;
  if (allow_omitted && ConsumeWord("_")) return ref;
  if (!Consume('%')) return Expected(what);
  const size_t start = pos_;
  while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
  if (pos_ == start) return Expected("digits after '%'");
  auto r = std::from_chars(text_.data() + start, text_.data() + pos_, ref.id);
  if (r.ec != std::errc()) return ErrorAt(ref.pos, "value number out of range");
  if (pos_ < text_.size() && IsIdentChar(text_[pos_]))
    return ErrorAt(ref.pos, "malformed value name");
  return ref;
}

// After an output type, a string is the output's name unless it starts the next
// statement (a quoted op name of a node without results: `"op"(` or `"domain".op(`).
bool Parser::StringStartsStatement() {
  const size_t saved = pos_;
  bool starts = false;
  if (ParseString("").ok()) {
    const char c = Peek();
    starts = c == '(' || c == '.';
  }
  pos_ = saved;
  return starts;
}

absl::StatusOr<Type> Parser::ParseType() {
  Type t;
  SkipSpace();
  if (Consume('?')) {
    t.dtype = DType::kUndefined;
  } else {
    const size_t p = pos_;
    KILN_ASSIGN_OR_RETURN(std::string name, ParseIdent("a type (a dtype such as f32, or '?')"));
    std::optional<DType> dt = DTypeFromName(name);
    if (!dt) return ErrorAt(p, absl::StrCat("unknown dtype '", name, "'"));
    t.dtype = *dt;
  }
  if (!Consume('[')) return t;  // no shape: rank unknown
  if (Consume('*')) {
    KILN_RETURN_IF_ERROR(Expect(']', "']' after '*'"));
    return t;
  }
  t.shape.emplace();
  if (Consume(']')) return t;
  do {
    const char c = Peek();
    if (c == '?') {
      ++pos_;
      t.shape->push_back(Dim());
    } else if (c == '"') {
      KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a dimension"));
      t.shape->push_back(Dim::Symbol(std::move(s)));
    } else if (IsIdentStart(c)) {
      KILN_ASSIGN_OR_RETURN(std::string s, ParseIdent("a dimension"));
      t.shape->push_back(Dim::Symbol(std::move(s)));
    } else {
      const size_t p = pos_;
      KILN_ASSIGN_OR_RETURN(int64_t v, ParseInt("a dimension (integer, symbol or '?')"));
      if (v < 0) return ErrorAt(p, "negative dimension");
      t.shape->push_back(Dim::Known(v));
    }
  } while (Consume(','));
  KILN_RETURN_IF_ERROR(Expect(']', "',' or ']' in a shape"));
  return t;
}

absl::StatusOr<Attribute> Parser::ParseAttrValue() {
  const char c = Peek();
  if (c == '"') {
    KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a string"));
    return Attribute(std::move(s));
  }
  if (c == '[') return ParseList(0);
  if (PeekWord("tensor")) {
    KILN_ASSIGN_OR_RETURN(Tensor t, ParseTensor());
    return Attribute(std::move(t));
  }
  if (ConsumeWord("ints")) return ParseList(1);
  if (ConsumeWord("floats")) return ParseList(2);
  if (ConsumeWord("strings")) return ParseList(3);
  KILN_ASSIGN_OR_RETURN(NumTok tok,
                        ScanNumber("an attribute value (number, string, list or tensor<...>)"));
  if (tok.kind == NumTok::kInt) {
    KILN_ASSIGN_OR_RETURN(int64_t v, ToInt64(tok));
    return Attribute(v);
  }
  KILN_ASSIGN_OR_RETURN(float f, ToF32(tok));
  return Attribute(f);
}

absl::StatusOr<Attribute> Parser::ParseList(int forced) {
  const size_t start = (SkipSpace(), pos_);
  KILN_RETURN_IF_ERROR(Expect('[', "'[' starting a list"));
  std::vector<std::string> strs;
  std::vector<NumTok> nums;
  if (!Consume(']')) {
    do {
      if (Peek() == '"') {
        if (!nums.empty()) return ErrorAt(pos_, "a list mixes strings and numbers");
        KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a string"));
        strs.push_back(std::move(s));
      } else {
        if (!strs.empty()) return ErrorAt(pos_, "a list mixes strings and numbers");
        KILN_ASSIGN_OR_RETURN(NumTok t, ScanNumber("a list element"));
        nums.push_back(t);
      }
    } while (Consume(','));
    KILN_RETURN_IF_ERROR(Expect(']', "',' or ']' in a list"));
  }
  if (forced == 0) {
    if (!strs.empty()) {
      forced = 3;
    } else if (!nums.empty()) {
      forced = 1;
      for (const NumTok& t : nums)
        if (t.kind != NumTok::kInt) forced = 2;
    } else {
      return ErrorAt(start, "an empty list needs its type: write ints[], floats[] or strings[]");
    }
  }
  if (forced == 3) {
    if (!nums.empty()) return ErrorAt(nums[0].pos, "expected a string in a strings list");
    return Attribute(std::move(strs));
  }
  if (!strs.empty()) return ErrorAt(start, "expected numbers in an ints/floats list");
  if (forced == 1) {
    std::vector<int64_t> v;
    for (const NumTok& t : nums) {
      KILN_ASSIGN_OR_RETURN(int64_t x, ToInt64(t));
      v.push_back(x);
    }
    return Attribute(std::move(v));
  }
  std::vector<float> v;
  for (const NumTok& t : nums) {
    KILN_ASSIGN_OR_RETURN(float x, ToF32(t));
    v.push_back(x);
  }
  return Attribute(std::move(v));
}

absl::Status Parser::ParseNode(Graph* g) {
  std::vector<Ref> results;
  if (Peek() == '%') {
    do {
      KILN_ASSIGN_OR_RETURN(Ref r, ParseValueRef("a result value '%N'", false));
      results.push_back(r);
    } while (Consume(','));
    KILN_RETURN_IF_ERROR(Expect('=', "'=' after the result values"));
  }
  SkipSpace();
  const size_t op_pos = pos_;
  std::vector<std::string> segs;
  {
    KILN_ASSIGN_OR_RETURN(std::string seg, ParseName("an op name, '%N =', 'return' or '}'"));
    segs.push_back(std::move(seg));
  }
  while (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    if (pos_ >= text_.size() || !(IsIdentStart(text_[pos_]) || text_[pos_] == '"'))
      return Expected("an op name after '.'");
    KILN_ASSIGN_OR_RETURN(std::string seg, ParseName("an op name after '.'"));
    segs.push_back(std::move(seg));
  }
  std::string op = std::move(segs.back());
  segs.pop_back();
  std::string domain = absl::StrJoin(segs, ".");

  KILN_RETURN_IF_ERROR(Expect('(', "'(' after the op name"));
  std::vector<Ref> operands;
  if (!Consume(')')) {
    do {
      KILN_ASSIGN_OR_RETURN(Ref r, ParseValueRef("an operand ('%N' or '_')", true));
      operands.push_back(r);
    } while (Consume(','));
    KILN_RETURN_IF_ERROR(Expect(')', "',' or ')' after an operand"));
  }

  std::map<std::string, Attribute> attrs;
  if (Consume('{')) {
    if (!Consume('}')) {
      do {
        SkipSpace();
        const size_t p = pos_;
        KILN_ASSIGN_OR_RETURN(std::string name, ParseName("an attribute name"));
        if (attrs.count(name)) return ErrorAt(p, absl::StrCat("duplicate attribute '", name, "'"));
        KILN_RETURN_IF_ERROR(Expect('=', "'=' after the attribute name"));
        KILN_ASSIGN_OR_RETURN(Attribute a, ParseAttrValue());
        attrs.emplace(std::move(name), std::move(a));
      } while (Consume(','));
      KILN_RETURN_IF_ERROR(Expect('}', "',' or '}' after an attribute"));
    }
  }

  std::vector<Type> types(results.size());
  std::vector<std::string> names(results.size());
  if (Consume(':')) {
    if (results.empty()) return ErrorAt(pos_ - 1, "a node without results has no types");
    size_t i = 0;
    do {
      if (i == results.size())
        return ErrorAt((SkipSpace(), pos_),
                       absl::StrCat("more types than the ", results.size(), " results"));
      KILN_ASSIGN_OR_RETURN(types[i], ParseType());
      if (Peek() == '"' && !StringStartsStatement()) {
        KILN_ASSIGN_OR_RETURN(names[i], ParseString("an output name"));
      }
      ++i;
    } while (Consume(','));
    if (i != results.size())
      return Expected(absl::StrCat("',' and a type for each of the ", results.size(), " results"));
  }

  std::vector<std::string> provenance;
  if (Consume('@')) {
    do {
      KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a quoted provenance name"));
      provenance.push_back(std::move(s));
    } while (Consume(','));
  }

  Node* n;
  if (op == "Input" && domain.empty()) {
    if (results.size() != 1 || !operands.empty())
      return ErrorAt(op_pos, "an Input node has no operands and exactly one result");
    n = g->AddInput(names[0], types[0]);
  } else {
    n = g->AddNode(op, std::vector<Value>(operands.size()), static_cast<int>(results.size()),
                   domain);
    for (size_t i = 0; i < results.size(); ++i) {
      n->set_output_type(static_cast<int>(i), types[i]);
      n->set_output_name(static_cast<int>(i), names[i]);
    }
  }
  for (auto& [name, a] : attrs) n->set_attr(name, std::move(a));
  n->set_provenance(std::move(provenance));
  for (size_t i = 0; i < results.size(); ++i) {
    if (!defs_.emplace(results[i].id, Value{n, static_cast<int>(i)}).second)
      return ErrorAt(results[i].pos, absl::StrCat("value %", results[i].id, " is defined twice"));
  }
  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i].id >= 0) pending_.push_back({n, static_cast<int>(i), operands[i]});
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> Parser::Parse() {
  auto g = std::make_unique<Graph>();
  if (!ConsumeWord("graph")) return Expected("'graph'");
  KILN_ASSIGN_OR_RETURN(std::string name, ParseName("the graph name"));
  if (!ConsumeWord("opset")) return Expected("'opset=' after the graph name");
  KILN_RETURN_IF_ERROR(Expect('=', "'=' after 'opset'"));
  KILN_ASSIGN_OR_RETURN(int64_t opset, ParseInt("the opset version"));
  KILN_RETURN_IF_ERROR(Expect('{', "'{' opening the graph body"));
  g->set_name(std::move(name));
  g->set_opset(opset);

  struct PendingOutput {
    std::string name;
    Ref ref;
  };
  std::vector<PendingOutput> outputs;
  bool returned = false;
  while (!Consume('}')) {
    if (AtEnd()) return Expected("'}' closing the graph");
    if (returned) return Expected("'}' after the return statement");
    if (ConsumeWord("return")) {
      returned = true;
      if (Peek() == '"') {
        do {
          KILN_ASSIGN_OR_RETURN(std::string oname, ParseString("a quoted graph output name"));
          KILN_RETURN_IF_ERROR(Expect(':', "':' after the graph output name"));
          KILN_ASSIGN_OR_RETURN(Ref r, ParseValueRef("a graph output value ('%N' or '_')", true));
          outputs.push_back({std::move(oname), r});
        } while (Consume(','));
      }
      continue;
    }
    KILN_RETURN_IF_ERROR(ParseNode(g.get()));
  }
  if (!AtEnd()) return Expected("end of input after the graph's '}'");

  for (const PendingOperand& p : pending_) {
    auto it = defs_.find(p.ref.id);
    if (it == defs_.end())
      return ErrorAt(p.ref.pos, absl::StrCat("value %", p.ref.id, " is used but never defined"));
    g->SetInput(p.node, p.operand, it->second);
  }
  for (PendingOutput& o : outputs) {
    Value v;
    if (o.ref.id >= 0) {
      auto it = defs_.find(o.ref.id);
      if (it == defs_.end())
        return ErrorAt(o.ref.pos, absl::StrCat("value %", o.ref.id, " is used but never defined"));
      v = it->second;
    }
    g->AddOutput(std::move(o.name), v);
  }
  return g;
}

}  // namespace text_internal

absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(std::string_view text) {
  return text_internal::Parser(text).Parse();
}

}  // namespace kiln
