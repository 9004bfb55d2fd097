// PyTorch's nn.EmbeddingBag as torch.onnx exports it (tests/data/embedding_bags: the TorchScript
// exporter of PyTorch 2.11, opset 17, a 50 x 4 table, bags over offsets, modes sum, mean and max,
// and over padded 2-D ids, and a sum with per-sample weights (over offsets and over padded ids); and its
// dynamo exporter, opset 20,
// dynamo_*: the same bags over offsets): the Loop over bags is imported as
// one EmbeddingBag (model/bag_loop_import.h), the weighted one weighting its rows as it reads them, served from ragged
// ids whose starts the config routes to the graph's offsets input (or from the 2-D ids), and scored as the table's rows
// say; the forms rankd does not take are refused naming the node and what differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "compile/passes.h"
#include "model/onnx_import.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

std::string Data(const std::string& name) { return testing::SourcePath("tests/data/embedding_bags/" + name); }

// A model directory holding the exported file and `config`.
std::string ModelDir(const std::string& file, const std::string& name, const std::string& config) {
  std::ifstream in(Data(file), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  testing::WriteTempFile(name + "/1/model.onnx", bytes.str());
  const std::string path = testing::WriteTempFile(name + "/config.yaml", config);
  return path.substr(0, path.size() - std::string("/config.yaml").size());
}

constexpr char kRaggedIds[] = "inputs:\n  - name: ids\n    datatype: INT64\n    ragged: true\n    offsets: offsets\n";

// Expects y [bags, dim] to hold each bag of `lengths` consecutive `ids` pooled from `table` by
// `mode` (sum, mean or max; an empty bag zeros), each row times its weight where `weights` is given.
void ExpectPooled(const Tensor& y, const Tensor& table, const std::vector<int64_t>& ids,
                  const std::vector<int64_t>& lengths, const std::string& mode, const std::vector<float>* weights,
                  const std::string& what) {
  const int64_t dim = table.dim(1);
  ASSERT_EQ(y.shape(), Shape({static_cast<int64_t>(lengths.size()), dim})) << what;
  size_t at = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int64_t d = 0; d < dim; ++d) {
      double want = 0;
      for (int64_t j = 0; j < lengths[b]; ++j) {
        const size_t k = at + static_cast<size_t>(j);
        const double v = (weights ? (*weights)[k] : 1.0f) * table.data<float>()[ids[k] * dim + d];
        want = mode != "max" ? want + v : j == 0 ? v : std::max(want, v);
      }
      if (mode == "mean" && lengths[b] > 0) want /= static_cast<double>(lengths[b]);
      EXPECT_NEAR(y.data<float>()[static_cast<int64_t>(b) * dim + d], want, 1e-5) << what << ", bag " << b;
    }
    at += static_cast<size_t>(lengths[b]);
  }
}

// Both exporters' forms: TorchScript's (offsets_*) and dynamo's (dynamo_*, PyTorch 2.11 with
// onnxscript, opset 20: a Loop carrying a sequence of rows, stacked by a ConcatFromSequence).
constexpr const char* kExports[] = {"offsets_", "dynamo_"};

TEST(EmbeddingBagImport, TheExportedLoopIsOneBag) {
  for (const char* mode : {"sum", "mean", "max"}) {
    for (const char* exporter : kExports) {
      auto g = ImportOnnxFile(Data(std::string(exporter) + mode + ".onnx"));
      ASSERT_TRUE(g.ok()) << exporter << mode << ": " << g.status().ToString();
      EXPECT_EQ(g->OpCounts()["Loop"], 0);
      EXPECT_EQ(g->OpCounts()["ConcatFromSequence"], 0);
      ASSERT_EQ(g->OpCounts()["EmbeddingBag"], 1);
      for (const Node& n : g->nodes) {
        if (n.op == "EmbeddingBag") {
          EXPECT_EQ(n.GetString("mode", "sum"), mode);
        }
      }
    }
  }
}

