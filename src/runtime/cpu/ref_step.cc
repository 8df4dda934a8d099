// The CPU "ref" step: at Create, parse the step's one-node IR text once, check that it has
// exactly one compute node with a reference kernel whose operands and results match the
// step's buffers (dtype and dims), and keep the parsed graph; Run evaluates the node with
// kiln::EvaluateNode on tensors that view the input buffers in place (weights, arena
// slots, caller inputs: nothing is copied, so a Gather from a mapped embedding table costs
// the rows it reads) and copies the results into their buffers. Reference kernels never
// write their operands — RunReference already hands them Tensors that share storage with
// constants and other values, and the ones that update (ScatterND, ...) work on a Clone —
// so a view of a read-only weight mapping is safe.
// Limits: the graph's Inputs are the step's non-omitted inputs, in order; no Constants.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/text.h"
#include "kiln/reference/executor.h"
#include "runtime/cpu/cpu_steps.h"

namespace kiln::runtime {
namespace {

// The parsed one-node graph and the mapping of its I/O onto the step's operands.
class RefStep final : public CpuStep {
 public:
  absl::Status Run(const cpu::CpuContext& ctx, const StepIo& io) const override;

  std::unique_ptr<Graph> graph;
  const Node* node = nullptr;
  // Per step output: which node output fills it.
  std::vector<int> output_result;
  // Dtype and dims of each present step input / each output buffer.
  std::vector<DType> in_dtype, out_dtype;
  std::vector<std::vector<int64_t>> in_dims, out_dims;
};

// A Storage over `data` that the step does not own (the buffer outlives the run).
std::shared_ptr<Storage> Borrow(const void* data, DType dtype, const std::vector<int64_t>& dims) {
  size_t bytes = DTypeSize(dtype);
  for (int64_t d : dims) bytes *= static_cast<size_t>(d);
  if (bytes == 0 || data == nullptr) return Storage::Allocate(0);
  // Aliasing constructor: a non-null owner pointer with no control block, so nothing is
  // freed when the view goes.
  void* p = const_cast<void*>(data);
  return Storage::View(static_cast<std::byte*>(p), bytes,
                       std::shared_ptr<void>(std::shared_ptr<void>(), p));
}

absl::Status RefStep::Run(const cpu::CpuContext&, const StepIo& io) const {
  std::vector<Tensor> held;
  held.reserve(io.ops->in.size());
  std::vector<const Tensor*> args(io.ops->in.size(), nullptr);
  size_t k = 0;
  for (size_t i = 0; i < io.ops->in.size(); ++i) {
    if (io.ops->in[i].slot == kNullSlot) continue;
    held.emplace_back(in_dtype[k], in_dims[k], Borrow(io.In(i), in_dtype[k], in_dims[k]));
    ++k;
    args[i] = &held.back();
  }
  auto results = EvaluateNode(*node, args);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < io.ops->out.size(); ++i) {
    const int idx = output_result[i];
    if (idx >= static_cast<int>(results->size()))
      return absl::InternalError(absl::StrCat(node->Describe(), " returned ", results->size(),
                                              " results; output ", i, " needs result ", idx));
    const Tensor& t = (*results)[idx];
    if (t.dtype() != out_dtype[i] || t.dims() != out_dims[i])
      return absl::InvalidArgumentError(absl::StrCat(
          node->Describe(), " result ", idx, " is ", std::string(DTypeName(t.dtype())), "[",
          absl::StrJoin(t.dims(), ","), "] but its buffer is ",
          std::string(DTypeName(out_dtype[i])), "[", absl::StrJoin(out_dims[i], ","), "]"));
    // memmove: a result that shares its operand's storage (Identity, Reshape) may be read
    // from the very buffer it goes to when the planner placed them in place.
    if (t.NumBytes() > 0 && t.raw() != io.Out(i)) std::memmove(io.Out(i), t.raw(), t.NumBytes());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuStep>> PrepareRef(const StepChecker& c, CpuPrepareEnv&) {
  const PlanStep& step = c.step();
  const PlanBucket& bucket = c.bucket();
  auto parsed = ParseGraph(c.String("node"));
  if (!parsed.ok()) return c.Err("node text: %s", parsed.status().message());
  auto ref = std::make_unique<RefStep>();
  ref->graph = *std::move(parsed);
  const Graph& g = *ref->graph;
  const Node* node = nullptr;
  for (const auto& n : g.nodes()) {
    if (n->is_input()) continue;
    if (node != nullptr)
      return c.Err("node text has more than one compute node (%s and %s)", node->Describe(),
                   n->Describe());
    node = n.get();
  }
  if (node == nullptr) return c.Err("node text has no compute node");
  if (!HasReferenceKernel(node->domain(), node->op()))
    return c.Err("%s has no reference kernel", node->Describe());
  ref->node = node;
  // Operand i <-> step input i; the graph's Inputs are the non-omitted step inputs in order.
  if (node->num_inputs() != static_cast<int>(step.inputs.size()))
    return c.Err("%s has %d operands but the step has %d inputs", node->Describe(),
                 node->num_inputs(), step.inputs.size());
  int next_input = 0;
  for (int i = 0; i < node->num_inputs(); ++i) {
    const Value v = node->input(i);
    if (step.inputs[i] == -1) {
      if (v) return c.Err("operand %d is given but step input %d is omitted", i, i);
      continue;
    }
    if (!v)
      return c.Err("operand %d is omitted but step input %d is buffer %d", i, i, step.inputs[i]);
    if (next_input >= static_cast<int>(g.inputs().size()) || v.node != g.inputs()[next_input])
      return c.Err("operand %d is not graph input %d of the node text", i, next_input);
    ++next_input;
    const PlanBuffer& b = bucket.buffers[step.inputs[i]];
    const Type& t = v.node->output_info(0).type;
    const auto dims = t.StaticDims();
    if (t.dtype != b.dtype || !dims || *dims != b.dims)
      return c.Err("operand %d is %s but its buffer %d is %s%s", i, t.ToString(), step.inputs[i],
                   std::string(DTypeName(b.dtype)), DimsStr(b.dims));
  }
  if (next_input != static_cast<int>(g.inputs().size()))
    return c.Err("node text has %d inputs but the node uses %d", g.inputs().size(), next_input);
  if (g.outputs().size() != step.outputs.size())
    return c.Err("node text returns %d values but the step has %d outputs", g.outputs().size(),
                 step.outputs.size());
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value v = g.outputs()[i].value;
    if (v.node != node) return c.Err("return value %d is not an output of the node", i);
    const PlanBuffer& b = bucket.buffers[step.outputs[i]];
    const Type& t = node->output_info(v.index).type;
    if (t.dtype != DType::kUndefined && t.dtype != b.dtype)
      return c.Err("result %d is %s but its buffer %d is %s", i, t.ToString(), step.outputs[i],
                   std::string(DTypeName(b.dtype)));
    if (auto dims = t.StaticDims(); dims && *dims != b.dims)
      return c.Err("result %d is %s but its buffer %d is %s", i, t.ToString(), step.outputs[i],
                   DimsStr(b.dims));
    ref->output_result.push_back(v.index);
  }
  for (int32_t idx : step.inputs) {
    if (idx == -1) continue;
    ref->in_dtype.push_back(bucket.buffers[idx].dtype);
    ref->in_dims.push_back(bucket.buffers[idx].dims);
  }
  for (int32_t idx : step.outputs) {
    ref->out_dtype.push_back(bucket.buffers[idx].dtype);
    ref->out_dims.push_back(bucket.buffers[idx].dims);
  }
  return std::unique_ptr<CpuStep>(std::move(ref));
}

}  // namespace kiln::runtime
