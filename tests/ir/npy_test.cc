// .npy reading and writing: round trips, and malformed files give errors, never a crash.
#include "kiln/support/npy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kiln {
namespace {

std::string TmpPath(const std::string& name) {
  std::filesystem::create_directories(KILN_TEST_TMPDIR);
  return std::string(KILN_TEST_TMPDIR) + "/" + name;
}

// A version-1.0 .npy file with `header` (padded by this function) and `data` bytes.
std::string WriteRaw(const std::string& name, std::string header, const std::string& data) {
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const std::string path = TmpPath(name);
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size() & 0xff),
                       static_cast<char>(header.size() >> 8)};
  f.write(len, 2);
  f << header << data;
  return path;
}

TEST(NpyTest, RoundTripsEveryShapeKind) {
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{}, std::vector<int64_t>{3}, std::vector<int64_t>{2, 3},
        std::vector<int64_t>{2, 0, 4}}) {
    Tensor t(DType::kF32, dims);
    for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = 0.5f * i - 1;
    const std::string path = TmpPath("rt.npy");
    ASSERT_TRUE(WriteNpy(path, t).ok());
    auto back = ReadNpy(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(back->BitwiseEqual(t)) << t.ShapeString();
  }
  Tensor ids = Tensor::FromI64({2}, {7, -9});
  ASSERT_TRUE(WriteNpy(TmpPath("ids.npy"), ids).ok());
  EXPECT_TRUE(ReadNpy(TmpPath("ids.npy"))->BitwiseEqual(ids));
}

TEST(NpyTest, MalformedFilesAreErrors) {
  struct Case {
    std::string name, header, data, message;
  };
  const std::string four_floats(16, '\0');
  const Case cases[] = {
      {"empty_shape", "{'descr': '<f4', 'fortran_order': False, 'shape': , }", "",
       "is not a tuple"},
      {"no_parens", "{'descr': '<f4', 'fortran_order': False, 'shape': 4, }", four_floats,
       "is not a tuple"},
      {"negative_dim", "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", four_floats,
       "bad shape"},
      {"short_data", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", four_floats,
       "does not match the shape"},
      {"fortran", "{'descr': '<f4', 'fortran_order': True, 'shape': (4,), }", four_floats,
       "Fortran order"},
      {"no_descr", "{'fortran_order': False, 'shape': (4,), }", four_floats, "lacks"},
      {"overflow", "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
       four_floats, "overflows"},
  };
  for (const Case& c : cases) {
    auto t = ReadNpy(WriteRaw(c.name + ".npy", c.header, c.data));
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(t.status().message().find(c.message), std::string::npos)
        << c.name << ": " << t.status();
  }
  EXPECT_EQ(ReadNpy(TmpPath("does_not_exist.npy")).status().code(), absl::StatusCode::kNotFound);
  auto odd = ReadNpy(WriteRaw("u4.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                              std::string(8, '\0')));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln
