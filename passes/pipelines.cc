// The standard pipelines, as data. Each stage says why it is there and what it must come
// after. -O2 (fusions) and -O3 (target lowering) do not exist yet and run -O1.
#include "absl/strings/str_cat.h"
#include "kiln/passes/pass_manager.h"

namespace kiln {

absl::StatusOr<Pipeline> StandardPipeline(int level) {
  if (level < 0 || level > 3)
    return absl::InvalidArgumentError(absl::StrCat("no optimization level -O", level));
  Pipeline p;
  p.name = absl::StrCat("O", level);
  if (level == 0) return p;  // import only
  p.stages = {
      {{"shape-inference"}, 1,
       "types and shapes (symbolic or specialized by --shape) for every value",
       "first: every other pass reads types and shapes"},
      {{"constant-folding", "shape-inference", "reshape-simplification",
        "transpose-elimination", "cse", "dce"},
       8,
       "folding exposes constant shapes, shapes expose more folding and simplification",
       "after shape-inference; repeated until nothing changes (at most 8 rounds)"},
  };
  return p;
}

}  // namespace kiln
