// External tensor data: a positive case (offset/length/checksum, a subfolder, only the
// needed bytes read), large aligned ranges mapped rather than copied (the tensor views a
// private mapping of the file: copy-on-write, released with the graph) while small and
// misaligned ones are read, and one test per rejection rule: absolute path, `..`,
// symlinked file, symlinked folder component, non-regular file, unknown key, bad
// offset/length, range past the end (small and mapped sizes), missing file, and bytes
// imported without a model folder.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT

// A model whose initializer "w" (f32[n]) lives in external data described by `kv`.
onnx::ModelProto ExternalModel(const std::vector<std::pair<std::string, std::string>>& kv,
                               int64_t n = 4) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x", onnx::TensorProto::FLOAT, {std::to_string(n)});
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(n);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : kv) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  AddNode(m, "Add", {"x", "w"}, {"y"}, "add");
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {std::to_string(n)});
  return m;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// 8 junk bytes, then 1, 2, 3, 4 as f32, then 4 junk bytes.
std::string WeightsBlob() {
  std::string s(8, '\x7f');
  const float v[4] = {1, 2, 3, 4};
  s.append(reinterpret_cast<const char*>(v), sizeof(v));
  s.append(4, '\x7f');
  return s;
}

absl::StatusOr<std::unique_ptr<Graph>> ImportIn(const std::string& dir, const onnx::ModelProto& m) {
  return ImportOnnxBytes(Serialize(m), dir);
}

void ExpectError(const absl::StatusOr<std::unique_ptr<Graph>>& g, const std::string& substr) {
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_NE(g.status().message().find(substr), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find("initializer 'w'"), std::string::npos) << g.status();
}

// 64 KiB and up is mapped (external_data.cc): 32768 floats, 128 KiB.
constexpr int64_t kBig = 32768;

// `junk` 0x7f bytes, then 0, 1, ..., kBig - 1 as f32, then 16 junk bytes.
std::string BigBlob(size_t junk) {
  std::string s(junk, '\x7f');
  for (int64_t i = 0; i < kBig; ++i) {
    const float v = static_cast<float>(i);
    s.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  s.append(16, '\x7f');
  return s;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The file this process has mapped at `p` (/proc/self/maps), or "" when none is.
std::string MappedFileAt(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || addr < lo || addr >= hi) continue;
    const size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTmpDir(std::string("external_") +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_ + "/weights");
    WriteFile(dir_ + "/weights/w.bin", WeightsBlob());
  }
  std::string dir_;
};

TEST_F(ExternalData, ReadsTheRangeBeneathTheModelFolder) {
  for (const auto& kv : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"location", "weights/w.bin"},
            {"offset", "8"},
            {"length", "16"},
            {"checksum", "0123abcd"}},
           {{"location", "./weights//w.bin"}, {"offset", "8"}}}) {
    auto g = ImportIn(dir_, ExternalModel(kv));
    ASSERT_TRUE(g.ok()) << g.status();
    const Node* w = FindConstant(**g, "w");
    ASSERT_NE(w, nullptr);
    const Tensor* t = w->constant_value();
    ASSERT_EQ(t->NumElements(), 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(t->data<float>()[i], i + 1.f);
  }
}

TEST_F(ExternalData, ImportOnnxFileResolvesAgainstTheFilesFolder) {
  WriteFile(dir_ + "/m.onnx",
            Serialize(ExternalModel({{"location", "weights/w.bin"}, {"offset", "8"}})));
  auto g = ImportOnnxFile(dir_ + "/m.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(FindConstant(**g, "w")->constant_value()->data<float>()[3], 4.f);
}

TEST_F(ExternalData, RejectedWithoutModelFolder) {
  auto g = ImportOnnxBytes(Serialize(ExternalModel({{"location", "weights/w.bin"}})), "");
  ExpectError(g, "without a model folder");
}

TEST_F(ExternalData, RejectsAbsolutePath) {
  ExpectError(ImportIn(dir_, ExternalModel({{"location", dir_ + "/weights/w.bin"}})),
              "is an absolute path");
}

TEST_F(ExternalData, RejectsDotDot) {
  ExpectError(ImportIn(dir_ + "/weights", ExternalModel({{"location", "../weights/w.bin"}})),
              "has a '..' component");
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "weights/../weights/w.bin"}})),
              "has a '..' component");
}

TEST_F(ExternalData, RejectsSymlinkedFile) {
  ASSERT_EQ(symlink((dir_ + "/weights/w.bin").c_str(), (dir_ + "/link.bin").c_str()), 0);
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "link.bin"}, {"offset", "8"}})),
              "component 'link.bin' is a symlink");
}

TEST_F(ExternalData, RejectsSymlinkedFolderComponent) {
  ASSERT_EQ(symlink((dir_ + "/weights").c_str(), (dir_ + "/wdir").c_str()), 0);
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "wdir/w.bin"}, {"offset", "8"}})),
              "component 'wdir' is a symlink");
}

TEST_F(ExternalData, RejectsNonRegularFile) {
  std::filesystem::create_directories(dir_ + "/adir");
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "adir"}})), "is not a regular file");
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "weights/w.bin/x"}})),
              "component 'w.bin' is not a directory");
}