TEST(EmbeddingBagImport, ServedFromRaggedIdsAsPyTorchPoolsThem) {
  for (const std::string exporter : kExports) {
    for (const char* mode : {"sum", "mean", "max"}) {
      const std::string file = exporter + mode + ".onnx";
      auto g = ImportOnnxFile(Data(file));
      ASSERT_TRUE(g.ok());
      const Tensor* table = g->FindConstant(g->FindValue("bag.weight"));
      ASSERT_TRUE(table && table->rank() == 2);
      const int64_t rows = table->dim(0);
      auto model = Model::Load(ModelDir(file, "bag_" + exporter + mode, kRaggedIds), -1);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      ASSERT_EQ((*model)->inputs().size(), 1u);  // the offsets are rankd's to feed
      std::mt19937_64 rng(5);
      for (int64_t bags : {1, 3, 40}) {
        std::vector<int64_t> ids, lengths;
        for (int64_t b = 0; b < bags; ++b) {
          lengths.push_back(b % 4 == 1 ? 0 : static_cast<int64_t>(rng() % 6));  // empty bags too
          for (int64_t j = 0; j < lengths.back(); ++j) ids.push_back(static_cast<int64_t>(rng() % rows));
        }
        InferRequest r;
        r.inputs.push_back({"ids", testing::MakeI64({static_cast<int64_t>(ids.size())}, ids), lengths, {}});
        auto out = (*model)->Infer(r);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        ExpectPooled((*out)[0].data, *table, ids, lengths, mode, nullptr, file);
      }
      // An id past the table fails its request.
      InferRequest bad;
      bad.inputs.push_back({"ids", testing::MakeI64({2}, {1, rows}), {2}, {}});
      EXPECT_EQ((*model)->Infer(bad).status().code(), StatusCode::kInvalidArgument);
    }
  }
}

void ExpectRefused(const Status& s, StatusCode code, const std::string& fragment) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "'" << s.message() << "' lacks '" << fragment << "'";
}

// The padded 2-D form (ids [bags, n], no offsets): its bags' starts are Range(0, ids' element
// count, n), the count a ReduceProd of the ids' shape, imported as the product of its entries
// (model/shape_product_import.h); the Loop is then one bag, served from a plain [bags, n] input.
TEST(EmbeddingBagImport, ThePadded2dFormIsOneBagOverFixedLengthRows) {
  // TorchScript's, and dynamo's (its starts Range(0, rows * n, n) from the shape's entries).
  for (const auto& [file, mode] : {std::pair{"padded_sum.onnx", "sum"}, std::pair{"dynamo_padded_sum.onnx", "sum"},
                                   std::pair{"dynamo_padded_mean.onnx", "mean"}}) {
    SCOPED_TRACE(file);
    auto g = ImportOnnxFile(Data(file));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->OpCounts()["Loop"], 0);
    EXPECT_EQ(g->OpCounts()["ReduceProd"], 0);
    EXPECT_EQ(g->OpCounts()["EmbeddingBag"], 1);
    const Tensor* table = g->FindConstant(g->FindValue("bag.weight"));
    ASSERT_TRUE(table && table->rank() == 2);
    const int64_t rows = table->dim(0), n = 5;
    // On the CPU, and on a GPU where there is one (the count, the Range and the bag on the device).
    for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
      if (!backend) continue;
      SCOPED_TRACE(backend->name());
      ModelOptions options;
      options.backend = backend;
      auto model = Model::LoadFile(Data(file), {}, options);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      std::mt19937_64 rng(9);
      for (int64_t bags : {1, 4, 33}) {
        std::vector<int64_t> ids(static_cast<size_t>(bags * n));
        for (int64_t& id : ids) id = static_cast<int64_t>(rng() % rows);
        InferRequest r;
        r.inputs.push_back({"ids", testing::MakeI64({bags, n}, ids), {}, {}});
        auto out = (*model)->Infer(r);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        ExpectPooled((*out)[0].data, *table, ids, std::vector<int64_t>(static_cast<size_t>(bags), n), mode, nullptr,
                     std::to_string(bags) + " bags");
      }
      InferRequest bad;  // an id past the table fails its request
      bad.inputs.push_back({"ids", testing::MakeI64({1, n}, {0, 1, 2, 3, rows}), {}, {}});
      EXPECT_EQ((*model)->Infer(bad).status().code(), StatusCode::kInvalidArgument);
    }
  }
}

