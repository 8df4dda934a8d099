// A hand-built Plan shared by the plan tests (2 buckets, every buffer kind, steps with
// every parameter kind, 10 KiB of patterned weights), and an image assembler that
// skips the writer's validation so tests can produce files with bad metadata.
#pragma once

#include <string>

#include "kiln/plan/plan.h"
#include "plan/crc32c.h"
#include "plan/plan_format.h"
#include "plan/plan_metadata.h"

namespace kiln::plan_test {

inline Plan SamplePlan() {
  Plan p;
  p.target = PlanTarget::kCpu;
  p.manifest.kiln_version = "0.1.0";
  p.model_sha256 = Sha256("model bytes");
  p.compile_options = "-O2 --profile batch=1:8,sequence=16:128";
  p.inputs = {{"input_ids", DType::kI64, {Dim::Symbol("batch"), Dim::Symbol("sequence")}},
              {"attention_mask", DType::kI64, {Dim::Symbol("batch"), Dim::Symbol("sequence")}}};
  p.outputs = {{"embeddings", DType::kF32, {Dim::Symbol("batch"), Dim::Known(32)}}};
  const int64_t sizes[2][2] = {{1, 16}, {8, 128}};
  for (const auto& bs : sizes) {
    PlanBucket b;
    b.bindings = {{"sequence", bs[1]}, {"batch", bs[0]}};
    const int64_t act = bs[0] * bs[1] * 32 * 4;
    b.arena_bytes = 2 * act;
    b.buffers = {
        {PlanBufferKind::kInput, 0, bs[0] * bs[1] * 8, DType::kI64, {bs[0], bs[1]}, 0},
        {PlanBufferKind::kInput, 0, bs[0] * bs[1] * 8, DType::kI64, {bs[0], bs[1]}, 1},
        {PlanBufferKind::kWeight, 0, 8192, DType::kF32, {64, 32}, 0},
        {PlanBufferKind::kWeight, 8192, 128, DType::kF32, {32}, 0},
        {PlanBufferKind::kArena, 0, act, DType::kF32, {bs[0], bs[1], 32}, 0},
        {PlanBufferKind::kArena, act, act, DType::kF32, {bs[0], bs[1], 32}, 0},
        {PlanBufferKind::kOutput, 0, bs[0] * 32 * 4, DType::kF32, {bs[0], 32}, 0},
    };
    b.steps = {
        {"cpu.gather", {2, 0}, {4}, {{"axis", int64_t{0}}}, {"/embeddings/Gather"}},
        {"cpu.linear",
         {4, 2, 3},
         {5},
         {{"alpha", 1.5},
          {"perm", std::vector<int64_t>{0, 2, 1}},
          {"empty", std::vector<int64_t>{}}},
         {"/layer.0/MatMul", "/layer.0/Add"}},
        {"cpu.masked_mean", {5, 1}, {6}, {}, {"/pool/ReduceMean"}},
    };
    p.buckets.push_back(std::move(b));
  }
  std::string w(10240, '\0');
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>((i * 131 + 7) & 0xff);
  p.weights = PlanWeights::Copy(w);
  return p;
}

// Like SerializePlan but without validating the Plan, for building bad files.
inline std::string AssembleUnchecked(const Plan& plan) {
  using namespace plan_internal;
  std::string meta = EncodeMetadata(plan).value();
  Header h;
  h.version = kPlanFormatVersion;
  h.target = static_cast<uint32_t>(plan.target);
  h.metadata = {kSectionMetadata, kHeaderBytes, meta.size(), Crc32c(meta)};
  const uint64_t wo = AlignUp(kHeaderBytes + meta.size(), kWeightsAlignment);
  h.weights = {kSectionWeights, wo, plan.weights.size(), Crc32c(plan.weights.bytes())};
  std::string out = EncodeHeader(h) + meta;
  out.resize(wo, '\0');
  out.append(plan.weights.bytes());
  return out;
}

// Recomputes the header CRC after a test edited header fields.
inline void FixHeaderCrc(std::string* file) {
  plan_internal::StoreU32(file, plan_internal::kOffHeaderCrc, plan_internal::HeaderCrc(*file));
}

}  // namespace kiln::plan_test
