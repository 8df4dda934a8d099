// The padding analysis of kiln::Compile (docs/plan-kernels.md, "Padding"): which of a
// plan's symbols an executor may pad, so that a request between two buckets runs on the
// larger one and the unpadded part of every output is exact. It asks the op catalogue how
// each op mixes positions (OpInfo::mixing, include/kiln/ir/ops.h), never op names.
// Limits: an op whose catalogue entry says kNone is trusted to keep positions apart; the
// mask is recognized by the Hugging Face convention (an integer input named "*mask*",
// 1 keep, 0 pad).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/plan/plan.h"

namespace kiln::compiler {

// The sequence case: zero padding of `sym` is invisible to the unpadded outputs when an
// integer mask input has `sym` in a non-leading dim and every op of the optimized graph
// that mixes positions honours it — each kMaskedOrCausal op takes its mask from that input
// or is causal (right padding is never seen by an earlier query), each kMaskedOrFirst op
// takes it or reads position 0 only — at least one of them does take it, no
// kNormalizesAxis op is left (its masking cannot be checked) and no kReducesAxes op
// reduces over `sym`.
bool SequencePaddable(const Graph& g, const std::string& sym);

// The symbols of `symbols` that may be padded: the sequence case (SequencePaddable) or
// the batch case (dim 0 of every input and output is the symbol), and no output dim is an
// expression over the symbol (or not an expression at all).
std::vector<std::string> PaddableSymbols(const Plan& plan, const Graph& g,
                                         const std::set<std::string>& symbols);

}  // namespace kiln::compiler
