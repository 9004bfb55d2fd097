// Every CPU kernel against ONNX's own conformance cases (Debian's libonnx-testdata): for each node
// test whose op rankd supports, load the model, run it, and compare with the reference outputs the
// ONNX authors computed independently.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "backend/backend.h"
#include "compile/passes.h"
#include "compile/plan.h"
#include "model/onnx_import.h"
#include "model/ops/op_schema.h"
#include "test_util.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;

std::string ConformanceDir() {
  const char* env = std::getenv("RANKD_ONNX_TESTDATA");
  return env ? env : "/usr/share/libonnx-testdata/data/node";
}

// Reads DIR/PREFIX0.pb, PREFIX1.pb, ... until one is missing.
Status ReadTensors(const fs::path& dir, const std::string& prefix, std::vector<Tensor>& out) {
  for (size_t i = 0; fs::exists(dir / (prefix + std::to_string(i) + ".pb")); ++i) {
    RANKD_ASSIGN_OR_RETURN(Tensor t, ReadTensorProtoFile((dir / (prefix + std::to_string(i) + ".pb")).string()));
    out.push_back(std::move(t));
  }
  return Status::Ok();
}

struct CaseResult {
  bool ran = false;
  std::string op;
  std::string error;
};

CaseResult RunCase(const fs::path& dir, const Backend& backend) {
  CaseResult r;
  OnnxImportOptions options;
  options.min_opset = 1;  // conformance models carry many opsets (Debian's data: up to 17); rankd reads 13-21
  options.max_opset = 17;
  auto graph = ImportOnnxFile((dir / "model.onnx").string(), options);
  if (!graph.ok()) {
    r.error = graph.status().ToString();
    return r;
  }
  if (graph->nodes.size() != 1) {
    r.error = "not a single-node case";
    return r;
  }
  r.op = graph->nodes[0].op;
  if (r.op != "Split") {  // lowered to Slices below, once its sizes are constants
    Status check = backend.CheckGraph(*graph);
    if (!check.ok()) {
      r.error = check.ToString();
      return r;
    }
  }
  for (const auto& set : fs::directory_iterator(dir)) {
    if (!set.is_directory()) continue;
    std::vector<Tensor> inputs, expected;
    Status read = ReadTensors(set.path(), "input_", inputs);
    if (read.ok()) read = ReadTensors(set.path(), "output_", expected);
    if (!read.ok()) {
      r.error = read.ToString();
      return r;
    }
    if (inputs.size() != graph->inputs.size()) {
      r.error = "optional graph inputs not supported by the harness";
      return r;
    }
    // Integer operands after the first (shapes, axes, indices) become constants, as they are in
    // exported models; the kernels still run (at plan time, through the same CPU kernels).
    Graph g = *graph;
    std::vector<Tensor> data_inputs;
    std::vector<int> kept_inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      bool shape_op = r.op == "ConstantOfShape" || r.op == "Range";
      if ((i > 0 && inputs[i].dtype() == DType::kI64) || shape_op) {
        g.constants[g.inputs[i]] = inputs[i];
      } else {
        kept_inputs.push_back(g.inputs[i]);
        data_inputs.push_back(inputs[i]);
      }
    }
    g.inputs = kept_inputs;
    inputs = data_inputs;
    for (auto lower : {LowerSplits, LowerGelus}) {  // as a model load does
      if (auto lowered = lower(g); !lowered.ok()) {
        r.error = lowered.status().ToString();
        return r;
      }
    }
    auto outputs = testing::RunGraph(g, inputs, {}, backend);
    if (!outputs.ok()) {
      r.error = outputs.status().ToString();
      return r;
    }
    r.ran = true;
    for (size_t i = 0; i < expected.size() && i < outputs->size(); ++i) {
      const Tensor& got = (*outputs)[i];
      EXPECT_EQ(got.dtype(), expected[i].dtype()) << dir.filename();
      EXPECT_EQ(ShapeToString(got.shape()), ShapeToString(expected[i].shape())) << dir.filename();
      double err = testing::RelativeError(got, expected[i]);
      EXPECT_LE(err, 1e-5) << dir.filename() << " output " << i;
    }
  }
  return r;
}

void RunConformance(const Backend& backend) {
  fs::path root = ConformanceDir();
  const std::vector<std::string> ops = KnownOps();
  std::set<std::string> known(ops.begin(), ops.end());
  std::map<std::string, int> passed;
  std::map<std::string, std::vector<std::string>> rejected;
  int ran = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::exists(entry.path() / "model.onnx")) continue;
    CaseResult r = RunCase(entry.path(), backend);
    if (r.ran) {
      ++ran;
      ++passed[r.op];
    } else if (known.count(r.op) || r.op == "Split") {
      rejected[r.op].push_back(entry.path().filename().string() + ": " + r.error);
    }
  }
  // Every ONNX op rankd claims has conformance cases that ran.
  for (const std::string& op : KnownOps()) {
    // Not ONNX ops, or (Einsum) ONNX's cases are all FP64: plan_test.cc checks Einsum instead.
    if (op == "EmbeddingBag" || op == "ConcatEmbeddingBags" || op == "RaggedToPadded" || op == "KeyedRows" ||
        op == "MulAdd" || op == "FusedElementwise" || op == "TargetAttention" || op == "SoftmaxAttention" ||
        op == "DotInteraction" || op == "HashStrings" || op == "Identity" || op == "Einsum")
      continue;
    EXPECT_GT(passed[op], 0) << op << " has no conformance case that ran";
  }
  EXPECT_GE(passed["Split"], 6) << "Split (lowered to Slices) has too few conformance cases that ran";
  for (const auto& [op, cases] : rejected) {
    for (const std::string& c : cases) std::printf("  rejected (%s) %s\n", op.c_str(), c.c_str());
  }
  std::printf("%s conformance cases run: %d over %zu ops\n", backend.name(), ran, passed.size());
  EXPECT_GT(ran, 250);
}

