#include "runtime/executor.h"

namespace rankd {

StatusOr<std::vector<Tensor>> Executor::Run(const Plan& plan, std::span<const Tensor> inputs) {
  std::vector<Tensor> outputs = OutputsFor(plan);
  RANKD_RETURN_IF_ERROR(RunInto(plan, inputs, outputs));
  return outputs;
}

std::vector<Tensor> Executor::OutputsFor(const Plan& plan, int64_t plan_rows, int64_t rows) {
  std::vector<Tensor> outputs;
  outputs.reserve(plan.graph().outputs.size());
  for (int id : plan.graph().outputs) {
    const PlanValue& v = plan.values()[static_cast<size_t>(id)];
    Shape shape = v.shape;
    if (plan_rows >= 0 && !shape.empty() && shape[0] == plan_rows) shape[0] = rows;
    outputs.push_back(Tensor::Empty(v.dtype, std::move(shape)));  // written in full
  }
  return outputs;
}

Status Executor::CheckOutputs(const Plan& plan, std::span<const Tensor> outputs) {
  const std::vector<int>& ids = plan.graph().outputs;
  if (outputs.size() != ids.size()) {
    return InvalidArgument("the plan has " + std::to_string(ids.size()) + " outputs; " +
                           std::to_string(outputs.size()) + " were provided");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const PlanValue& v = plan.values()[static_cast<size_t>(ids[i])];
    const Tensor& out = outputs[i];
    auto what = [i] { return "output " + std::to_string(i); };  // made only for an error
    if (!out.location().host_accessible()) {
      return InvalidArgument(what() + " lies in " + LocationToString(out.location()) +
                             ": outputs are written on the host");
    }
    bool fits = out.dtype() == v.dtype && out.rank() == static_cast<int64_t>(v.shape.size());
    for (size_t d = 0; fits && d < v.shape.size(); ++d) {
      fits = d == 0 ? out.dim(0) >= 0 && out.dim(0) <= v.shape[0] : out.shape()[d] == v.shape[d];
    }
    if (!fits) {
      return InvalidArgument(what() + " is " + std::string(DTypeName(out.dtype())) + " " + ShapeToString(out.shape()) +
                             "; the plan writes " + std::string(DTypeName(v.dtype)) + " " + ShapeToString(v.shape) +
                             " (fewer rows allowed)");
    }
    if (out.bytes() > 0 && out.raw() == nullptr) return InvalidArgument(what() + " has no memory");
  }
  return Status::Ok();
}

}  // namespace rankd