// nn.EmbeddingBag(ids [bags, 3], per_sample_weights=w [bags, 3]) by both exporters
// (scripts/export_padded_weighted_bags.py): one weighted bag over the flattened ids and weights,
// the rows weighted as the kernel reads them, served from plain [bags, 3] inputs.
TEST(EmbeddingBagImport, ThePadded2dFormWithWeightsIsOneWeightedBag) {
  for (const char* file : {"padded_weighted_sum.onnx", "dynamo_padded_weighted_sum.onnx"}) {
    SCOPED_TRACE(file);
    auto g = ImportOnnxFile(Data(file));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    RemoveDeadNodes(*g);
    EXPECT_EQ(g->OpCounts()["Loop"], 0);
    EXPECT_FALSE(std::any_of(g->nodes.begin(), g->nodes.end(), [&](const Node& n) {
      return n.op == "Gather" && n.inputs[0] == g->FindValue("bag.weight");
    })) << "no rows gathered (and weighted) first";
    const auto bag =
        std::find_if(g->nodes.begin(), g->nodes.end(), [](const Node& n) { return n.op == "EmbeddingBag"; });
    ASSERT_NE(bag, g->nodes.end());
    EXPECT_EQ(bag->NumInputs(), 4);
    const Tensor* table = g->FindConstant(g->FindValue("bag.weight"));
    ASSERT_TRUE(table && table->rank() == 2);
    const int64_t rows = table->dim(0), n = 3;
    for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
      if (!backend) continue;
      SCOPED_TRACE(backend->name());
      ModelOptions options;
      options.backend = backend;
      auto model = Model::LoadFile(Data(file), {}, options);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      std::mt19937_64 rng(13);
      std::uniform_real_distribution<float> weight(-2, 2);
      for (int64_t bags : {1, 4, 33}) {
        std::vector<int64_t> ids(static_cast<size_t>(bags * n));
        std::vector<float> w(ids.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(rng() % rows), w[i] = weight(rng);
        InferRequest r;
        r.inputs.push_back({"ids", testing::MakeI64({bags, n}, ids), {}, {}});
        r.inputs.push_back({"weights", testing::MakeF32({bags, n}, w), {}, {}});
        auto out = (*model)->Infer(r);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        ExpectPooled((*out)[0].data, *table, ids, std::vector<int64_t>(static_cast<size_t>(bags), n), "sum", &w,
                     std::to_string(bags) + " bags");
      }
    }
  }
}

// Shape buckets key plans by rows (and ragged lengths): ids [rows, -1] not declared ragged would
// find a plan made for another width, so such a model runs unbucketed (the GPU's default turns
// them off, the report says why) and a config that asks for buckets is refused naming the input.
TEST(EmbeddingBagImport, BucketsAreNotUsedForIdsWhoseWidthRequestsChange) {
  ModelOptions options;
  options.shape_buckets = 1;
  ExpectRefused(Model::LoadFile(Data("dynamo_padded_sum.onnx"), {}, options).status(), StatusCode::kInvalidArgument,
                "shape buckets: input 'ids' has a dimension past its rows that requests may change");
  options.shape_buckets = -1;  // the backend's default
  auto model = Model::LoadFile(Data("dynamo_padded_sum.onnx"), {}, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto fixed = Model::LoadFile(Data("padded_sum.onnx"), {}, [] {
    ModelOptions o;
    o.shape_buckets = 1;
    return o;
  }());
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();  // [rows, 5]: bucketed
  EXPECT_EQ((*fixed)->load_report().buckets, "on");
}

// A ReduceProd of anything but a shape stays as written, and the op check refuses it by name.
TEST(EmbeddingBagImport, AReduceProdOfValuesIsStillRefused) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("prod");
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* v = name[0] == 'x' ? g->add_input() : g->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  }
  onnx::NodeProto* prod = g->add_node();
  prod->set_op_type("ReduceProd");
  prod->set_name("prod");
  prod->add_input("x");
  prod->add_output("y");
  onnx::AttributeProto* keep = prod->add_attribute();
  keep->set_name("keepdims");
  keep->set_type(onnx::AttributeProto::INT);
  keep->set_i(0);
  const std::string bytes = m.SerializeAsString();
  auto graph = ImportOnnxBytes(bytes.data(), bytes.size(), {});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  EXPECT_EQ(graph->OpCounts()["ReduceProd"], 1);
  ExpectRefused(Model::LoadFile(testing::WriteTempFile("prod/model.onnx", bytes), {}).status(),
                StatusCode::kUnimplemented, "op ReduceProd is not supported");
}