TEST(OnnxConformance, EverySupportedOpMatchesTheOnnxReference) {
  if (!fs::exists(ConformanceDir())) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/setup.sh installs it)";
  RunConformance(CpuBackend());
}

onnx::AttributeProto IntAttribute(const std::string& name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}

// Makes graph input `name` (the last one) of `m` an INT64 constant vector instead, as exporters
// write axes and split sizes.
void MakeLastInputConstant(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& values) {
  m.mutable_graph()->mutable_input()->RemoveLast();
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

// Opsets past Debian's test data (18 to 21): the reduces that take their axes as an input from
// 18 on, against values worked out by hand.
StatusOr<std::vector<Tensor>> RunReduce(const std::string& op, int64_t opset, const std::vector<int64_t>* axes,
                                        int64_t keepdims, int64_t noop_with_empty_axes, const Tensor& x) {
  std::vector<onnx::AttributeProto> attrs = {IntAttribute("keepdims", keepdims),
                                             IntAttribute("noop_with_empty_axes", noop_with_empty_axes)};
  std::vector<std::string> inputs = {"x"};
  if (axes) inputs.push_back("axes");
  onnx::ModelProto m;
  if (!m.ParseFromString(testing::OneNodeModel(op, inputs, {"y"}, opset, attrs))) return Internal("bad test model");
  if (axes) MakeLastInputConstant(m, "axes", *axes);
  std::string bytes = m.SerializeAsString();
  RANKD_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(bytes.data(), bytes.size(), {}));
  return testing::RunGraph(graph, {x});
}

TEST(OnnxOpsets, ReducesTakeTheirAxesAsAnInputFromOpset18) {
  const Tensor x = testing::MakeF32({2, 3}, {1, 5, 3, -4, 2, 8});
  const std::vector<int64_t> rows = {1}, columns = {0};
  for (int64_t opset : {18, 19, 20, 21}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    auto mean = RunReduce("ReduceMean", opset, &rows, 0, 0, x);
    ASSERT_TRUE(mean.ok()) << mean.status().ToString();
    testing::ExpectOutputsNear(*mean, {testing::MakeF32({2}, {3, 2})}, 0, "ReduceMean over axis 1");
    auto max = RunReduce("ReduceMax", opset, &columns, 1, 0, x);
    ASSERT_TRUE(max.ok()) << max.status().ToString();
    testing::ExpectOutputsNear(*max, {testing::MakeF32({1, 3}, {1, 5, 8})}, 0, "ReduceMax over axis 0");
    auto all = RunReduce("ReduceMin", opset, nullptr, 0, 0, x);  // no axes: every axis
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    testing::ExpectOutputsNear(*all, {testing::MakeF32({}, {-4})}, 0, "ReduceMin over every axis");
    auto none = RunReduce("ReduceMin", opset, nullptr, 0, 1, x);  // no axes, noop_with_empty_axes: x
    ASSERT_TRUE(none.ok()) << none.status().ToString();
    testing::ExpectOutputsNear(*none, {x}, 0, "ReduceMin without axes, as a no-op");
  }
}

// Split, lowered to Slices at load: equal parts (rounded up from opset 18, as torch.chunk exports),
// constant sizes, and what cannot be lowered.
StatusOr<std::vector<Tensor>> RunSplit(int64_t opset, int outputs, const std::vector<int64_t>* sizes,
                                       int64_t num_outputs, const Tensor& x) {
  std::vector<onnx::AttributeProto> attrs = {IntAttribute("axis", -1)};
  if (num_outputs > 0) attrs.push_back(IntAttribute("num_outputs", num_outputs));
  std::vector<std::string> names;
  for (int i = 0; i < outputs; ++i) names.push_back("y" + std::to_string(i));
  onnx::ModelProto m;
  std::vector<std::string> inputs = {"x"};
  if (sizes) inputs.push_back("split");
  if (!m.ParseFromString(testing::OneNodeModel("Split", inputs, names, opset, attrs)))
    return Internal("bad test model");
  if (sizes) MakeLastInputConstant(m, "split", *sizes);
  std::string bytes = m.SerializeAsString();
  RANKD_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(bytes.data(), bytes.size(), {}));
  RANKD_ASSIGN_OR_RETURN(int lowered, LowerSplits(graph));
  if (lowered != 1 || testing::CountOps(graph, "Slice") != outputs) return Internal("not lowered to Slices");
  return testing::RunGraph(graph, {x});
}

