#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "frontend/kserve_json.h"
#include "onnx/onnx_pb.h"
#include "runtime/backends.h"
#include "serving/model.h"
#if RANKD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace rankd::testing {

// RANKD_SOURCE_DIR in the environment overrides the build's source tree (a copy of the tree on
// another machine, such as the GPU machine's).
std::string SourcePath(const std::string& relative) {
  const char* env = std::getenv("RANKD_SOURCE_DIR");
  return std::string(env ? env : RANKD_SOURCE_DIR) + "/" + relative;
}

double RelativeError(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.ScalarAsDouble(i), y = b.ScalarAsDouble(i);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (std::isnan(x) || (std::isinf(x) && x == y)) continue;
    num += (x - y) * (x - y);
    den += y * y;
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

Tensor MakeF32(Shape shape, std::vector<float> values) {
  return Tensor::FromVector<float>(DType::kF32, std::move(shape), values);
}
Tensor MakeI64(Shape shape, std::vector<int64_t> values) {
  return Tensor::FromVector<int64_t>(DType::kI64, std::move(shape), values);
}

std::string OneNodeModel(const std::string& op, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, int64_t opset,
                         const std::vector<onnx::AttributeProto>& attrs) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* imp = model.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  auto* g = model.mutable_graph();
  g->set_name("test");
  auto* node = g->add_node();
  node->set_op_type(op);
  node->set_name("n0");
  for (const auto& in : inputs) {
    node->add_input(in);
    auto* vi = g->add_input();
    vi->set_name(in);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  }
  for (const auto& out : outputs) {
    node->add_output(out);
    auto* vi = g->add_output();
    vi->set_name(out);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  }
  for (const auto& a : attrs) *node->add_attribute() = a;
  return model.SerializeAsString();
}

std::string WriteTempFile(const std::string& name, const std::string& bytes) {
  namespace fs = std::filesystem;
  // One fresh directory a process: a pid alone is reused, and a file an earlier process left
  // there (a model's external weights) would change what a test sees.
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() /
                 ("rankd_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    fs::remove_all(d);
    return d;
  }();
  fs::create_directories((dir / name).parent_path());
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return (dir / name).string();
}

void ExpectZooScores(const Model& model, const std::string& name, double tolerance) {
  std::ifstream requests(SourcePath("tests/data/zoo/" + name + ".requests.jsonl"));
  std::ifstream expected(SourcePath("tests/data/zoo/" + name + ".expected.jsonl"));
  std::string req_line, exp_line;
  int count = 0;
  while (std::getline(requests, req_line) && std::getline(expected, exp_line)) {
    auto request = ParseInferRequestJson(req_line);
    ASSERT_TRUE(request.ok()) << request.status().ToString();
    auto outputs = model.Infer(*request);
    ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
    nlohmann::json want = nlohmann::json::parse(exp_line);
    ASSERT_EQ(outputs->size(), want["outputs"].size());
    for (size_t i = 0; i < outputs->size(); ++i) {
      const auto& w = want["outputs"][i];
      EXPECT_EQ((*outputs)[i].name, w["name"].get<std::string>());
      Tensor ref = MakeF32(w["shape"].get<Shape>(), w["data"].get<std::vector<float>>());
      EXPECT_LE(RelativeError((*outputs)[i].data, ref), tolerance)
          << name << " request " << count << " output " << w["name"];
      // Element-wise too: no score may be off, even if the norm hides it.
      for (int64_t e = 0; e < ref.size(); ++e) {
        EXPECT_NEAR((*outputs)[i].data.data<float>()[e], ref.data<float>()[e],
                    tolerance * std::abs(ref.data<float>()[e]) + 1e-7);
      }
    }
    ++count;
  }
  EXPECT_GE(count, 10);
}

void ExpectOutputsNear(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tolerance,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    EXPECT_EQ(got[o].shape(), want[o].shape()) << what;
    EXPECT_LE(RelativeError(got[o], want[o]), tolerance) << what << " output " << o;
  }
}

std::string WriteRowMixingModel(const std::string& name) {
  onnx::AttributeProto axis;
  axis.set_name("axis");
  axis.set_type(onnx::AttributeProto::INT);
  axis.set_i(0);
  return WriteTempFile(name, OneNodeModel("Softmax", {"x"}, {"y"}, 17, {axis}));
}

}  // namespace rankd::testing

#include "compile/plan.h"

