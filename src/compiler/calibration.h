// Input sets for running a model before it is compiled or after: the numeric-safety pass's
// range calibration and the accuracy gate (kiln/verify.h) both need valid inputs. A model's
// graph says what valid means for its integer inputs: an input that indexes constant tables
// (a Gather's indices, through casts and reshapes) draws ids below the smallest table's rows
// (token ids within the vocabulary, type ids 0/1); a mask (its name says "mask") is a
// prefix of ones of random length per row, the first row full, so padding is real;
// position ids count 0, 1, ... along the last axis; other integers are 0; floats are
// uniform in [-1, 1].
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "compiler/generation.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "kiln/kiln.h"
#include "kiln/plan/plan.h"

namespace kiln::compiler {

// For each integer graph input that indexes constant tables, the rows of the smallest.
struct InputRanges {
  std::map<std::string, int64_t> table_rows;
};
InputRanges AnalyzeInputs(const Graph& g);

// One valid input set for `sigs` at `dims` (the header says what the values are), seeded.
// Unimplemented for a dtype it cannot synthesize (strings).
absl::StatusOr<std::map<std::string, Tensor>> SyntheticInputs(
    const std::vector<PlanTensorSig>& sigs, const std::vector<std::vector<int64_t>>& dims,
    const InputRanges& ranges, uint64_t seed);

// One input set against `sigs`: every input present with its dtype, rank and fixed extents,
// each symbol one extent across the set, no other array, no NaN or inf in a float input.
// Errors start with `where` (the file).
absl::Status CheckInputSet(const std::vector<PlanTensorSig>& sigs,
                           const std::map<std::string, Tensor>& set, const std::string& where);

// Input sets from a folder: every *.npz (np.savez; arrays named by graph input) and every
// sub-folder of INPUT.npy files is one set, sorted by name, each checked by CheckInputSet.
absl::StatusOr<std::vector<std::map<std::string, Tensor>>> ReadInputSets(
    const std::vector<PlanTensorSig>& sigs, const std::string& dir);

// The input sets a compile calibrates with: options.calib_dir's, else two seeded random
// valid sets with every symbol at its smallest value (a fixed value, else the smallest of
// its profile, else 1), profile symbols then halved until no input holds more than 256
// elements of symbolic extent — small, since the reference executor runs them. For a
// generation compile (`kv`, the decoder's cache signature) the symbols kiln binds itself
// are those of a prefill bucket: an empty past, the mask as long as the prompt.
absl::StatusOr<std::vector<absl::flat_hash_map<std::string, Tensor>>> CalibrationSets(
    const Graph& g, const CompileOptions& options, const KvSignature* kv = nullptr);

}  // namespace kiln::compiler
