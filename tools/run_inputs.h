// Input binding and output reporting shared by `kiln run` (ONNX models and plans) and
// `kiln bench`: the --input/--shape/--random-inputs family of flags, seeded random inputs,
// the per-output summary line and --output-dir. Plans and graphs both describe their
// inputs as (name, Type), so one binder serves both.
// Limits: random data covers float, bool and integer dtypes only (strings: Unimplemented).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "tools/cli.h"

namespace kiln::cli {

struct InputOptions {
  std::map<std::string, std::string> input_files;  // --input NAME=FILE.npy
  std::vector<std::string> shape_specs;            // raw --shape values, parsed per model
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::map<std::string, int64_t> symbols;
  // Fallback sizes for symbols bound neither by --shape nor by an --input file's dims.
  std::map<std::string, int64_t> default_symbols;
  std::map<std::string, std::pair<int64_t, int64_t>> int_ranges;
  bool random_inputs = false;
  uint64_t seed = 0;
  int64_t vocab = 100;
};

// Consumes one of --input, --shape, --random-inputs, --seed, --vocab, --int-range at the
// cursor. Returns false when the argument is none of them; a malformed value sets *error.
bool ParseInputFlag(Args& args, InputOptions* o, absl::Status* error);

// A graph or plan input: its name and declared type (dims may be symbols).
struct InputDecl {
  std::string name;
  Type type;
};

// Parses o->shape_specs against the inputs' names (NAME=D0xD1... for an input, SYMBOL=N
// otherwise), then binds every input: from --input files (dtype checked, symbols bound from
// their dims) or, with --random-inputs, seeded random data. Tensors in `decls` order.
absl::StatusOr<std::vector<Tensor>> BindInputs(const std::vector<InputDecl>& decls,
                                               InputOptions* o);

// "name  dtype [dims]  min .. max .. mean .." on stdout.
void PrintOutputSummary(const std::string& name, const Tensor& t);
// Writes each output as DIR/<name>.npy (creating DIR; '/', '\\', ':' become '_').
absl::Status WriteOutputs(const std::string& dir, const std::vector<std::string>& names,
                          const std::vector<Tensor>& outputs);

// True when the file starts with the plan magic "KILNPLAN" or its name ends in ".kiln"
// (so a damaged plan is reported by the plan loader, not as a bad ONNX model).
bool LooksLikePlan(const std::string& path);

}  // namespace kiln::cli