namespace rankd::testing {

int GraphBuilder::Input(const std::string& name, DType dtype, Shape shape) {
  int id = graph_.AddValue({name, dtype, std::move(shape), true});
  graph_.inputs.push_back(id);
  graph_.opset = 17;
  return id;
}

int GraphBuilder::Const(const std::string& name, Tensor t) { return graph_.AddConstant(name, std::move(t)); }

int GraphBuilder::Op(const std::string& op, std::vector<int> inputs, std::map<std::string, AttributeValue> attrs) {
  Node n;
  n.op = op;
  n.name = op + "_" + std::to_string(counter_++);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  int out = graph_.AddValue({n.name + "_out", DType::kInvalid, {}, false});
  n.outputs = {out};
  graph_.nodes.push_back(std::move(n));
  return out;
}

StatusOr<std::vector<Tensor>> RunGraph(const Graph& graph, const std::vector<Tensor>& inputs,
                                       const std::vector<int64_t>& ragged_max_lengths, const Backend& backend,
                                       Precision precision) {
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) metas.push_back({t.dtype(), t.shape(), nullptr});
  PlanOptions options;
  options.backend = &backend;
  options.ragged_max_lengths = ragged_max_lengths;
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, Plan::Build(graph, metas, options));
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<ModelResources> resources, backend.PrepareModel(graph, precision));
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, NewExecutor(backend, resources));
  return executor->Run(*plan, inputs);
}

void ExpectSameOutputs(const Graph& got, const Graph& want, const std::vector<Tensor>& inputs, double tolerance,
                       const std::string& what, const Backend& backend, Precision precision) {
  auto expected = RunGraph(want, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString() << " " << what;
  auto result = RunGraph(got, inputs, {}, backend, precision);
  ASSERT_TRUE(result.ok()) << result.status().ToString() << " " << what;
  ExpectOutputsNear(*result, *expected, tolerance, what);
}

Tensor RandomTable(DType dtype, int64_t rows, int64_t dim, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> val(-1, 1);
  Tensor t = Tensor::Zeros(dtype, {rows, dim});
  for (int64_t i = 0; i < t.size(); ++i) {
    const float v = val(rng);
    if (dtype == DType::kF16)
      t.data<uint16_t>()[i] = FloatToHalf(v);
    else if (dtype == DType::kBF16)
      t.data<uint16_t>()[i] = FloatToBF16(v);
    else
      t.data<float>()[i] = v;
  }
  return t;
}

Tensor RandomF32(Shape shape, std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t = Tensor::Zeros(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

int CountOps(const Graph& graph, const std::string& op) {
  int n = 0;
  for (const Node& node : graph.nodes) n += node.op == op;
  return n;
}

Graph CrossNetwork(int64_t rows, int64_t features, int64_t width, int64_t rank, int layers, std::mt19937_64& rng) {
  GraphBuilder b;
  int in = b.Input("in", DType::kF32, {rows, features});
  int x0 = b.Op("Gemm", {in, b.Const("w0", RandomF32({width, features}, rng, -0.2, 0.2))}, {{"transB", int64_t{1}}});
  int x = x0;
  for (int layer = 0; layer < layers; ++layer) {
    const std::string l = std::to_string(layer);
    int down =
        b.Op("Gemm", {x, b.Const("down" + l, RandomF32({rank, width}, rng, -0.1, 0.1))}, {{"transB", int64_t{1}}});
    int up = b.Op("Gemm",
                  {down, b.Const("up" + l, RandomF32({width, rank}, rng, -0.1, 0.1)),
                   b.Const("bias" + l, RandomF32({width}, rng, -0.5, 0.5))},
                  {{"transB", int64_t{1}}});
    x = b.Op("MulAdd", {x0, up, x});
  }
  b.Output(b.Op("Gemm", {x, b.Const("top", RandomF32({1, width}, rng, -0.1, 0.1))}, {{"transB", int64_t{1}}}));
  return b.graph();
}

const Backend* CudaOrNull() {
  auto cuda = FindBackend("cuda");
  return cuda.ok() ? *cuda : nullptr;
}

bool CudaIsHopper() {
#if RANKD_HAVE_CUDA
  int device = 0, major = 0, minor = 0;
  return CudaOrNull() && cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 &&
         minor == 0;
#else
  return false;
#endif
}

int GpuCount() {
#if RANKD_HAVE_CUDA
  if (!CudaOrNull()) return 0;
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 0;
#endif
}

Status SwitchableHealthBackend::Health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_.empty() ? Status::Ok() : Unavailable(failed_);
}

void SwitchableHealthBackend::Fail(std::string why) {
  std::lock_guard<std::mutex> lock(mu_);
  failed_ = std::move(why);
}

StatusOr<std::shared_ptr<ModelResources>> SwitchableHealthBackend::PrepareModel(const Graph& graph,
                                                                                const PrepareOptions& options) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!prepare_fails_.empty()) return ResourceExhausted(prepare_fails_);
  }
  return CpuBackend().PrepareModel(graph, options);
}