// Per-sample weights (nn.EmbeddingBag(ids, offsets, per_sample_weights=w), sum): the Loop becomes
// one bag that weights each row as it reads it (no rows gathered and weighted first); run on the
// graph's own inputs (flat ids, bag starts, a weight per id), each bag is the weighted sum of its rows.
TEST(EmbeddingBagImport, PerSampleWeightsWeighTheRowsOfTheirBags) {
  for (const char* file : {"weighted_sum.onnx", "dynamo_weighted_sum.onnx"}) {
    SCOPED_TRACE(file);
    auto g = ImportOnnxFile(Data(file));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    RemoveDeadNodes(*g);  // the dynamo form's Size and SequenceEmpty, which no backend runs
    EXPECT_EQ(g->OpCounts()["Loop"], 0);
    EXPECT_EQ(g->OpCounts()["Mul"], 0);
    EXPECT_EQ(g->OpCounts()["Range"], 0);
    ASSERT_EQ(g->OpCounts()["EmbeddingBag"], 1);
    const auto bag =
        std::find_if(g->nodes.begin(), g->nodes.end(), [](const Node& n) { return n.op == "EmbeddingBag"; });
    EXPECT_EQ(bag->NumInputs(), 4);
    const Tensor* table = g->FindConstant(g->FindValue("bag.weight"));
    ASSERT_TRUE(table && table->rank() == 2);
    EXPECT_EQ(bag->inputs[0], g->FindValue("bag.weight"));
    const int64_t rows = table->dim(0), dim = table->dim(1);
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<float> weight(-2, 2);
    const std::vector<int64_t> lengths{3, 0, 1, 5, 2};  // an empty bag too
    std::vector<int64_t> ids, starts;
    std::vector<float> w;
    for (int64_t n : lengths) {
      starts.push_back(static_cast<int64_t>(ids.size()));
      for (int64_t j = 0; j < n; ++j) ids.push_back(static_cast<int64_t>(rng() % rows)), w.push_back(weight(rng));
    }
    const auto n = static_cast<int64_t>(ids.size()), bags = static_cast<int64_t>(lengths.size());
    auto out =
        testing::RunGraph(*g, {testing::MakeI64({n}, ids), testing::MakeI64({bags}, starts), testing::MakeF32({n}, w)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Tensor& y = (*out)[0];
    ASSERT_EQ(y.shape(), Shape({bags, dim}));
    for (int64_t b = 0; b < bags; ++b) {
      for (int64_t d = 0; d < dim; ++d) {
        double want = 0;
        for (int64_t j = starts[static_cast<size_t>(b)];
             j < starts[static_cast<size_t>(b)] + lengths[static_cast<size_t>(b)]; ++j) {
          want += static_cast<double>(w[static_cast<size_t>(j)]) *
                  table->data<float>()[ids[static_cast<size_t>(j)] * dim + d];
        }
        EXPECT_NEAR(y.data<float>()[b * dim + d], want, 1e-5) << "bag " << b << ", column " << d;
      }
    }
  }
}

// Served: the weights a ragged FP32 input beside the ids, naming the same bag starts, its lengths
// the ids', listed after the ids or before them; each bag scores as the weighted sum of its rows,
// and lengths that differ are refused.
TEST(EmbeddingBagImport, PerSampleWeightsAreServedBesideTheirIds) {
  for (const auto& [file, weights, weights_first] :
       {std::tuple{"weighted_sum.onnx", "w", false}, std::tuple{"dynamo_weighted_sum.onnx", "weights", false},
        std::tuple{"weighted_sum.onnx", "w", true}}) {
    SCOPED_TRACE(std::string(file) + (weights_first ? ", weights listed first" : ""));
    const Tensor table = [file = file] {
      auto g = ImportOnnxFile(Data(file));
      return g.ok() ? *g->FindConstant(g->FindValue("bag.weight")) : Tensor();
    }();
    ASSERT_EQ(table.rank(), 2);
    const int64_t rows = table.dim(0);
    const std::string ids_input = std::string(kRaggedIds).substr(std::string("inputs:\n").size());
    const std::string weights_input =
        std::string("  - name: ") + weights + "\n    datatype: FP32\n    ragged: true\n    offsets: offsets\n";
    auto model =
        Model::Load(ModelDir(file, std::string("bag_weighted_") + weights + (weights_first ? "_first" : ""),
                             "inputs:\n" + (weights_first ? weights_input + ids_input : ids_input + weights_input)),
                    -1);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    ASSERT_EQ((*model)->inputs().size(), 2u);
    std::mt19937_64 rng(23);
    std::uniform_real_distribution<float> weight(-2, 2);
    for (int64_t bags : {1, 4, 33}) {
      std::vector<int64_t> ids, lengths;
      std::vector<float> w;
      for (int64_t b = 0; b < bags; ++b) {
        lengths.push_back(b % 3 == 2 ? 0 : static_cast<int64_t>(rng() % 5));
        for (int64_t j = 0; j < lengths.back(); ++j)
          ids.push_back(static_cast<int64_t>(rng() % rows)), w.push_back(weight(rng));
      }
      const auto n = static_cast<int64_t>(ids.size());
      InferRequest r;
      r.inputs.push_back({"ids", testing::MakeI64({n}, ids), lengths, {}});
      r.inputs.push_back({weights, testing::MakeF32({n}, w), lengths, {}});
      auto out = (*model)->Infer(r);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectPooled((*out)[0].data, table, ids, lengths, "sum", &w, std::to_string(bags) + " bags");
      if (bags < 4) continue;
      // The weights' lengths must be the ids': the same count in other bags is refused too.
      std::vector<int64_t> moved = lengths;
      const auto from = static_cast<size_t>(
          std::find_if(lengths.begin(), lengths.end(), [](int64_t l) { return l > 0; }) - lengths.begin());
      ASSERT_LT(from, lengths.size());
      moved[from] -= 1, moved[(from + 1) % moved.size()] += 1;
      InferRequest bad = r;
      bad.inputs[1].lengths = moved;
      ExpectRefused((*model)->Infer(bad).status(), StatusCode::kInvalidArgument,
                    std::string("ragged inputs 'ids' and '") + weights +
                        "' share their bags' starts ('offsets'): their lengths must be equal");
    }
  }
}

// The exported weighted Loop with its body changed by `edit` (a node of the body, by op type),
// imported: refused, naming the node and what differs.
void ExpectWeightedLoopRefused(const char* op, const std::function<void(onnx::NodeProto&)>& edit,
                               const std::string& why) {
  std::ifstream in(Data("weighted_sum.onnx"), std::ios::binary);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromIstream(&in));
  bool edited = false;
  for (onnx::NodeProto& n : *m.mutable_graph()->mutable_node()) {
    if (n.op_type() != "Loop") continue;
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      for (onnx::NodeProto& b : *a.mutable_g()->mutable_node()) {
        if (b.op_type() == op && !edited) edit(b), edited = true;
      }
    }
  }
  ASSERT_TRUE(edited) << op;
  const std::string bytes = m.SerializeAsString();
  ExpectRefused(ImportOnnxBytes(bytes.data(), bytes.size(), {}).status(), StatusCode::kUnimplemented,
                "node '/bag/Loop' (Loop): a Loop is taken only as PyTorch's exported nn.EmbeddingBag (sum, mean or max "
                "over offsets, a sum with per-sample weights); here " +
                    why);
}

