// Symbolic dimension arithmetic (see dim_expr.h for the canonical form and its limits).
// Polynomials are kept normalized after every operation, so equality is structural.
#include "kiln/ir/dim_expr.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdent(std::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  for (char c : s)
    if (!IsIdentStart(c) && !IsDigit(c)) return false;
  return true;
}

int64_t FloorDivInt(int64_t a, int64_t c) {  // c > 0
  int64_t q = a / c;
  if (a % c != 0 && a < 0) --q;
  return q;
}

// Recursive-descent parser over the expression grammar in dim_expr.h.
class ExprParser {
 public:
  explicit ExprParser(std::string_view s) : s_(s) {}

  std::optional<DimExpr> ParseAll() {
    std::optional<DimExpr> e = ParseSum();
    if (!e || pos_ != s_.size()) return std::nullopt;
    return e;
  }

 private:
  static constexpr int kMaxDepth = 8;

  bool Peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

  std::optional<int64_t> ParseInt() {
    if (pos_ >= s_.size() || !IsDigit(s_[pos_])) return std::nullopt;
    int64_t v = 0;
    while (pos_ < s_.size() && IsDigit(s_[pos_])) {
      if (MulOverflows(v, 10, &v) || AddOverflows(v, s_[pos_] - '0', &v)) return std::nullopt;
      ++pos_;
    }
    return v;
  }

  std::optional<DimExpr> ParseSum() {
    bool negate = false;
    if (Peek('-')) {
      negate = true;
      ++pos_;
    }
    std::optional<DimExpr> acc = ParseProduct();
    if (!acc) return std::nullopt;
    if (negate) acc = Sub(DimExpr(), *acc);
    while (acc && (Peek('+') || Peek('-'))) {
      const bool minus = s_[pos_++] == '-';
      std::optional<DimExpr> rhs = ParseProduct();
      if (!rhs) return std::nullopt;
      acc = minus ? Sub(*acc, *rhs) : Add(*acc, *rhs);
    }
    return acc;
  }

  std::optional<DimExpr> ParseProduct() {
    std::optional<DimExpr> acc = ParseFactor();
    while (acc && Peek('*')) {
      ++pos_;
      std::optional<DimExpr> rhs = ParseFactor();
      if (!rhs) return std::nullopt;
      acc = Mul(*acc, *rhs);
    }
    return acc;
  }

  std::optional<DimExpr> ParseFactor() {
    std::optional<DimExpr> e;
    if (pos_ < s_.size() && IsDigit(s_[pos_])) {
      std::optional<int64_t> v = ParseInt();
      if (!v) return std::nullopt;
      e = DimExpr::Constant(*v);
    } else if (pos_ < s_.size() && IsIdentStart(s_[pos_])) {
      const size_t start = pos_;
      while (pos_ < s_.size() && (IsIdentStart(s_[pos_]) || IsDigit(s_[pos_]))) ++pos_;
      e = DimExpr::Symbol(s_.substr(start, pos_ - start));
    } else if (Peek('(')) {
      if (++depth_ > kMaxDepth) return std::nullopt;
      ++pos_;
      e = ParseSum();
      if (!e || !Peek(')')) return std::nullopt;
      ++pos_;
      --depth_;
    } else {
      return std::nullopt;
    }
    while (e && Peek('/')) {
      ++pos_;
      std::optional<int64_t> c = ParseInt();
      if (!c || *c <= 0) return std::nullopt;
      e = FloorDiv(*e, *c);
    }
    return e;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// Splits a quotient atom "x/c" or "(...)/c" into its numerator and divisor.
std::optional<std::pair<DimExpr, int64_t>> SplitQuotient(const std::string& atom) {
  const size_t slash = atom.rfind('/');
  if (slash == std::string::npos || slash == 0) return std::nullopt;
  std::string_view inner(atom.data(), slash);
  if (inner.front() == '(') {
    if (inner.size() < 2 || inner.back() != ')') return std::nullopt;
    inner = inner.substr(1, inner.size() - 2);
  }
  std::optional<DimExpr> num = DimExpr::Parse(inner);
  std::optional<DimExpr> c = DimExpr::Parse(std::string_view(atom).substr(slash + 1));
  if (!num || !c || !c->constant_value() || *c->constant_value() <= 0) return std::nullopt;
  return std::make_pair(*num, *c->constant_value());
}

bool IsOpaqueAtom(const std::string& atom) { return atom.find('?') != std::string::npos; }

}  // namespace

DimExpr DimExpr::Constant(int64_t c) {
  DimExpr e;
  if (c != 0) e.terms_.push_back(Term{c, {}});
  return e;
}

std::optional<DimExpr> DimExpr::Symbol(std::string_view name) {
  if (!IsIdent(name)) return std::nullopt;
  DimExpr e;
  e.terms_.push_back(Term{1, {std::string(name)}});
  return e;
}

DimExpr DimExpr::Opaque(int id) {
  DimExpr e;
  e.terms_.push_back(Term{1, {absl::StrCat("?", id)}});
  return e;
}

std::optional<DimExpr> DimExpr::Parse(std::string_view text) {
  if (text.empty() || text.size() > 4 * kMaxChars) return std::nullopt;
  return ExprParser(text).ParseAll();
}

std::optional<DimExpr> DimExpr::FromDim(const Dim& d) {
  if (d.is_known()) return Constant(d.value());
  if (d.is_symbol()) return Parse(d.symbol());
  return std::nullopt;
}

std::optional<int64_t> DimExpr::constant_value() const {
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_[0].atoms.empty()) return terms_[0].coef;
  return std::nullopt;
}