TEST(OnnxOpsets, SplitIsLoweredToSlices) {
  const Tensor x = testing::MakeF32({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto chunks = RunSplit(18, 3, nullptr, 3, x);  // ceil(5 / 3) = 2: parts of 2, 2 and 1
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  testing::ExpectOutputsNear(*chunks,
                             {testing::MakeF32({2, 2}, {0, 1, 5, 6}), testing::MakeF32({2, 2}, {2, 3, 7, 8}),
                              testing::MakeF32({2, 1}, {4, 9})},
                             0, "opset 18, 3 outputs");
  const Tensor even = testing::MakeF32({1, 6}, {0, 1, 2, 3, 4, 5});
  auto halves = RunSplit(13, 2, nullptr, 0, even);  // 6 / 2
  ASSERT_TRUE(halves.ok()) << halves.status().ToString();
  testing::ExpectOutputsNear(*halves, {testing::MakeF32({1, 3}, {0, 1, 2}), testing::MakeF32({1, 3}, {3, 4, 5})}, 0,
                             "opset 13, 2 outputs");
  const std::vector<int64_t> sizes = {1, 0, 4};
  auto parts = RunSplit(13, 3, &sizes, 0, x);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  testing::ExpectOutputsNear(*parts,
                             {testing::MakeF32({2, 1}, {0, 5}), testing::MakeF32({2, 0}, {}),
                              testing::MakeF32({2, 4}, {1, 2, 3, 4, 6, 7, 8, 9})},
                             0, "sizes 1, 0, 4");
  // num_outputs that is not the node's output count, and sizes that do not match it, are refused.
  EXPECT_EQ(RunSplit(18, 2, nullptr, 3, x).status().code(), StatusCode::kInvalidArgument);
  const std::vector<int64_t> two = {2, 3};
  EXPECT_EQ(RunSplit(13, 3, &two, 0, x).status().code(), StatusCode::kUnimplemented);
}

// Gelu (opset 20) becomes element-wise ops: both forms against values worked out with Python's
// math.erf and math.tanh, on the CPU and, where there is one, the GPU.
TEST(OnnxOpsets, GeluIsLoweredToElementwiseOps) {
  const Tensor x = testing::MakeF32({2, 3}, {0, 1, -1, 2, -3, 0.5f});
  const std::vector<std::pair<std::string, Tensor>> forms = {
      {"none", testing::MakeF32({2, 3}, {0, 0.84134475f, -0.15865525f, 1.9544997f, -0.0040496941f, 0.34573123f})},
      {"tanh", testing::MakeF32({2, 3}, {0, 0.84119199f, -0.15880801f, 1.9545977f, -0.0036373921f, 0.34571401f})},
      {"", testing::MakeF32({2, 3}, {0, 0.84134475f, -0.15865525f, 1.9544997f, -0.0040496941f, 0.34573123f})}};
  for (const auto& [form, want] : forms) {
    std::vector<onnx::AttributeProto> attrs;
    if (!form.empty()) {
      attrs.emplace_back();
      attrs.back().set_name("approximate");
      attrs.back().set_type(onnx::AttributeProto::STRING);
      attrs.back().set_s(form);
    }
    const std::string bytes = testing::OneNodeModel("Gelu", {"x"}, {"y"}, 20, attrs);
    auto graph = ImportOnnxBytes(bytes.data(), bytes.size(), {});
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    auto lowered = LowerGelus(*graph);
    ASSERT_TRUE(lowered.ok()) << lowered.status().ToString();
    EXPECT_EQ(*lowered, 1);
    EXPECT_EQ(testing::CountOps(*graph, "Gelu"), 0);
    EXPECT_EQ(testing::CountOps(*graph, form == "tanh" ? "Tanh" : "Erf"), 1);
    std::vector<const Backend*> backends = {&CpuBackend()};
    if (const Backend* cuda = testing::CudaOrNull()) backends.push_back(cuda);
    for (const Backend* backend : backends) {
      auto y = testing::RunGraph(*graph, {x}, {}, *backend);
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      testing::ExpectOutputsNear(*y, {want}, 1e-6, "approximate=\"" + form + "\" on " + backend->name());
    }
  }
  std::vector<onnx::AttributeProto> bad(1);
  bad[0].set_name("approximate");
  bad[0].set_type(onnx::AttributeProto::STRING);
  bad[0].set_s("sigmoid");
  const std::string bytes = testing::OneNodeModel("Gelu", {"x"}, {"y"}, 20, bad);
  auto graph = ImportOnnxBytes(bytes.data(), bytes.size(), {});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  EXPECT_EQ(LowerGelus(*graph).status().code(), StatusCode::kInvalidArgument);
}

// The same cases on the GPU: every CUDA kernel against the ONNX reference.
TEST(OnnxConformance, CudaEverySupportedOpMatchesTheOnnxReference) {
  if (!fs::exists(ConformanceDir())) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/setup.sh installs it)";
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  RunConformance(*cuda);
}

}  // namespace
}  // namespace rankd
