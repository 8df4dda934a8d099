// Shared helpers for the reference-kernel tests: tensors from literal values, typed views
// of a tensor's bytes, running one op through the reference executor, and status message
// checks. Values are copied bytewise, so a test states exactly what the kernel sees.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "kiln/reference/executor.h"

namespace kiln::testing {

// A tensor of `dt` and `dims` holding `v` bytewise; fails the test when the sizes differ
// (copying only what fits).
template <typename T>
Tensor Make(DType dt, std::vector<int64_t> dims, std::vector<T> v) {
  Tensor t(dt, std::move(dims));
  EXPECT_EQ(t.NumBytes(), v.size() * sizeof(T));
  const size_t n = std::min<size_t>(t.NumBytes(), v.size() * sizeof(T));
  if (n > 0) std::memcpy(t.raw(), v.data(), n);
  return t;
}
inline Tensor F32(std::vector<int64_t> d, std::vector<float> v) {
  return Make(DType::kF32, std::move(d), std::move(v));
}
inline Tensor I64(std::vector<int64_t> d, std::vector<int64_t> v) {
  return Make(DType::kI64, std::move(d), std::move(v));
}
inline Tensor I32(std::vector<int64_t> d, std::vector<int32_t> v) {
  return Make(DType::kI32, std::move(d), std::move(v));
}
inline Tensor Bool(std::vector<int64_t> d, std::vector<uint8_t> v) {
  return Make(DType::kBool, std::move(d), std::move(v));
}

// The elements of `t` read as T (the caller names the dtype's C++ type); empty for an
// undefined tensor.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  if (!t.defined() || t.raw() == nullptr) return {};
  std::vector<T> v(static_cast<size_t>(t.NumElements()));
  const size_t n = std::min<size_t>(t.NumBytes(), v.size() * sizeof(T));
  if (n > 0) std::memcpy(v.data(), t.raw(), n);
  return v;
}
// The elements of an f32 tensor; fails the test for another dtype.
inline std::vector<float> Floats(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kF32);
  return Values<float>(t);
}

// True if the status message contains `needle`.
inline bool Contains(const absl::Status& s, const std::string& needle) {
  return std::string(s.message()).find(needle) != std::string::npos;
}

// Runs one node of `op` (opset 21, provenance "n_<op>") on graph inputs holding `ins`
// through the reference executor; undefined tensors in `ins` are omitted inputs.
inline absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op, std::vector<Tensor> ins,
                                                 std::map<std::string, Attribute> attrs = {},
                                                 int num_outputs = 1) {
  Graph g;
  g.set_opset(21);
  std::vector<Value> vals;
  absl::flat_hash_map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].defined()) {
      vals.push_back(Value{});
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    vals.push_back(g.AddInput(name, Type::Of(ins[i]))->output());
    feeds[name] = ins[i];
  }
  Node* n = g.AddNode(op, vals, num_outputs);
  n->add_provenance("n_" + op);
  for (auto& [k, a] : attrs) n->set_attr(k, a);
  for (int i = 0; i < num_outputs; ++i) g.AddOutput("out" + std::to_string(i), n->output(i));
  return RunReference(g, feeds);
}

// RunOp for a one-output op; fails the test on error (and returns an undefined tensor).
inline Tensor Run1(const std::string& op, std::vector<Tensor> ins,
                   std::map<std::string, Attribute> attrs = {}) {
  auto r = RunOp(op, std::move(ins), std::move(attrs));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? (*r)[0] : Tensor();
}

}  // namespace kiln::testing
