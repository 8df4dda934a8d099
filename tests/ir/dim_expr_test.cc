// Unit tests of the symbolic dim arithmetic: canonical forms, simplification, floor
// semantics, limits (too complex -> unknown), and the IR text round-trip of expression dims.
#include "kiln/ir/dim_expr.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/ir/text.h"

namespace kiln {
namespace {

DimExpr P(const std::string& s) {
  std::optional<DimExpr> e = DimExpr::Parse(s);
  EXPECT_TRUE(e.has_value()) << s;
  return e.value_or(DimExpr());
}
Dim S(const std::string& s) { return Dim::Symbol(s); }
Dim K(int64_t v) { return Dim::Known(v); }

TEST(DimExprTest, CanonicalForms) {
  EXPECT_EQ(P("sequence*2*batch").ToString(), "2*batch*sequence");
  EXPECT_EQ(P("b+a").ToString(), "a+b");
  EXPECT_EQ(P("1+a*b+a").ToString(), "a*b+a+1");
  EXPECT_EQ(P("a-1").ToString(), "a-1");
  EXPECT_EQ(P("1-a").ToString(), "-a+1");
  EXPECT_EQ(P("a*a").ToString(), "a*a");
  EXPECT_EQ(P("(a+1)*(a-1)").ToString(), "a*a-1");
  EXPECT_EQ(P("a-a").ToString(), "0");
  EXPECT_EQ(P("3*4").ToString(), "12");
  EXPECT_EQ(P("-(a+b)").ToString(), "-a-b");
}

TEST(DimExprTest, ParsePrintRoundTrip) {
  for (const char* s :
       {"2*batch*sequence", "batch*sequence+batch-1", "sequence/2", "(batch*sequence)/4",
        "2*(sequence+1)/4*batch", "(a/2+b)/3", "-a+1", "(b+1)/2+a+1"}) {
    std::optional<DimExpr> e = DimExpr::Parse(s);
    ASSERT_TRUE(e) << s;
    EXPECT_EQ(e->ToString(), s);
  }
}

TEST(DimExprTest, RejectsMalformedText) {
  for (const char* s : {"", "a+", "*a", "a b", "a,b", "(a", "a)", "a/0", "a/b", "a/-2", "?1",
                        "99999999999999999999", "((((((((((a))))))))))"})
    EXPECT_FALSE(DimExpr::Parse(s).has_value()) << s;
}

TEST(DimExprTest, FloorDivision) {
  EXPECT_EQ(FloorDiv(P("4*a+8"), 4)->ToString(), "a+2");
  EXPECT_EQ(FloorDiv(P("a*b"), 4)->ToString(), "(a*b)/4");
  EXPECT_EQ(FloorDiv(P("a"), 2)->ToString(), "a/2");
  // floor((2a + b + 3) / 2) = a + 1 + floor((b + 1) / 2); '(' sorts before letters.
  EXPECT_EQ(FloorDiv(P("2*a+b+3"), 2)->ToString(), "(b+1)/2+a+1");
  // floor(6a / 4) = floor(3a / 2) = a + floor(a / 2)
  EXPECT_EQ(FloorDiv(P("6*a"), 4)->ToString(), "a+a/2");
  // floor(floor(a / 2) / 3) = floor(a / 6)
  EXPECT_EQ(FloorDiv(P("a/2"), 3)->ToString(), "a/6");
  EXPECT_EQ(FloorDiv(P("7"), 2)->constant_value(), 3);
  EXPECT_EQ(FloorDiv(P("-7"), 2)->constant_value(), -4);
  EXPECT_FALSE(FloorDiv(P("a"), 0).has_value());
  EXPECT_FALSE(FloorDiv(P("a"), -2).has_value());
  // Substituting a value evaluates the floor exactly.
  EXPECT_EQ(P("(a*b)/4").Substitute({{"a", 3}, {"b", 3}})->constant_value(), 2);
  EXPECT_EQ(P("(b+1)/2+a+1").Substitute({{"a", 5}, {"b", 4}})->constant_value(), (10 + 4 + 3) / 2);
}

TEST(DimExprTest, ExactDivision) {
  EXPECT_EQ(DivExact(P("64*batch*sequence"), P("4*batch*sequence"))->ToString(), "16");
  EXPECT_EQ(DivExact(P("64*batch*sequence"), P("64"))->ToString(), "batch*sequence");
  EXPECT_EQ(DivExact(P("4*s+4"), P("s+1"))->ToString(), "4");
  EXPECT_EQ(DivExact(P("a*b+a"), P("b+1"))->ToString(), "a");
  EXPECT_EQ(DivExact(P("2*a*b"), P("a"))->ToString(), "2*b");
  EXPECT_FALSE(DivExact(P("a*b"), P("c")).has_value());
  EXPECT_FALSE(DivExact(P("a"), P("0")).has_value());
  // Opaque atoms cancel, and what is left of them is never a dim.
  std::optional<DimExpr> q = DivExact(*Mul(DimExpr::Opaque(0), P("64")), DimExpr::Opaque(0));
  EXPECT_EQ(q->ToDim(), K(64));
  EXPECT_TRUE(Mul(DimExpr::Opaque(0), P("2"))->ToDim().is_unknown());
}

TEST(DimExprTest, DimHelpers) {
  EXPECT_EQ(DimMul(S("sequence"), S("batch")), S("batch*sequence"));
  EXPECT_EQ(DimMul(K(2), DimMul(S("batch"), K(3))), S("6*batch"));
  EXPECT_EQ(DimMul(K(1), S("weird name")), S("weird name"));  // identity keeps it verbatim
  EXPECT_EQ(DimMul(K(0), Dim()), K(0));
  EXPECT_TRUE(DimMul(K(2), Dim()).is_unknown());
  EXPECT_TRUE(DimMul(K(2), S("weird name")).is_unknown());  // not an identifier: no algebra
  EXPECT_EQ(DimAdd(S("a"), K(3)), S("a+3"));
  EXPECT_EQ(DimAdd(S("a"), DimSub(K(3), S("a"))), K(3));
  EXPECT_EQ(DimSub(S("a"), K(1)), S("a-1"));
  EXPECT_TRUE(DimSub(K(1), K(3)).is_unknown());    // negative: not a dim
  EXPECT_TRUE(DimSub(K(0), S("a")).is_unknown());  // provably <= 0
  EXPECT_EQ(DimDivByConst(S("2*a"), 2), S("a"));
  EXPECT_EQ(DimDivByConst(K(9), 2), K(4));
  EXPECT_TRUE(DimDivByConst(S("a"), 0).is_unknown());
  EXPECT_TRUE(DimEq(S("a*b"), S("b*a")));
  EXPECT_TRUE(DimEq(S("3"), K(3)));
  EXPECT_FALSE(DimEq(S("a"), S("b")));
  EXPECT_FALSE(DimEq(Dim(), Dim()));  // unknown is never provably equal
  EXPECT_EQ(CanonicalDim(S("b*a")), S("a*b"));
  EXPECT_EQ(CanonicalDim(S("x y")), S("x y"));
  EXPECT_EQ(SubstituteDim(S("2*batch*sequence"), {{"batch", 1}}), S("2*sequence"));
  EXPECT_EQ(SubstituteDim(S("(batch*sequence)/4"), {{"batch", 2}, {"sequence", 6}}), K(3));
  EXPECT_EQ(SubstituteDim(S("batch"), {{"sequence", 6}}), S("batch"));
}

TEST(DimExprTest, TooComplexBecomesUnknown) {
  // (a+1)(b+1)(c+1)(d+1) has 16 terms > kMaxTerms.
  std::optional<DimExpr> e = P("(a+1)*(b+1)");
  e = Mul(*e, P("(c+1)*(d+1)"));
  EXPECT_FALSE(e.has_value());
  EXPECT_FALSE(DimExpr::Parse("a*b*c*d*e*f*g").has_value());        // 7 factors > kMaxFactors
  EXPECT_FALSE(Mul(P("4611686018427387904"), P("4")).has_value());  // overflow
  Dim d = S("a");
  for (int i = 0; i < 10; ++i) d = DimMul(d, S(std::string(12, static_cast<char>('b' + i))));
  EXPECT_TRUE(d.is_unknown());
}

TEST(DimExprTest, SymbolsOfExpressions) {
  using Set = std::set<std::string>;
  EXPECT_EQ(P("2*batch*sequence").Symbols(), (Set{"batch", "sequence"}));
  EXPECT_EQ(P("(batch*sequence)/4+x1").Symbols(), (Set{"batch", "sequence", "x1"}));
  EXPECT_EQ(P("7").Symbols(), Set{});
  EXPECT_EQ(DimExpr::Opaque(3).Symbols(), Set{});
  // Dims: known -> none; a symbol -> its expression's; unknown, opaque or not an
  // expression -> nullopt (the compiler then refuses to bind it).
  EXPECT_EQ(SymbolsOfDim(K(4)), Set{});
  EXPECT_EQ(SymbolsOfDim(S("batch")), Set{"batch"});
  EXPECT_EQ(SymbolsOfDim(S("2*(sequence+1)/4*batch")), (Set{"batch", "sequence"}));
  EXPECT_EQ(SymbolsOfDim(Dim()), std::nullopt);
  EXPECT_EQ(SymbolsOfDim(S("?")), std::nullopt);
  EXPECT_EQ(SymbolsOfDim(S("batch size")), std::nullopt);
  EXPECT_TRUE(IsPlainSymbol(S("batch_1")));
  EXPECT_FALSE(IsPlainSymbol(S("2*batch")));
  EXPECT_FALSE(IsPlainSymbol(S("1x")));
  EXPECT_FALSE(IsPlainSymbol(K(1)));
}

TEST(DimExprTest, ExpressionDimsRoundTripThroughIrText) {
  Graph g;
  Type t;
  t.dtype = DType::kF32;
  t.shape = std::vector<Dim>{S("2*batch*sequence"), S("(batch*sequence)/4"), S("sequence-1"),
                             S("(b+1)/2+a+1"), K(3)};
  Node* in = g.AddInput("x", t);
  g.AddOutput("y", in->output());
  const std::string text = PrintGraph(g);
  auto parsed = ParseGraph(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ((*parsed)->inputs()[0]->output_info(0).type, t) << text;
  EXPECT_EQ(PrintGraph(**parsed), text);
}

}  // namespace
}  // namespace kiln
