// Deterministic mutation test: a valid model is mutated thousands of times with a seeded
// PRNG and imported. Byte-level mutations (bit flips, overwrites, truncation, insertion,
// chunk duplication) mostly test the protobuf parse; structure-aware mutations (through
// protobuf reflection: a random scalar field set to an extreme or borrowed value, a
// repeated element removed or duplicated) reach the importer's own checks. Every run must return
// (ok, or InvalidArgument / Unimplemented with a message) - never crash, abort, throw or read out
// of bounds (run under ASan to see the latter). Seeded, so a failure reproduces; runs in well under
// a second in Release.
#include <climits>
#include <random>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"

#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT

std::string SeedModel() {
  onnx::ModelProto m = MakeModel(13, "seed");
  AddInput(m, "x", onnx::TensorProto::FLOAT, {"batch", "4"});
  AddInitF32(m, "W", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  AddInitF32(m, "b", {3}, {0.5f, -1, 2}, /*raw=*/false);
  AddInitI64(m, "shape", {2}, {-1, 3});
  AddNode(m, "MatMul", {"x", "W"}, {"xw"}, "mm");
  AddNode(m, "Add", {"xw", "b"}, {"h"}, "add");
  AttrInt(AddNode(m, "Softmax", {"h"}, {"s"}, "sm"), "axis", -1);
  AttrInts(AddNode(m, "ReduceMean", {"s"}, {"r"}, "rm"), "axes", {1});
  AddNode(m, "Reshape", {"s", "shape"}, {"y"}, "reshape");
  AttrFloat(AddNode(m, "Constant", {}, {"k"}, "k"), "value_float", 2);
  AddNode(m, "Mul", {"r", "k"}, {"z"}, "scale");
  auto* vi = m.mutable_graph()->add_value_info();
  vi->set_name("h");
  SetTensorType(vi, onnx::TensorProto::FLOAT, {"batch", "3"});
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {"batch", "3"});
  AddOutput(m, "z", onnx::TensorProto::FLOAT, {"batch", "1"});
  return Serialize(m);
}

std::string Mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:  // flip one bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // overwrite a byte with an "interesting" value
        if (!s.empty()) {
          static const char kVals[] = {
              0, 1, 0x7f, static_cast<char>(0x80), static_cast<char>(0xff), 0x08, 0x12};
          s[pick(s.size())] = kVals[rng() % sizeof(kVals)];
        }
        break;
      case 2:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 3:  // insert random bytes
        s.insert(pick(s.size() + 1), std::string(1 + rng() % 8, static_cast<char>(rng())));
        break;
      case 4: {  // duplicate a chunk (repeats fields: duplicate names, nodes, dims)
        const size_t a = pick(s.size()), len = pick(std::min<size_t>(64, s.size() - a) + 1);
        s.insert(pick(s.size() + 1), s.substr(a, len));
        break;
      }
      default:  // erase a chunk
        if (!s.empty()) {
          const size_t a = pick(s.size());
          s.erase(a, 1 + pick(16));
        }
        break;
    }
  }
  return s;
}

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// One mutable spot in a message tree: a field of `msg` (element `index` if repeated).
struct Spot {
  Message* msg;
  const FieldDescriptor* field;
  int index;  // -1 for singular fields
};

void CollectSpots(Message* msg, std::vector<Spot>& scalars, std::vector<Spot>& repeated) {
  const Reflection* r = msg->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*msg, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) {
      repeated.push_back({msg, f, -1});
      for (int i = 0; i < r->FieldSize(*msg, f); ++i) {
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
          CollectSpots(r->MutableRepeatedMessage(msg, f, i), scalars, repeated);
        else
          scalars.push_back({msg, f, i});
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CollectSpots(r->MutableMessage(msg, f), scalars, repeated);
    } else {
      scalars.push_back({msg, f, -1});
    }
  }
}

int64_t InterestingInt(std::mt19937_64& rng) {
  static const int64_t kVals[] = {0,         1,        -1,    2,       3,       7,
                                  8,         12,       13,    16,      18,      21,
                                  22,        255,      65536, INT_MAX, INT_MIN, int64_t{1} << 40,
                                  INT64_MAX, INT64_MIN};
  return rng() % 4 == 0 ? static_cast<int64_t>(rng() % 100) - 10
                        : kVals[rng() % (sizeof(kVals) / sizeof(kVals[0]))];
}

std::string InterestingString(std::mt19937_64& rng) {
  static const char* kVals[] = {
      "",     "x",     "W",        "b",          "y",       "z",
      "h",    "s",     "xw",       "shape",      "k",       "mm",
      "Loop", "Relu",  "Split",    "ReduceMean", "ai.onnx", "com.microsoft",
      "axes", "value", "location", "../x"};
  return kVals[rng() % (sizeof(kVals) / sizeof(kVals[0]))];
}

