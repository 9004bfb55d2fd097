#include "compile/evaluate.h"

#include "backend/backend.h"

namespace rankd {

Status InferNode(const OpSchema& schema, InferContext& ctx) {
  // Folding and the passes' probe plans infer shapes before Backend::CheckGraph has seen the node.
  RANKD_RETURN_IF_ERROR(CheckArity(schema, ctx.node));
  ctx.outputs.assign(ctx.node.outputs.size(), TensorMeta{});
  Status s = schema.infer(ctx);
  if (!s.ok()) return s;
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (ctx.node.outputs[i] >= 0 && !ctx.outputs[i].present()) {
      return Unimplemented(ctx.node.Describe() + ": output " + std::to_string(i) + " is not supported");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs,
                                           const std::vector<int64_t>* ragged_max_lengths, int64_t max_output_bytes) {
  const OpSchema* schema = FindOpSchema(node.op);
  const Kernel* kernel = CpuBackend().FindKernel(node.op);
  if (!schema || !kernel) return Unimplemented(node.Describe() + ": op " + node.op + " is not supported");
  InferContext ctx{node, {}, {}, 0, ragged_max_lengths};
  for (const Tensor* t : inputs) {
    ctx.inputs.push_back(t ? TensorMeta{t->dtype(), t->shape(), t} : TensorMeta{});
  }
  RANKD_RETURN_IF_ERROR(InferNode(*schema, ctx));
  for (const TensorMeta& m : ctx.outputs) {
    if (!m.present()) continue;
    int64_t n = 1;
    for (int64_t d : m.shape) {
      if (d != 0 && n > max_output_bytes / d)
        return ResourceExhausted(node.Describe() + ": output is too large to compute");
      n *= d;
    }
    if (n * static_cast<int64_t>(DTypeSize(m.dtype)) > max_output_bytes || ctx.scratch_bytes > max_output_bytes) {
      return ResourceExhausted(node.Describe() + ": output " + ShapeToString(m.shape) + " is too large to compute");
    }
  }
  std::vector<Tensor> outputs;
  std::vector<Tensor*> out_ptrs;
  outputs.reserve(ctx.outputs.size());
  for (const TensorMeta& m : ctx.outputs) {
    outputs.push_back(m.present() ? Tensor::Zeros(m.dtype, m.shape) : Tensor());
  }
  for (Tensor& t : outputs) out_ptrs.push_back(&t);
  Tensor scratch = ctx.scratch_bytes > 0 ? Tensor::Zeros(DType::kU8, {ctx.scratch_bytes}) : Tensor();
  std::shared_ptr<const KernelState> state;
  if (kernel->prepare) {
    RANKD_ASSIGN_OR_RETURN(state, kernel->prepare(node));
  }
  KernelArgs args{node, inputs, out_ptrs, ctx.scratch_bytes > 0 ? scratch.raw() : nullptr};
  args.state = state.get();
  RANKD_RETURN_IF_ERROR(kernel->run(args));
  return outputs;
}

}  // namespace rankd