void SwitchableHealthBackend::FailPrepare(std::string why) {
  std::lock_guard<std::mutex> lock(mu_);
  prepare_fails_ = std::move(why);
}

std::string WithExternalTables(const std::string& name) {
  onnx::ModelProto m;
  std::ifstream in(SourcePath("models/zoo/" + name + "/1/model.onnx"), std::ios::binary);
  EXPECT_TRUE(m.ParseFromIstream(&in));
  const std::string path = WriteTempFile("external_tables/" + name + "/model.onnx", "");
  std::ofstream data(std::filesystem::path(path).parent_path() / "tables.bin", std::ios::binary);
  int64_t offset = 0;
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name().find("table") == std::string::npos || !t.has_raw_data()) continue;
    data.write(t.raw_data().data(), static_cast<std::streamsize>(t.raw_data().size()));
    for (auto [key, value] : {std::pair<std::string, int64_t>{"offset", offset},
                              std::pair<std::string, int64_t>{"length", static_cast<int64_t>(t.raw_data().size())}}) {
      auto* kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(std::to_string(value));
    }
    auto* kv = t.add_external_data();
    kv->set_key("location");
    kv->set_value("tables.bin");
    offset += static_cast<int64_t>(t.raw_data().size());
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
  }
  EXPECT_GT(offset, 0) << name;
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

std::vector<InferRequest> ZooRequests(const std::string& name) {
  std::ifstream file(SourcePath("tests/data/zoo/" + name + ".requests.jsonl"));
  std::vector<InferRequest> requests;
  std::string line;
  while (std::getline(file, line)) {
    auto r = ParseInferRequestJson(line);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) requests.push_back(std::move(*r));
  }
  EXPECT_FALSE(requests.empty()) << name;
  return requests;
}

InferRequest LargeW1Request(int64_t id_rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dense(0, 2);
  std::uniform_int_distribution<int64_t> id(0, id_rows - 1), length(0, 1);
  constexpr int64_t kRows = 700;
  std::ostringstream json;
  json << R"({"id": "large", "inputs": [{"name": "dense", "datatype": "FP32", "shape": [)" << kRows
       << R"(, 13], "data": [)";
  for (int64_t i = 0; i < kRows * 13; ++i) json << (i ? ", " : "") << dense(rng);
  json << "]}";
  for (int f = 0; f < 26; ++f) {
    json << R"(, {"name": "sparse_)" << f << R"(", "datatype": "INT64", "shape": [)" << kRows << R"(, -1], "data": [)";
    for (int64_t r = 0; r < kRows; ++r) {
      json << (r ? ", [" : "[");
      const int64_t n = length(rng);
      for (int64_t k = 0; k < n; ++k) json << (k ? ", " : "") << id(rng);
      json << "]";
    }
    json << "]}";
  }
  json << "]}";
  auto request = ParseInferRequestJson(json.str());
  EXPECT_TRUE(request.ok()) << request.status().ToString();
  return request.ok() ? std::move(*request) : InferRequest{};
}

std::vector<std::vector<InferOutput>> ScoreEach(const Model& model, const std::vector<InferRequest>& requests) {
  std::vector<std::vector<InferOutput>> answers;
  for (const InferRequest& r : requests) {
    auto out = model.Infer(r);
    if (!out.ok()) {
      ADD_FAILURE() << out.status().ToString();
      answers.emplace_back();
      continue;
    }
    answers.push_back(std::move(*out));
  }
  return answers;
}

ScoredAtOnce ScoreAtOnce(const Model& model, const std::vector<InferRequest>& requests,
                         const std::vector<std::vector<InferOutput>>& want, int threads, int each) {
  std::atomic<int> failed{0}, wrong{0};
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      for (int k = 0; k < each; ++k) {
        const size_t i = static_cast<size_t>(t * 7 + k) % requests.size();
        auto got = model.Infer(requests[i]);
        if (!got.ok()) {
          ++failed;
          continue;
        }
        for (size_t o = 0; o < want[i].size() && o < got->size(); ++o)
          wrong += RelativeError((*got)[o].data, want[i][o].data) != 0;
      }
    });
  }
  for (std::thread& t : running) t.join();
  return {failed.load(), wrong.load()};
}

void ExpectIdenticalOutputs(const std::vector<InferOutput>& got, const std::vector<InferOutput>& want,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(RelativeError(got[i].data, want[i].data), 0) << what;
}

}  // namespace rankd::testing
