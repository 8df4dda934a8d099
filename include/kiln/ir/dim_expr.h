// Symbolic dimension arithmetic for shape inference and the compiler's symbol binding. A DimExpr is
// a small polynomial with int64 coefficients over atoms; an atom is a symbol (an identifier such as
// `batch`) or a floor quotient of a polynomial by a positive constant. Its canonical text is what a
// symbolic Dim stores, so equal expressions give equal Dims and the IR text round-trips:
//
//   terms:     coefficient first, atoms sorted and joined by '*'      "2*batch*sequence"
//   sums:      higher-degree terms first, then by atoms, constant last  "batch*sequence+batch-1"
//   quotients: floor division by a constant > 1 that did not simplify
//              "sequence/2", "(batch*sequence)/4", "2*(sequence+1)/4*batch" (the '/' binds
//              to the primary just before it; coefficients are reduced so every remaining
//              numerator coefficient lies in [1, c-1] and shares no factor with c)
//
// Characters used: [A-Za-z0-9_*+/()-], never spaces or commas. '/' always means floor
// division, which equals exact division whenever the model guarantees divisibility (a
// Reshape's -1, an evenly split axis), so no rewrite here is valid only for exact division.
// Symbols are assumed to be integers (dims are >= 0); nothing assumes they are >= 1.
//
// Limits: at most kMaxTerms terms of kMaxFactors atoms each and kMaxChars characters;
// anything bigger, any int64 overflow, or a symbol that is not an identifier gives nullopt
// (an unknown Dim for the Dim-level helpers): be honest, never guess.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln {

class DimExpr {
 public:
  static constexpr int kMaxTerms = 8;
  static constexpr int kMaxFactors = 6;
  static constexpr size_t kMaxChars = 96;

  DimExpr() = default;  // the constant 0
  static DimExpr Constant(int64_t c);
  // A symbol atom; nullopt unless `name` is an identifier [A-Za-z_][A-Za-z0-9_]*.
  static std::optional<DimExpr> Symbol(std::string_view name);
  // An opaque atom standing for "some unknown integer #id" inside one computation (e.g.
  // an unknown input dim of a Reshape that may cancel out). ToDim gives an unknown Dim for
  // any expression that still contains one; ToString shows it as "?id".
  static DimExpr Opaque(int id);
  // Parses canonical (or any equivalent) text: integers, identifiers, + - * ( ) and
  // "/ integer" after a primary. nullopt when malformed or too complex.
  static std::optional<DimExpr> Parse(std::string_view text);
  // Known -> constant, symbol -> parsed; nullopt for unknown dims and unparseable symbols.
  static std::optional<DimExpr> FromDim(const Dim& d);

  bool is_constant() const {
    return terms_.empty() || (terms_.size() == 1 && terms_[0].atoms.empty());
  }
  std::optional<int64_t> constant_value() const;
  // All coefficients (constant included) >= 0: the value is >= 0 whatever the symbols.
  bool NonNegative() const;
  bool has_opaque() const;
  // The symbols the expression mentions, quotients included ("(batch*sequence)/4" ->
  // batch, sequence); opaque atoms are not symbols.
  std::set<std::string> Symbols() const;

  std::string ToString() const;
  // Known for constants >= 0; a symbol with the canonical text otherwise; unknown when
  // negative, provably non-positive, opaque or longer than kMaxChars.
  Dim ToDim() const;

  // Replaces symbols by values (atoms inside quotients too). nullopt on overflow.
  std::optional<DimExpr> Substitute(const std::map<std::string, int64_t>& values) const;

  bool operator==(const DimExpr& o) const;
  bool operator!=(const DimExpr& o) const { return !(*this == o); }

  friend std::optional<DimExpr> Add(const DimExpr& a, const DimExpr& b);
  friend std::optional<DimExpr> Sub(const DimExpr& a, const DimExpr& b);
  friend std::optional<DimExpr> Mul(const DimExpr& a, const DimExpr& b);
  // floor(a / c) for c > 0 (nullopt for c <= 0).
  friend std::optional<DimExpr> FloorDiv(const DimExpr& a, int64_t c);
  // a / b where the caller knows b divides a (a Reshape's -1): monomial division, a
  // constant divisor, or one step of polynomial division that reproduces `a` exactly.
  friend std::optional<DimExpr> DivExact(const DimExpr& a, const DimExpr& b);

 private:
  struct Term {
    int64_t coef = 0;
    std::vector<std::string> atoms;  // sorted; identifiers, quotients, or "?id"
    bool operator==(const Term& o) const { return coef == o.coef && atoms == o.atoms; }
  };
  // Merges like terms, drops zeros, sorts; false when over the limits.
  bool Normalize();
  static std::string TermString(const Term& t);
  // The quotient atom floor(num / c) for a numerator already reduced (see FloorDiv).
  static std::optional<std::string> QuotientAtom(const DimExpr& num, int64_t c);
  // Substitutes inside one atom.
  static std::optional<DimExpr> SubstituteAtom(const std::string& atom,
                                               const std::map<std::string, int64_t>& values);

  std::vector<Term> terms_;
};

std::optional<DimExpr> Add(const DimExpr& a, const DimExpr& b);
std::optional<DimExpr> Sub(const DimExpr& a, const DimExpr& b);
std::optional<DimExpr> Mul(const DimExpr& a, const DimExpr& b);
std::optional<DimExpr> FloorDiv(const DimExpr& a, int64_t c);
std::optional<DimExpr> DivExact(const DimExpr& a, const DimExpr& b);

// Dim-level helpers: results are canonical; unknown when an operand is unknown or the
// result is too complex. Identities keep the other operand verbatim (x*1, x+0), and
// x*0 is 0 even for an unknown x.
Dim DimMul(const Dim& a, const Dim& b);
Dim DimAdd(const Dim& a, const Dim& b);
Dim DimSub(const Dim& a, const Dim& b);
// floor(a / c); unknown for c <= 0.
Dim DimDivByConst(const Dim& a, int64_t c);
// True when a and b are provably equal (same text, or equal canonical expressions).
bool DimEq(const Dim& a, const Dim& b);
// The canonical form of a dim (symbols that do not parse are returned unchanged).
Dim CanonicalDim(const Dim& d);
// Replaces symbol values inside a dim; dims that do not parse are returned unchanged.
Dim SubstituteDim(const Dim& d, const std::map<std::string, int64_t>& values);
// True when `d` is a symbol that is one identifier (`batch`), not an expression.
bool IsPlainSymbol(const Dim& d);
// The symbols a dim mentions: none for a known dim, those of its expression for a symbol
// ("2*batch*sequence" -> batch, sequence); nullopt for an unknown dim or a symbol that is
// not an expression (it cannot be bound by symbol values).
std::optional<std::set<std::string>> SymbolsOfDim(const Dim& d);

}  // namespace kiln
