// compiler::WeightTable: constants deduplicated by content, and never by the address of a
// storage the table does not keep alive. A duplicate's storage is not kept: once freed, a
// later constant can get the same address (the allocator reuses it) and must still be
// stored with its own bytes — the bug behind a generation plan that ~2 % of compiles built
// with a decode bucket reading another constant's bytes.
#include <cstring>
#include <memory>
#include <vector>

#include "compiler/lower.h"
#include "gtest/gtest.h"

namespace kiln::compiler {
namespace {

Tensor Filled(float v) { return Tensor::FromF32({64}, std::vector<float>(64, v)); }

TEST(WeightTable, DeduplicatesByContentNotByAFreedAddress) {
  WeightTable table;
  const Tensor a = Filled(1.0f);
  const int64_t off_a = table.Add(a);
  const void* freed = nullptr;
  {
    const Tensor b = Filled(1.0f);  // same bytes, its own storage: deduplicated onto a
    EXPECT_EQ(table.Add(b), off_a);
    freed = b.storage().get();
  }
  // Allocate until one storage lands where b's was (glibc reuses it at once; the loop
  // only makes the test independent of that), then add a constant with other bytes there.
  std::vector<Tensor> keep;
  bool reused = false;
  for (int i = 0; i < 64 && !reused; ++i) {
    keep.push_back(Filled(2.0f + i));
    reused = keep.back().storage().get() == freed;
  }
  const Tensor& c = keep.back();
  const int64_t off_c = table.Add(c);
  EXPECT_NE(off_c, off_a);
  const PlanWeights w = table.Build();
  EXPECT_EQ(std::memcmp(w.data() + off_c, c.raw(), c.NumBytes()), 0);
  EXPECT_EQ(std::memcmp(w.data() + off_a, a.raw(), a.NumBytes()), 0);
  if (!reused) GTEST_LOG_(INFO) << "the allocator did not reuse the freed storage's address";
}

}  // namespace
}  // namespace kiln::compiler
