// The IR text parser's class, shared by text_parse.cc (lexing, types, attributes, nodes,
// the graph) and text_parse_literals.cc (numbers and tensor literals); private to src/ir.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/graph.h"
#include "src/ir/text_chars.h"

namespace kiln::text_internal {

struct NumTok {
  enum Kind { kInt, kFloat, kNan } kind = kInt;
  std::string_view text;  // as written, sign included
  bool negative = false;
  bool has_bits = false;  // nan:0x... form
  uint64_t bits = 0;
  size_t pos = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}
  absl::StatusOr<std::unique_ptr<Graph>> Parse();

 private:
  struct Ref {
    int64_t id = -1;  // -1: omitted (`_`)
    size_t pos = 0;
  };
  struct PendingOperand {
    Node* node;
    int operand;
    Ref ref;
  };

  // Lexing helpers.
  void SkipSpace();
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  bool Consume(char c) {
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool PeekWord(std::string_view w) {
    SkipSpace();
    if (text_.substr(pos_, w.size()) != w) return false;
    const size_t end = pos_ + w.size();
    return end >= text_.size() || !IsIdentChar(text_[end]);
  }
  bool ConsumeWord(std::string_view w) {
    if (!PeekWord(w)) return false;
    pos_ += w.size();
    return true;
  }
  absl::Status Expect(char c, std::string_view what) {
    if (Consume(c)) return absl::OkStatus();
    return Expected(what);
  }
  std::string Where(size_t pos) const;
  std::string Found(size_t pos) const;
  absl::Status Expected(std::string_view what) {
    SkipSpace();
    return absl::InvalidArgumentError(absl::StrCat("IR text ", Where(pos_), ": expected ",
                                                   std::string(what), ", found ", Found(pos_)));
  }
  absl::Status ErrorAt(size_t pos, std::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("IR text ", Where(pos), ": ", std::string(msg)));
  }

  absl::StatusOr<std::string> ParseIdent(std::string_view what);
  absl::StatusOr<std::string> ParseString(std::string_view what);
  absl::StatusOr<std::string> ParseName(std::string_view what);
  absl::StatusOr<NumTok> ScanNumber(std::string_view what);
  absl::StatusOr<int64_t> ParseInt(std::string_view what);
  absl::StatusOr<Ref> ParseValueRef(std::string_view what, bool allow_omitted);
  bool StringStartsStatement();

  // Number conversions.
  absl::StatusOr<int64_t> ToInt64(const NumTok& t);
  absl::StatusOr<float> ToF32(const NumTok& t);
  absl::StatusOr<double> ToF64(const NumTok& t);

  absl::StatusOr<Type> ParseType();
  absl::StatusOr<Attribute> ParseAttrValue();
  absl::StatusOr<Attribute> ParseList(int forced);  // forced: 0 auto, 1 ints, 2 floats, 3 strings
  absl::StatusOr<Tensor> ParseTensor();
  absl::Status ParseElement(DType dt, std::string* bytes);
  absl::Status ParseNode(Graph* g);

  std::string_view text_;
  size_t pos_ = 0;
  absl::flat_hash_map<int64_t, Value> defs_;
  std::vector<PendingOperand> pending_;
};

}  // namespace kiln::text_internal