// The dynamo exporter's Loop in `file` with the first node of type `op` in its body or the body's
// branches changed by `edit`, imported: refused, naming the node and what differs.
void ExpectDynamoLoopRefused(const char* file, const char* op, const std::function<void(onnx::NodeProto&)>& edit,
                             const std::string& why) {
  std::ifstream in(Data(file), std::ios::binary);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromIstream(&in));
  bool edited = false;
  std::function<void(onnx::GraphProto&)> visit = [&](onnx::GraphProto& g) {
    for (onnx::NodeProto& n : *g.mutable_node()) {
      if (n.op_type() == op && !edited) edit(n), edited = true;
      for (onnx::AttributeProto& a : *n.mutable_attribute()) {
        if (a.has_g()) visit(*a.mutable_g());
      }
    }
  };
  for (onnx::NodeProto& n : *m.mutable_graph()->mutable_node()) {
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (n.op_type() == "Loop" && a.has_g()) visit(*a.mutable_g());
    }
  }
  ASSERT_TRUE(edited) << op;
  const std::string bytes = m.SerializeAsString();
  const Status s = ImportOnnxBytes(bytes.data(), bytes.size(), {}).status();
  ExpectRefused(s, StatusCode::kUnimplemented,
                "(Loop): a Loop carrying a sequence is taken only as PyTorch's "
                "nn.EmbeddingBag as the dynamo exporter writes it");
  ExpectRefused(s, StatusCode::kUnimplemented, "here " + why);
}