TEST_F(ExternalData, RejectsMissingFile) {
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "weights/none.bin"}})),
              "cannot stat 'weights/none.bin'");
}

TEST_F(ExternalData, RejectsUnknownAndDuplicateKeys) {
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "weights/w.bin"}, {"basepath", "/"}})),
              "unknown key 'basepath'");
  ExpectError(
      ImportIn(dir_,
               ExternalModel({{"location", "weights/w.bin"}, {"offset", "8"}, {"offset", "8"}})),
      "duplicate key 'offset'");
  ExpectError(ImportIn(dir_, ExternalModel({{"offset", "8"}})), "no 'location' given");
}

TEST_F(ExternalData, RejectsBadOffsetAndLength) {
  auto with = [&](const std::string& key, const std::string& value) {
    return ImportIn(dir_, ExternalModel({{"location", "weights/w.bin"}, {key, value}}));
  };
  ExpectError(with("offset", "-8"), "offset is negative (-8)");
  ExpectError(with("offset", "8x"), "offset '8x' is not a decimal number");
  ExpectError(with("offset", " 8"), "is not a decimal number");
  ExpectError(with("offset", ""), "offset is empty");
  ExpectError(with("offset", "99999999999999999999"), "overflows int64");
  ExpectError(with("length", "-16"), "length is negative");
  ExpectError(with("length", "0x10"), "is not a decimal number");
  ExpectError(with("length", "12"), "length 12 does not match the tensor's 16 bytes");
  ExpectError(with("offset", "9223372036854775800"), "offset + length overflows int64");
}

TEST_F(ExternalData, RejectsRangePastTheEnd) {
  ExpectError(ImportIn(dir_, ExternalModel({{"location", "weights/w.bin"}, {"offset", "13"}})),
              "range [13, 29) is past the end of 'weights/w.bin' (28 bytes)");
}

TEST_F(ExternalData, RejectsInlineDataToo) {
  onnx::ModelProto m = ExternalModel({{"location", "weights/w.bin"}, {"offset", "8"}});
  m.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(16, '\0'));
  ExpectError(ImportIn(dir_, m), "external tensor also has inline data");
}

TEST_F(ExternalData, MapsALargeAlignedRangeInsteadOfCopyingIt) {
  const std::string file = dir_ + "/weights/big.bin";
  WriteFile(file, BigBlob(64));
  const std::string mapped_path = std::filesystem::canonical(file).string();
  const std::byte* at = nullptr;
  {
    auto g = ImportIn(dir_, ExternalModel({{"location", "weights/big.bin"},
                                           {"offset", "64"},
                                           {"length", std::to_string(kBig * 4)}},
                                          kBig));
    ASSERT_TRUE(g.ok()) << g.status();
    Tensor t = *FindConstant(**g, "w")->constant_value();
    ASSERT_EQ(t.NumElements(), kBig);
    for (int64_t i : {int64_t{0}, int64_t{1}, kBig / 2, kBig - 1})
      EXPECT_EQ(t.data<float>()[i], static_cast<float>(i));
    EXPECT_TRUE(t.storage()->is_view());
    at = t.raw();
    EXPECT_EQ(MappedFileAt(at), mapped_path) << "the tensor's bytes are not the file's mapping";
    // A write lands in a private copy of the page, never in the file.
    t.data<float>()[0] = 42.f;
    EXPECT_EQ(FindConstant(**g, "w")->constant_value()->data<float>()[0], 42.f);
    EXPECT_EQ(ReadAll(file), BigBlob(64));
  }
  // The mapping went with the last tensor that shared it.
  EXPECT_NE(MappedFileAt(at), mapped_path);
}

TEST_F(ExternalData, ReadsSmallAndMisalignedRanges) {
  WriteFile(dir_ + "/weights/big.bin", BigBlob(66));  // offset 66: not a multiple of 4
  auto big =
      ImportIn(dir_, ExternalModel({{"location", "weights/big.bin"}, {"offset", "66"}}, kBig));
  ASSERT_TRUE(big.ok()) << big.status();
  const Tensor* t = FindConstant(**big, "w")->constant_value();
  EXPECT_FALSE(t->storage()->is_view());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw()) % 64, 0u);
  EXPECT_EQ(t->data<float>()[kBig - 1], static_cast<float>(kBig - 1));
  auto small = ImportIn(dir_, ExternalModel({{"location", "weights/w.bin"}, {"offset", "8"}}));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_FALSE(FindConstant(**small, "w")->constant_value()->storage()->is_view());
}

TEST_F(ExternalData, RejectsAMappableRangePastTheEndOrOfTheWrongLength) {
  WriteFile(dir_ + "/weights/big.bin", BigBlob(64));  // 64 + 131072 + 16 bytes
  ExpectError(
      ImportIn(dir_, ExternalModel({{"location", "weights/big.bin"}, {"offset", "128"}}, kBig)),
      "range [128, 131200) is past the end of 'weights/big.bin' (131152 bytes)");
  ExpectError(
      ImportIn(dir_, ExternalModel(
                         {{"location", "weights/big.bin"}, {"offset", "64"}, {"length", "131076"}},
                         kBig)),
      "length 131076 does not match the tensor's 131072 bytes");
}

}  // namespace
}  // namespace kiln
