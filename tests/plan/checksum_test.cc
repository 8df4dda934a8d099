// Known-answer tests for the plan file's checksums: CRC32C (RFC 3720 / iSCSI vectors)
// and SHA-256 (FIPS 180-4 examples), plus agreement of the two CRC32C implementations.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "kiln/plan/plan.h"
#include "plan/crc32c.h"
#include "plan/sha256.h"

namespace kiln {
namespace {

using plan_internal::Crc32c;
using plan_internal::Crc32cExtend;
using plan_internal::Crc32cExtendHardware;
using plan_internal::Crc32cExtendPortable;

std::string Hex(const std::array<uint8_t, 32>& h) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : h) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

TEST(Crc32c, CheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32cExtendPortable(0, "123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32c, Rfc3720Vectors) {
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string inc(32, '\0'), dec(32, '\0');
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<char>(i);
    dec[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(dec), 0x113FDB5Cu);
}

TEST(Crc32c, ExtendEqualsWholeAndImplementationsAgree) {
  std::mt19937 rng(7);
  std::string data(5000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const uint32_t whole = Crc32cExtendPortable(0, data);
  for (size_t split : {0, 1, 7, 8, 9, 4095, 5000}) {
    const uint32_t part = Crc32cExtend(Crc32cExtend(0, std::string_view(data).substr(0, split)),
                                       std::string_view(data).substr(split));
    EXPECT_EQ(part, whole) << "split at " << split;
  }
  uint32_t hw = 0;
  if (Crc32cExtendHardware(0, data, &hw)) {
    EXPECT_EQ(hw, whole);
    for (size_t n = 0; n < 40; ++n) {  // all tail lengths of the 8-byte loop
      uint32_t h2 = 0;
      ASSERT_TRUE(Crc32cExtendHardware(0, std::string_view(data).substr(0, n), &h2));
      EXPECT_EQ(h2, Crc32cExtendPortable(0, std::string_view(data).substr(0, n))) << n;
    }
  } else {
    GTEST_LOG_(INFO) << "no SSE4.2 on this CPU; only the portable CRC32C was checked";
  }
}

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(Hex(Sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hex(Sha256("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjkl"
                       "mnopqklmnopqrlmnopqrsmnopqrstnopqrstu")),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Hex(Sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // 55, 56 and 64 bytes straddle the one-vs-two final block boundary.
  EXPECT_EQ(Hex(Sha256(std::string(55, 'a'))),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(Hex(Sha256(std::string(56, 'a'))),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(Hex(Sha256(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

// kiln::Sha256 takes the SHA-NI path where the CPU has it (this test machine does: it
// prints which path ran); it must agree with the portable path on every length around the
// block and padding boundaries and on a large odd-sized buffer.
TEST(Sha256, ShaNiMatchesPortable) {
  std::printf("SHA-NI path %s\n", plan_internal::Sha256HasShaNi() ? "in use" : "not available");
  std::mt19937 gen(7);
  std::string data(3 * 1024 * 1024 + 17, '\0');
  for (char& c : data) c = static_cast<char>(gen());
  for (size_t n = 0; n <= 300; ++n) {
    const std::string_view v(data.data(), n);
    EXPECT_EQ(Hex(Sha256(v)), Hex(plan_internal::Sha256Portable(v))) << "length " << n;
  }
  EXPECT_EQ(Hex(Sha256(data)), Hex(plan_internal::Sha256Portable(data)));
}

}  // namespace
}  // namespace kiln