// include_last_offset (a sum): the offsets hold every bag's start and the last bag's end, and the
// graph reads them as they are.
TEST(EmbeddingBagImport, DynamoIncludeLastOffsetIsOneBagOverTheOffsetsAsGiven) {
  auto g = ImportOnnxFile(Data("dynamo_last_offset_sum.onnx"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  RemoveDeadNodes(*g);
  EXPECT_EQ(g->OpCounts()["Loop"], 0);
  EXPECT_EQ(g->OpCounts()["EmbeddingBag"], 1);
  const Tensor* table = g->FindConstant(g->FindValue("bag.weight"));
  ASSERT_TRUE(table && table->rank() == 2);
  const std::vector<int64_t> ids{3, 7, 7, 1, 49, 0, 12}, lengths{2, 0, 4, 1};
  auto out = testing::RunGraph(*g, {testing::MakeI64({7}, ids), testing::MakeI64({5}, {0, 2, 2, 6, 7})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectPooled((*out)[0], *table, ids, lengths, "sum", nullptr, "include_last_offset");
}

// dynamo_padding_idx_sum.onnx (padding_idx 0) with `edit` applied to the first body node of type
// `op` (none where `op` is empty) and the table's row 0 set to 5s (PyTorch exports padding_idx's row
// as zeros, which a sum could not tell skipped from added), as bytes.
std::string PaddingIdxBag(const char* op, const std::function<void(onnx::NodeProto&)>& edit) {
  std::ifstream in(Data("dynamo_padding_idx_sum.onnx"), std::ios::binary);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromIstream(&in));
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name() != "bag.weight") continue;
    EXPECT_EQ(t.dims(1), 4);
    const float five[4] = {5, 5, 5, 5};
    std::string& raw = *t.mutable_raw_data();
    EXPECT_GE(raw.size(), sizeof(five));
    raw.replace(0, sizeof(five), reinterpret_cast<const char*>(five), sizeof(five));
  }
  bool edited = *op == 0;
  std::function<void(onnx::GraphProto&)> visit = [&](onnx::GraphProto& g) {
    for (onnx::NodeProto& n : *g.mutable_node()) {
      if (!edited && n.op_type() == op) edit(n), edited = true;  // never with op ""
      for (onnx::AttributeProto& a : *n.mutable_attribute()) {
        if (a.has_g()) visit(*a.mutable_g());
      }
    }
  };
  visit(*m.mutable_graph());
  EXPECT_TRUE(edited) << op;
  return m.SerializeAsString();
}

StatusOr<Graph> ImportPaddingIdxBag(const char* op, const std::function<void(onnx::NodeProto&)>& edit) {
  const std::string bytes = PaddingIdxBag(op, edit);
  return ImportOnnxBytes(bytes.data(), bytes.size(), {});
}

// padding_idx (a Loop over each bag's ids inside the Loop over bags): one bag whose ids equal to
// padding_idx are skipped, by the sum, by the mean's count and by the max (the exported sum; the
// mean and max as its reduction would read).
TEST(EmbeddingBagImport, DynamoPaddingIdxIsOneBagThatSkipsThePaddingIds) {
  // Bags [3, 0, 7], [], [0, 0] (all padding: zeros), [1, 49, 0], [12]: what PyTorch pools is the
  // ids that are not 0.
  const std::vector<int64_t> ids{3, 0, 7, 0, 0, 1, 49, 0, 12}, offsets{0, 3, 3, 5, 8};
  const std::vector<int64_t> kept{3, 7, 1, 49, 12}, kept_lengths{2, 0, 0, 2, 1};
  for (const char* mode : {"sum", "mean", "max"}) {
    const std::string reduce = std::string("Reduce") + (mode[1] == 'u' ? "Sum" : mode[1] == 'e' ? "Mean" : "Max");
    auto g = ImportPaddingIdxBag("ReduceSum", [&](onnx::NodeProto& n) { n.set_op_type(reduce); });
    ASSERT_TRUE(g.ok()) << mode << ": " << g.status().ToString();
    RemoveDeadNodes(*g);
    EXPECT_EQ(g->OpCounts()["Loop"], 0);
    EXPECT_EQ(g->OpCounts()["EmbeddingBag"], 1);
    const Tensor* table = g->FindConstant(g->FindValue("bag.weight"));
    ASSERT_TRUE(table && table->rank() == 2 && table->data<float>()[0] == 5.0f);
    auto out = testing::RunGraph(*g, {testing::MakeI64({9}, ids), testing::MakeI64({5}, offsets)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectPooled((*out)[0], *table, kept, kept_lengths, mode, nullptr, std::string("padding_idx, ") + mode);
  }
  // Served from ragged ids: the padding ids are skipped there too.
  const std::string dir = testing::WriteTempFile("bag_padding_idx/1/model.onnx", PaddingIdxBag("", nullptr));
  testing::WriteTempFile("bag_padding_idx/config.yaml", kRaggedIds);
  auto model = Model::Load(dir.substr(0, dir.size() - std::string("/1/model.onnx").size()), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto table = ImportPaddingIdxBag("", nullptr);
  ASSERT_TRUE(table.ok());
  const Tensor* rows = table->FindConstant(table->FindValue("bag.weight"));
  ASSERT_TRUE(rows);
  std::mt19937_64 rng(7);
  for (int64_t bags : {1, 3, 40}) {
    std::vector<int64_t> ids, lengths, kept, kept_lengths;
    for (int64_t b = 0; b < bags; ++b) {
      lengths.push_back(b % 4 == 1 ? 0 : static_cast<int64_t>(rng() % 6));
      kept_lengths.push_back(0);
      for (int64_t j = 0; j < lengths.back(); ++j) {
        ids.push_back(rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 50));  // padding_idx often
        if (ids.back() != 0) kept.push_back(ids.back()), ++kept_lengths.back();
      }
    }
    InferRequest r;
    r.inputs.push_back({"ids", testing::MakeI64({static_cast<int64_t>(ids.size())}, ids), lengths, {}});
    auto out = (*model)->Infer(r);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectPooled((*out)[0].data, *rows, kept, kept_lengths, "sum", nullptr, "padding_idx served");
  }
  // Forms that differ are refused, naming the node and what differs.
  const std::string form =
      "(Loop): a Loop over bags with a Loop over each bag's ids inside is taken only as PyTorch's "
      "nn.EmbeddingBag with padding_idx as the dynamo exporter writes it";
  auto refused = [&](const char* op, const std::function<void(onnx::NodeProto&)>& edit, const std::string& why) {
    const Status s = ImportPaddingIdxBag(op, edit).status();
    ExpectRefused(s, StatusCode::kUnimplemented, form);
    ExpectRefused(s, StatusCode::kUnimplemented, "here " + why);
  };
  refused(
      "Not", [](onnx::NodeProto& n) { n.set_op_type("Identity"); },
      "the ids kept are not those unequal to padding_idx");
  refused(
      "ReduceSum", [](onnx::NodeProto& n) { n.set_op_type("ReduceMin"); },
      "a bag's rows are not reduced by a sum, mean or max over the positions it keeps");
  refused(
      "Identity", [](onnx::NodeProto& n) { n.set_input(0, "j"); },  // the id as is where it is not negative
      "a negative id is not counted from the table's end");
}

TEST(EmbeddingBagImport, DynamoLoopsThatAreNotQuiteABagAreRefused) {
  ExpectDynamoLoopRefused(
      "dynamo_sum.onnx", "ReduceSum", [](onnx::NodeProto& n) { n.set_op_type("ReduceMin"); },
      "a bag's rows are not reduced by a sum, mean or max over its slice");
  ExpectDynamoLoopRefused(
      "dynamo_max.onnx", "Sub", [](onnx::NodeProto& n) { n.set_op_type("Add"); },
      "a bag's rows are not reduced by a sum, mean or max over its slice");  // the last bag's test
  ExpectDynamoLoopRefused(
      "dynamo_mean.onnx", "Greater", [](onnx::NodeProto& n) { n.set_input(0, n.input(1)); },
      "a bag's rows are not reduced by a sum, mean or max over its slice");
  ExpectDynamoLoopRefused(
      "dynamo_sum.onnx", "Less", [](onnx::NodeProto& n) { n.set_op_type("LessOrEqual"); },
      "the body does not add one row a bag to the sequence");
  ExpectDynamoLoopRefused(
      "dynamo_sum.onnx", "Equal", [](onnx::NodeProto& n) { n.set_input(1, n.input(0)); },
      "a bag's bounds are not two Slices of the offsets at the bag's index");
}

TEST(EmbeddingBagImport, OtherFormsAndConfigsAreRefusedClearly) {
  // Loops that are not quite an exported bag.
  ExpectWeightedLoopRefused(
      "ReduceSum", [](onnx::NodeProto& n) { n.set_op_type("ReduceMean"); },
      "per-sample weights are taken with a sum only (as PyTorch takes them)");
  ExpectWeightedLoopRefused(
      "ReduceSum", [](onnx::NodeProto& n) { n.set_op_type("ReduceMin"); }, "the bag's rows are reduced by ReduceMin");
  ExpectWeightedLoopRefused(
      "Mul", [](onnx::NodeProto& n) { n.set_op_type("Add"); }, "the reduced rows are not a Gather from a table");
  ExpectWeightedLoopRefused(
      "Mul", [](onnx::NodeProto& n) { n.set_input(1, n.input(0)); },
      "the rows are multiplied by something other than per-sample weights");
  // Ragged FP32 values are per-id values beside ids, sharing their starts.
  ExpectRefused(Model::Load(ModelDir("weighted_sum.onnx", "bag_weights_alone",
                                     std::string(kRaggedIds) + "  - name: w\n    datatype: FP32\n    ragged: true\n"),
                            -1)
                    .status(),
                StatusCode::kInvalidArgument,
                "ragged input 'w' must be integer ids, or FP32 values an id sharing the offsets of ids");
  // The offsets input must be a model input, not also listed, and the ids flat.
  ExpectRefused(Model::Load(ModelDir("offsets_sum.onnx", "bag_no_such_offsets",
                                     "inputs:\n  - name: ids\n    ragged: true\n    offsets: starts\n"),
                            -1)
                    .status(),
                StatusCode::kInvalidArgument, "offsets 'starts' is not an INT64 input of the model");
  ExpectRefused(Model::Load(ModelDir("offsets_sum.onnx", "bag_offsets_listed",
                                     std::string(kRaggedIds) + "  - name: offsets\n    datatype: INT64\n"),
                            -1)
                    .status(),
                StatusCode::kInvalidArgument, "it is fed by rankd, not listed or sent");
  ExpectRefused(
      Model::Load(
          ModelDir("offsets_sum.onnx", "bag_offsets_not_ragged", "inputs:\n  - name: ids\n    offsets: offsets\n"), -1)
          .status(),
      StatusCode::kInvalidArgument, "offsets names the graph input of a ragged input's bag starts");
}

}  // namespace
}  // namespace rankd