bool DimExpr::NonNegative() const {
  return std::all_of(terms_.begin(), terms_.end(), [](const Term& t) { return t.coef >= 0; });
}

bool DimExpr::has_opaque() const {
  for (const Term& t : terms_)
    for (const std::string& a : t.atoms)
      if (IsOpaqueAtom(a)) return true;
  return false;
}

bool DimExpr::operator==(const DimExpr& o) const { return terms_ == o.terms_; }

bool DimExpr::Normalize() {
  for (Term& t : terms_) std::sort(t.atoms.begin(), t.atoms.end());
  std::sort(terms_.begin(), terms_.end(),
            [](const Term& a, const Term& b) { return a.atoms < b.atoms; });
  std::vector<Term> merged;
  for (Term& t : terms_) {
    if (!merged.empty() && merged.back().atoms == t.atoms) {
      if (AddOverflows(merged.back().coef, t.coef, &merged.back().coef)) return false;
    } else {
      merged.push_back(std::move(t));
    }
  }
  merged.erase(
      std::remove_if(merged.begin(), merged.end(), [](const Term& t) { return t.coef == 0; }),
      merged.end());
  std::stable_sort(merged.begin(), merged.end(), [](const Term& a, const Term& b) {
    return a.atoms.size() > b.atoms.size();  // ties keep the lexicographic order
  });
  terms_ = std::move(merged);
  if (static_cast<int>(terms_.size()) > kMaxTerms) return false;
  for (const Term& t : terms_)
    if (static_cast<int>(t.atoms.size()) > kMaxFactors) return false;
  return true;
}

std::string DimExpr::TermString(const Term& t) {
  if (t.atoms.empty()) return absl::StrCat(t.coef);
  const std::string atoms = absl::StrJoin(t.atoms, "*");
  if (t.coef == 1) return atoms;
  if (t.coef == -1) return absl::StrCat("-", atoms);
  return absl::StrCat(t.coef, "*", atoms);
}

std::string DimExpr::ToString() const {
  if (terms_.empty()) return "0";
  std::string s;
  for (size_t i = 0; i < terms_.size(); ++i) {
    std::string ts = TermString(terms_[i]);
    if (i > 0 && ts[0] != '-') s.push_back('+');
    s += ts;
  }
  return s;
}

Dim DimExpr::ToDim() const {
  if (has_opaque()) return Dim();
  if (std::optional<int64_t> c = constant_value()) return *c >= 0 ? Dim::Known(*c) : Dim();
  if (std::all_of(terms_.begin(), terms_.end(), [](const Term& t) { return t.coef <= 0; }))
    return Dim();
  std::string s = ToString();
  if (s.size() > kMaxChars) return Dim();
  return Dim::Symbol(std::move(s));
}

std::optional<std::string> DimExpr::QuotientAtom(const DimExpr& num, int64_t c) {
  const std::string s = num.ToString();
  std::string atom;
  if (num.terms_.size() == 1 && num.terms_[0].coef == 1 && num.terms_[0].atoms.size() == 1 &&
      IsIdent(num.terms_[0].atoms[0])) {
    atom = absl::StrCat(s, "/", c);
  } else {
    atom = absl::StrCat("(", s, ")/", c);
  }
  if (atom.size() > kMaxChars) return std::nullopt;
  return atom;
}

std::optional<DimExpr> Add(const DimExpr& a, const DimExpr& b) {
  DimExpr r = a;
  r.terms_.insert(r.terms_.end(), b.terms_.begin(), b.terms_.end());
  if (!r.Normalize()) return std::nullopt;
  return r;
}

std::optional<DimExpr> Sub(const DimExpr& a, const DimExpr& b) {
  DimExpr nb = b;
  for (DimExpr::Term& t : nb.terms_) {
    if (t.coef == INT64_MIN) return std::nullopt;
    t.coef = -t.coef;
  }
  return Add(a, nb);
}

