// ONNX Gelu (opset 20; torch.nn.GELU exported at opset 20 and on) as the element-wise ops it is
// made of, so that every backend runs it and the element-wise fusion makes it one kernel:
//
//   approximate = "none" (the default):  y = x · 0.5 · (1 + erf(x · 1/√2))
//   approximate = "tanh":                y = x · 0.5 · (1 + tanh(√(2/π) · (x + 0.044715 · x · x · x)))
//
// Older opsets have no Gelu: PyTorch writes the "none" form out as these same ops. The nodes of a
// "tanh" Gelu carry kLoweredGeluTanh (the Gelu's output), so that FuseGemmEpilogues can give the
// whole of it to a product's epilogue (cuBLASLt's GELU is this approximation).
#include <cmath>

#include "compile/lowering.h"
#include "compile/passes.h"

namespace rankd {
namespace {

class GeluLowering {
 public:
  explicit GeluLowering(Graph& graph) : g_(graph) {}

  StatusOr<int> Run() {
    return LowerEach(g_, "Gelu", [this](const Node& node, std::vector<Node>& out) { return Lower(node, out); });
  }

 private:
  Status Lower(const Node& gelu, std::vector<Node>& out) {
    if (!gelu.HasInput(0) || gelu.outputs.size() != 1) {
      return InvalidArgument(gelu.Describe() + ": needs one input and one output");
    }
    const int x = gelu.inputs[0];
    const Value& xv = g_.values[static_cast<size_t>(x)];
    if (xv.dtype != DType::kF32) {
      return Unimplemented(gelu.Describe() + ": Gelu of " + DTypeName(xv.dtype) + " (FLOAT only)");
    }
    const std::string approximate = gelu.GetString("approximate", "none");
    if (approximate != "none" && approximate != "tanh") {
      return InvalidArgument(gelu.Describe() + ": approximate must be \"none\" or \"tanh\", got \"" + approximate +
                             "\"");
    }
    // Names from the output's, unique in the graph (node names may be empty or repeat).
    base_ = g_.values[static_cast<size_t>(gelu.outputs[0])].name + ".gelu";
    like_ = xv;
    const size_t first = out.size();
    int inner;  // erf's or tanh's argument
    if (approximate == "none") {
      inner = Emit(out, "Mul", "scaled", {x, Scalar("inv_sqrt2", static_cast<float>(1.0 / std::sqrt(2.0)))});
      inner = Emit(out, "Erf", "erf", {inner});
    } else {
      const int cube = Emit(out, "Mul", "cube", {Emit(out, "Mul", "square", {x, x}), x});
      const int sum = Emit(out, "Add", "sum", {x, Emit(out, "Mul", "cubic", {cube, Scalar("k", 0.044715f)})});
      inner = Emit(out, "Mul", "scaled", {sum, Scalar("sqrt_2_over_pi", static_cast<float>(std::sqrt(2.0 / M_PI)))});
      inner = Emit(out, "Tanh", "tanh", {inner});
    }
    const int one_plus = Emit(out, "Add", "one_plus", {inner, Scalar("one", 1.0f)});
    const int half_x = Emit(out, "Mul", "half_x", {x, Scalar("half", 0.5f)});
    out.push_back(Node{"Mul", base_, {half_x, one_plus}, {gelu.outputs[0]}, {}});
    if (approximate == "tanh") {
      for (size_t n = first; n < out.size(); ++n) out[n].attrs[kLoweredGeluTanh] = int64_t{gelu.outputs[0]};
    }
    return Status::Ok();
  }

  int Scalar(const std::string& name, float v) {
    return g_.AddConstant(base_ + "." + name, Tensor::FromVector<float>(DType::kF32, {}, {v}));
  }

  // A node of one new output shaped like x, appended to `out`.
  int Emit(std::vector<Node>& out, const std::string& op, const std::string& name, std::vector<int> inputs) {
    Value v = like_;
    v.name = base_ + "." + name;
    int value = g_.AddValue(v);
    out.push_back(Node{op, v.name, std::move(inputs), {value}, {}});
    return value;
  }

  Graph& g_;
  std::string base_;
  Value like_;
};

}  // namespace

StatusOr<int> LowerGelus(Graph& graph) { return GeluLowering(graph).Run(); }

}  // namespace rankd
