// Helpers for the CPU executor tests: a small builder for hand-made Plans (weights blob
// with 64-byte-aligned entries, arena buffers laid out one after another, I/O bindings),
// seeded random data, one-node reference evaluation (the oracle) and a comparison that
// reports the worst element.
#pragma once

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "kiln/ir/text.h"
#include "kiln/kiln.h"
#include "kiln/reference/executor.h"

namespace kiln::runtime_test {

// Uniform in [lo, hi], away from 0 by 1e-3, from a fixed seed.
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

inline int64_t NumElems(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

inline Tensor RandomF32(std::vector<int64_t> dims, uint32_t seed) {
  return Tensor::FromF32(dims, RandomVec(NumElems(dims), seed));
}

// Builds a Plan bucket by bucket. Weights are appended once to a shared blob (64-byte
// aligned) and referenced from any bucket by offset.
class PlanBuilder {
 public:
  PlanBuilder() { plan_.manifest.kiln_version = "0.1.0"; }

  Plan& plan() { return plan_; }
  void Input(std::string name, DType dt, std::vector<Dim> dims) {
    plan_.inputs.push_back({std::move(name), dt, std::move(dims)});
  }
  void Output(std::string name, DType dt, std::vector<Dim> dims) {
    plan_.outputs.push_back({std::move(name), dt, std::move(dims)});
  }

  // Appends raw bytes to the weights blob; returns their offset.
  int64_t AddWeightBytes(const void* data, size_t bytes) {
    while (blob_.size() % 64) blob_.push_back('\0');
    const int64_t off = static_cast<int64_t>(blob_.size());
    blob_.append(static_cast<const char*>(data), bytes);
    return off;
  }
  int64_t AddWeight(const std::vector<float>& v) {
    return AddWeightBytes(v.data(), v.size() * sizeof(float));
  }
  int64_t AddWeight(const Tensor& t) { return AddWeightBytes(t.raw(), t.NumBytes()); }

  PlanBucket& Bucket(std::map<std::string, int64_t> bindings) {
    plan_.buckets.emplace_back();
    plan_.buckets.back().bindings = std::move(bindings);
    return plan_.buckets.back();
  }
  PlanBucket& cur() { return plan_.buckets.back(); }

  int Buffer(PlanBuffer b) {
    cur().buffers.push_back(std::move(b));
    return static_cast<int>(cur().buffers.size()) - 1;
  }
  static int64_t Bytes(DType dt, const std::vector<int64_t>& dims) {
    return NumElems(dims) * static_cast<int64_t>(DTypeSize(dt));
  }
  int Weight(int64_t offset, std::vector<int64_t> dims, DType dt = DType::kF32) {
    return Buffer({PlanBufferKind::kWeight, offset, Bytes(dt, dims), dt, dims, 0});
  }
  // A new arena buffer after the last one (64-byte aligned); grows arena_bytes.
  int Arena(std::vector<int64_t> dims, DType dt = DType::kF32) {
    const int64_t off = (cur().arena_bytes + 63) / 64 * 64;
    const int64_t bytes = Bytes(dt, dims);
    cur().arena_bytes = off + bytes;
    cur().no_reuse_bytes = cur().arena_bytes;
    cur().peak_live_bytes = cur().arena_bytes;
    return Buffer({PlanBufferKind::kArena, off, bytes, dt, dims, 0});
  }
  // A second view (alias) of buffer `of` with new dims.
  int Alias(int of, std::vector<int64_t> dims) {
    PlanBuffer b = cur().buffers[of];
    b.dims = std::move(dims);
    return Buffer(std::move(b));
  }
  int In(int binding, std::vector<int64_t> dims, DType dt = DType::kF32) {
    return Buffer({PlanBufferKind::kInput, 0, Bytes(dt, dims), dt, dims, binding});
  }
  int Out(int binding, std::vector<int64_t> dims, DType dt = DType::kF32) {
    return Buffer({PlanBufferKind::kOutput, 0, Bytes(dt, dims), dt, dims, binding});
  }
  PlanStep& Step(std::string kernel, std::vector<int32_t> ins, std::vector<int32_t> outs,
                 std::vector<PlanParam> params, std::vector<std::string> prov = {}) {
    if (prov.empty()) prov = {"/" + kernel};
    cur().steps.push_back(
        {std::move(kernel), std::move(ins), std::move(outs), std::move(params), std::move(prov)});
    return cur().steps.back();
  }

  std::shared_ptr<const Plan> Finish() {
    plan_.weights = PlanWeights::Copy(blob_);
    return std::make_shared<const Plan>(plan_);
  }

 private:
  Plan plan_;
  std::string blob_;
};

inline PlanParam P(std::string name, int64_t v) { return {std::move(name), v}; }
inline PlanParam P(std::string name, double v) { return {std::move(name), v}; }
inline PlanParam P(std::string name, std::string v) { return {std::move(name), std::move(v)}; }
inline PlanParam P(std::string name, const char* v) { return {std::move(name), std::string(v)}; }
inline PlanParam P(std::string name, std::vector<int64_t> v) {
  return {std::move(name), std::move(v)};
}

// Runs one node on the reference executor; also returns the IR text of a one-node graph
// (one Input per present operand, the node, return of its outputs) for `ref` steps.
struct RefOp {
  std::vector<Tensor> outputs;
  std::string text;
};
inline RefOp RunRefOp(const std::string& domain, const std::string& op,
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
  n->add_provenance("/" + op);
  RefOp r;
  auto out = EvaluateNode(*n, inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (out.ok()) r.outputs = *out;
  for (int i = 0; i < num_outputs; ++i) {
    if (i < static_cast<int>(r.outputs.size())) n->set_output_type(i, Type::Of(r.outputs[i]));
    g.AddOutput("out" + std::to_string(i), n->output(i));
  }
  r.text = PrintGraph(g);
  return r;
}

inline TensorView View(const Tensor& t) { return {t.dtype(), t.dims(), t.raw()}; }
inline MutableTensorView MView(Tensor& t) { return {t.dtype(), t.dims(), t.raw()}; }

// Expects |got - want| <= atol + rtol * |want| elementwise (same dtype f32 and dims).
inline void ExpectClose(const Tensor& got, const Tensor& want, double atol, double rtol,
                        const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::kF32) << what;
  ASSERT_EQ(want.dtype(), DType::kF32) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    const double err = std::fabs(g - w), lim = atol + rtol * std::fabs(w);
    if (!(err <= lim)) {
      ++bad;
      if (worst < 0 || err - lim > worst_excess) {
        worst = i;
        worst_excess = err - lim;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.NumElements()
                    << " elements out of tolerance; worst #" << worst << " got "
                    << (worst >= 0 ? got.data<float>()[worst] : 0.f) << " want "
                    << (worst >= 0 ? want.data<float>()[worst] : 0.f);
}

}  // namespace kiln::runtime_test