std::optional<DimExpr> Mul(const DimExpr& a, const DimExpr& b) {
  if (a.terms_.size() * b.terms_.size() > 64) return std::nullopt;
  DimExpr r;
  for (const DimExpr::Term& x : a.terms_) {
    for (const DimExpr::Term& y : b.terms_) {
      DimExpr::Term t;
      if (MulOverflows(x.coef, y.coef, &t.coef)) return std::nullopt;
      t.atoms = x.atoms;
      t.atoms.insert(t.atoms.end(), y.atoms.begin(), y.atoms.end());
      r.terms_.push_back(std::move(t));
    }
  }
  if (!r.Normalize()) return std::nullopt;
  return r;
}

std::optional<DimExpr> FloorDiv(const DimExpr& a, int64_t c) {
  if (c <= 0) return std::nullopt;
  if (c == 1) return a;
  if (std::optional<int64_t> v = a.constant_value()) return DimExpr::Constant(FloorDivInt(*v, c));
  // floor((c*Q + R) / c) = Q + floor(R / c) with every coefficient of R in [0, c).
  DimExpr q, rest;
  for (const DimExpr::Term& t : a.terms_) {
    const int64_t qc = FloorDivInt(t.coef, c);
    const int64_t rc = t.coef - qc * c;
    if (qc != 0) q.terms_.push_back({qc, t.atoms});
    if (rc != 0) rest.terms_.push_back({rc, t.atoms});
  }
  if (!q.Normalize() || !rest.Normalize()) return std::nullopt;
  if (rest.terms_.empty()) return q;
  // floor(g*R' / (g*c')) = floor(R' / c').
  int64_t g = c;
  for (const DimExpr::Term& t : rest.terms_) g = std::gcd(g, t.coef);
  for (DimExpr::Term& t : rest.terms_) t.coef /= g;
  c /= g;
  // floor(floor(X/d) / c) = floor(X / (d*c)).
  if (rest.terms_.size() == 1 && rest.terms_[0].coef == 1 && rest.terms_[0].atoms.size() == 1 &&
      !IsIdent(rest.terms_[0].atoms[0]) && !IsOpaqueAtom(rest.terms_[0].atoms[0])) {
    if (auto split = SplitQuotient(rest.terms_[0].atoms[0])) {
      int64_t dc;
      if (MulOverflows(split->second, c, &dc)) return std::nullopt;
      std::optional<DimExpr> inner = FloorDiv(split->first, dc);
      if (!inner) return std::nullopt;
      return Add(q, *inner);
    }
  }
  std::optional<std::string> atom = DimExpr::QuotientAtom(rest, c);
  if (!atom) return std::nullopt;
  DimExpr qa;
  qa.terms_.push_back({1, {*atom}});
  return Add(q, qa);
}

std::optional<DimExpr> DivExact(const DimExpr& a, const DimExpr& b) {
  if (std::optional<int64_t> c = b.constant_value()) {
    if (*c > 0) return FloorDiv(a, *c);
    if (*c < 0) {
      std::optional<DimExpr> na = Sub(DimExpr(), a);
      return na ? FloorDiv(*na, -*c) : std::nullopt;
    }
    return std::nullopt;
  }
  if (a == b) return DimExpr::Constant(1);
  // Monomial division of each term by b's leading term.
  auto divide_by_term = [](const DimExpr& num, const DimExpr::Term& den) -> std::optional<DimExpr> {
    DimExpr r;
    for (const DimExpr::Term& t : num.terms_) {
      DimExpr::Term out{t.coef, t.atoms};
      for (const std::string& atom : den.atoms) {
        auto it = std::find(out.atoms.begin(), out.atoms.end(), atom);
        if (it == out.atoms.end()) return std::nullopt;
        out.atoms.erase(it);
      }
      r.terms_.push_back(std::move(out));
    }
    if (!r.Normalize()) return std::nullopt;
    return DivExact(r, DimExpr::Constant(den.coef));
  };
  if (b.terms_.size() == 1) return divide_by_term(a, b.terms_[0]);
  if (a.terms_.empty()) return DimExpr();
  // One step of polynomial division: m = lead(a) / lead(b), accepted only if b*m == a.
  DimExpr lead;
  lead.terms_.push_back(a.terms_[0]);
  std::optional<DimExpr> m = divide_by_term(lead, b.terms_[0]);
  if (!m) return std::nullopt;
  std::optional<DimExpr> back = Mul(b, *m);
  if (back && *back == a) return m;
  return std::nullopt;
}

