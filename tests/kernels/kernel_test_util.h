// Shared helpers for the CPU kernel tests: seeded random tensors (never zeros), running one
// op on the reference executor, the list of ISA paths to force, and an elementwise
// comparison with a stated tolerance that reports the worst element.
#pragma once

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_context.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "kiln/reference/executor.h"

namespace kiln::cpu::testing {

// Uniform in [lo, hi], resampled away from |v| < 1e-3 so no input is (nearly) zero.
inline std::vector<float> RandomVec(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    do x = dist(gen);
    while (std::fabs(x) < 1e-3f);
  }
  return v;
}

inline Tensor F32(std::vector<int64_t> dims, const std::vector<float>& v) {
  return Tensor::FromF32(std::move(dims), v);
}

// Runs one node (domain, op, attributes) on the reference executor.
inline std::vector<Tensor> RunReferenceOp(const std::string& domain, const std::string& op,
                                          const std::map<std::string, Attribute>& attrs,
                                          std::vector<const Tensor*> inputs, int num_outputs = 1) {
  Graph g;
  g.set_opset(21);
  std::vector<Value> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back(
        inputs[i] ? g.AddInput("in" + std::to_string(i), Type::Of(*inputs[i]))->output() : Value{});
  Node* n = g.AddNode(op, operands, num_outputs, domain);
  for (const auto& [k, v] : attrs) n->set_attr(k, v);
  auto out = EvaluateNode(*n, inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>();
}

// Every path the kernels have; tests skip the ones this CPU cannot run (saying so).
inline std::vector<Isa> AllIsas() { return {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}; }

inline std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(IsaName(info.param));
}

#define KILN_SKIP_UNSUPPORTED_ISA(isa) \
  if (!::kiln::cpu::IsaSupported(isa)) \
  GTEST_SKIP() << "this CPU cannot run the " << ::kiln::cpu::IsaName(isa) << " path"

// Expects |got[i] - want[i]| <= atol + rtol * |want[i]| for all i; reports the worst.
inline void ExpectClose(const float* got, const Tensor& want, double atol, double rtol,
                        const std::string& what) {
  ASSERT_EQ(want.dtype(), DType::kF32) << what;
  const int64_t n = want.NumElements();
  int64_t worst = -1;
  double worst_excess = 0, worst_err = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = want.data<float>()[i], g = got[i];
    const double err = std::fabs(g - w), lim = atol + rtol * std::fabs(w);
    if (!(err <= lim)) {
      ++bad;
      if (worst < 0 || err - lim > worst_excess) {
        worst = i;
        worst_excess = err - lim;
        worst_err = err;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " elements out of tolerance; worst #"
                    << worst << " got " << (worst >= 0 ? got[worst] : 0.f) << " want "
                    << (worst >= 0 ? want.data<float>()[worst] : 0.f) << " |err| " << worst_err;
}

}  // namespace kiln::cpu::testing
