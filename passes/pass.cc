// The non-virtual wrapper around every pass: counters reset, RunImpl, optional verify.
#include "kiln/passes/pass.h"

#include "absl/strings/str_cat.h"
#include "kiln/ir/verifier.h"
#include "kiln/support/status.h"

namespace kiln {

absl::StatusOr<bool> Pass::Run(Graph& g, const PassContext& ctx) {
  counters_.clear();
  KILN_ASSIGN_OR_RETURN(bool changed, RunImpl(g, ctx));
  if (ctx.verify_each) {
    if (absl::Status s = VerifyGraph(g); !s.ok())
      return absl::InternalError(
          absl::StrCat("verifier failed after pass ", std::string(name()), ": ", s.message()));
  }
  return changed;
}

}  // namespace kiln