std::optional<DimExpr> DimExpr::SubstituteAtom(const std::string& atom,
                                               const std::map<std::string, int64_t>& values) {
  if (IsIdent(atom)) {
    auto it = values.find(atom);
    return it == values.end() ? Symbol(atom) : std::optional<DimExpr>(Constant(it->second));
  }
  if (IsOpaqueAtom(atom)) {
    DimExpr e;
    e.terms_.push_back({1, {atom}});
    return e;
  }
  auto split = SplitQuotient(atom);
  if (!split) return std::nullopt;
  std::optional<DimExpr> num = split->first.Substitute(values);
  return num ? FloorDiv(*num, split->second) : std::nullopt;
}

std::set<std::string> DimExpr::Symbols() const {
  std::set<std::string> out;
  for (const Term& t : terms_)
    for (const std::string& atom : t.atoms) {
      if (IsIdent(atom)) {
        out.insert(atom);
      } else if (!IsOpaqueAtom(atom)) {
        if (auto split = SplitQuotient(atom)) out.merge(split->first.Symbols());
      }
    }
  return out;
}

std::optional<DimExpr> DimExpr::Substitute(const std::map<std::string, int64_t>& values) const {
  DimExpr sum;
  for (const Term& t : terms_) {
    std::optional<DimExpr> prod = Constant(t.coef);
    for (const std::string& atom : t.atoms) {
      std::optional<DimExpr> a = SubstituteAtom(atom, values);
      if (!a) return std::nullopt;
      prod = Mul(*prod, *a);
      if (!prod) return std::nullopt;
    }
    std::optional<DimExpr> s = Add(sum, *prod);
    if (!s) return std::nullopt;
    sum = std::move(*s);
  }
  return sum;
}

namespace {

template <typename F>
Dim Binary(const Dim& a, const Dim& b, F op) {
  std::optional<DimExpr> x = DimExpr::FromDim(a);
  std::optional<DimExpr> y = DimExpr::FromDim(b);
  if (!x || !y) return Dim();
  std::optional<DimExpr> r = op(*x, *y);
  return r ? r->ToDim() : Dim();
}

}  // namespace

Dim DimMul(const Dim& a, const Dim& b) {
  if (a == Dim::Known(1)) return b;
  if (b == Dim::Known(1)) return a;
  if (a == Dim::Known(0) || b == Dim::Known(0)) return Dim::Known(0);
  return Binary(a, b, [](const DimExpr& x, const DimExpr& y) { return Mul(x, y); });
}

Dim DimAdd(const Dim& a, const Dim& b) {
  if (a == Dim::Known(0)) return b;
  if (b == Dim::Known(0)) return a;
  return Binary(a, b, [](const DimExpr& x, const DimExpr& y) { return Add(x, y); });
}

Dim DimSub(const Dim& a, const Dim& b) {
  if (b == Dim::Known(0)) return a;
  return Binary(a, b, [](const DimExpr& x, const DimExpr& y) { return Sub(x, y); });
}

Dim DimDivByConst(const Dim& a, int64_t c) {
  if (c <= 0) return Dim();
  if (c == 1) return a;
  std::optional<DimExpr> x = DimExpr::FromDim(a);
  if (!x) return Dim();
  std::optional<DimExpr> r = FloorDiv(*x, c);
  return r ? r->ToDim() : Dim();
}

bool DimEq(const Dim& a, const Dim& b) {
  if (a.is_unknown() || b.is_unknown()) return false;
  if (a == b) return true;
  std::optional<DimExpr> x = DimExpr::FromDim(a);
  std::optional<DimExpr> y = DimExpr::FromDim(b);
  return x && y && *x == *y;
}

Dim CanonicalDim(const Dim& d) {
  if (!d.is_symbol()) return d;
  std::optional<DimExpr> e = DimExpr::FromDim(d);
  if (!e) return d;
  Dim c = e->ToDim();
  return c.is_unknown() ? d : c;
}

Dim SubstituteDim(const Dim& d, const std::map<std::string, int64_t>& values) {
  if (!d.is_symbol() || values.empty()) return d;
  if (IsIdent(d.symbol())) {
    auto it = values.find(d.symbol());
    return it == values.end() ? d : Dim::Known(it->second);
  }
  std::optional<DimExpr> e = DimExpr::FromDim(d);
  if (!e) return d;
  std::optional<DimExpr> s = e->Substitute(values);
  if (!s) return d;
  if (*s == *e) return d;
  return s->ToDim();
}

bool IsPlainSymbol(const Dim& d) { return d.is_symbol() && IsIdent(d.symbol()); }

std::optional<std::set<std::string>> SymbolsOfDim(const Dim& d) {
  if (d.is_known()) return std::set<std::string>{};
  std::optional<DimExpr> e = DimExpr::FromDim(d);
  if (!e || e->has_opaque()) return std::nullopt;
  return e->Symbols();
}

}  // namespace kiln