void MutateScalar(const Spot& s, std::mt19937_64& rng) {
  const Reflection* r = s.msg->GetReflection();
  const bool rep = s.index >= 0;
  switch (s.field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const int32_t v = static_cast<int32_t>(InterestingInt(rng));
      rep ? r->SetRepeatedInt32(s.msg, s.field, s.index, v) : r->SetInt32(s.msg, s.field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v = InterestingInt(rng);
      rep ? r->SetRepeatedInt64(s.msg, s.field, s.index, v) : r->SetInt64(s.msg, s.field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const uint64_t v = static_cast<uint64_t>(InterestingInt(rng));
      rep ? r->SetRepeatedUInt64(s.msg, s.field, s.index, v) : r->SetUInt64(s.msg, s.field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const float v = static_cast<float>(InterestingInt(rng));
      rep ? r->SetRepeatedFloat(s.msg, s.field, s.index, v) : r->SetFloat(s.msg, s.field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v = InterestingString(rng);
      if (rng() % 8 == 0) v = std::string(rng() % 13, static_cast<char>(rng()));
      rep ? r->SetRepeatedString(s.msg, s.field, s.index, v) : r->SetString(s.msg, s.field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = s.field->enum_type();
      const auto* v = e->value(static_cast<int>(rng() % e->value_count()));
      rep ? r->SetRepeatedEnum(s.msg, s.field, s.index, v) : r->SetEnum(s.msg, s.field, v);
      break;
    }
    default:  // double, uint32, bool: rare in the seed; clear instead
      if (!rep) r->ClearField(s.msg, s.field);
      break;
  }
}

void MutateRepeated(const Spot& s, std::mt19937_64& rng) {
  const Reflection* r = s.msg->GetReflection();
  const int n = r->FieldSize(*s.msg, s.field);
  if (n == 0) return;
  const int i = static_cast<int>(rng() % n);
  if (rng() % 2 == 0) {  // remove element i
    r->SwapElements(s.msg, s.field, i, n - 1);
    r->RemoveLast(s.msg, s.field);
  } else if (s.field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {  // duplicate it
    r->AddMessage(s.msg, s.field)->CopyFrom(r->GetRepeatedMessage(*s.msg, s.field, i));
  }
}

std::string MutateStructure(const onnx::ModelProto& seed, std::mt19937_64& rng) {
  onnx::ModelProto m = seed;
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    std::vector<Spot> scalars, repeated;
    CollectSpots(&m, scalars, repeated);
    if (rng() % 3 != 0 && !scalars.empty())
      MutateScalar(scalars[rng() % scalars.size()], rng);
    else if (!repeated.empty())
      MutateRepeated(repeated[rng() % repeated.size()], rng);
  }
  return Serialize(m);
}

// Imports `bytes`; returns the status code, failing the test on any other outcome than
// ok / InvalidArgument / Unimplemented with a message.
absl::StatusCode ImportOne(const std::string& bytes, int i) {
  auto g = ImportOnnxBytes(bytes, "");
  if (g.ok()) {
    EXPECT_NE(*g, nullptr);
    return absl::StatusCode::kOk;
  }
  const absl::StatusCode code = g.status().code();
  EXPECT_TRUE(code == absl::StatusCode::kInvalidArgument ||
              code == absl::StatusCode::kUnimplemented)
      << "iteration " << i << ": " << g.status();
  EXPECT_FALSE(g.status().message().empty()) << "iteration " << i;
  return code;
}

TEST(ImporterFuzz, StructureMutationsNeverCrash) {
  onnx::ModelProto seed;
  const std::string bytes = SeedModel();
  ASSERT_TRUE(seed.ParseFromString(bytes));
  std::mt19937_64 rng(77);
  std::map<absl::StatusCode, int> counts;
  constexpr int kIterations = 10000;
  for (int i = 0; i < kIterations && !HasFailure(); ++i)
    ++counts[ImportOne(MutateStructure(seed, rng), i)];
  EXPECT_GT(counts[absl::StatusCode::kOk], 0);
  EXPECT_GT(counts[absl::StatusCode::kInvalidArgument], kIterations / 10);
  EXPECT_GT(counts[absl::StatusCode::kUnimplemented], 0);
  std::printf("structure fuzz: %d ok, %d InvalidArgument, %d Unimplemented\n",
              counts[absl::StatusCode::kOk], counts[absl::StatusCode::kInvalidArgument],
              counts[absl::StatusCode::kUnimplemented]);
}

TEST(ImporterFuzz, MutatedModelsNeverCrash) {
  const std::string seed = SeedModel();
  auto base = ImportOnnxBytes(seed, "");
  ASSERT_TRUE(base.ok()) << base.status();  // the seed itself is valid

  std::mt19937_64 rng(20240611);
  int ok = 0, invalid = 0, unimplemented = 0;
  constexpr int kIterations = 20000;
  for (int i = 0; i < kIterations; ++i) {
    const std::string bytes = Mutate(seed, rng);
    auto g = ImportOnnxBytes(bytes, "");
    if (g.ok()) {
      ++ok;
      ASSERT_NE(*g, nullptr);
      continue;
    }
    const absl::StatusCode code = g.status().code();
    ASSERT_TRUE(code == absl::StatusCode::kInvalidArgument ||
                code == absl::StatusCode::kUnimplemented)
        << "iteration " << i << ": " << g.status();
    ASSERT_FALSE(g.status().message().empty()) << "iteration " << i;
    (code == absl::StatusCode::kInvalidArgument ? invalid : unimplemented)++;
  }
  // The mutations must exercise both outcomes, or the test is not testing anything.
  EXPECT_GT(ok, 0);
  EXPECT_GT(invalid, kIterations / 4);
  std::printf("fuzz: %d ok, %d InvalidArgument, %d Unimplemented\n", ok, invalid, unimplemented);
}

}  // namespace
}  // namespace kiln
