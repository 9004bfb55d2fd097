#include "model/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "model/bag_loop_import.h"
#include "model/mapped_file.h"
#include "model/shape_product_import.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;

class Importer {
 public:
  explicit Importer(const OnnxImportOptions& options) : options_(options) {}

  StatusOr<Graph> Run(const onnx::ModelProto& model) {
    RANKD_RETURN_IF_ERROR(ReadOpset(model));
    const onnx::GraphProto& g = model.graph();
    for (const auto& init : g.initializer()) {
      RANKD_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(init));
      if (graph_.FindValue(init.name()) >= 0) {
        return InvalidArgument("initializer '" + init.name() + "' is defined twice");
      }
      graph_.AddConstant(init.name(), std::move(t));
    }
    for (const auto& in : g.input()) {
      if (graph_.FindValue(in.name()) >= 0) continue;  // an initializer listed as input
      RANKD_ASSIGN_OR_RETURN(Value v, ConvertValueInfo(in));
      graph_.inputs.push_back(graph_.AddValue(std::move(v)));
    }
    for (const auto& node : g.node()) RANKD_RETURN_IF_ERROR(ConvertNode(node));
    for (const auto& out : g.output()) {
      int id = graph_.FindValue(out.name());
      if (id < 0) return InvalidArgument("graph output '" + out.name() + "' is never produced");
      RANKD_ASSIGN_OR_RETURN(Value v, ConvertValueInfo(out));
      Value& have = graph_.values[static_cast<size_t>(id)];
      if (have.dtype == DType::kInvalid) have.dtype = v.dtype;
      if (!have.rank_known) {
        have.shape = v.shape;
        have.rank_known = v.rank_known;
      }
      graph_.outputs.push_back(id);
    }
    if (graph_.outputs.empty()) return InvalidArgument("the graph has no outputs");
    return std::move(graph_);
  }

 private:
  Status ReadOpset(const onnx::ModelProto& model) {
    for (const auto& op : model.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") graph_.opset = op.version();
    }
    if (graph_.opset == 0) return InvalidArgument("the model imports no default-domain opset");
    if (graph_.opset < options_.min_opset || graph_.opset > options_.max_opset) {
      return Unimplemented("opset " + std::to_string(graph_.opset) + " is not supported (" +
                           std::to_string(options_.min_opset) + " to " + std::to_string(options_.max_opset) +
                           "); re-export with opset_version in that range");
    }
    if (!model.has_graph()) return InvalidArgument("the model has no graph");
    return Status::Ok();
  }

  StatusOr<Value> ConvertValueInfo(const onnx::ValueInfoProto& info) {
    Value v;
    v.name = info.name();
    if (!info.type().has_tensor_type()) {
      return Unimplemented("'" + info.name() + "' is not a tensor (sequences and maps unsupported)");
    }
    const auto& tt = info.type().tensor_type();
    auto dtype = DTypeFromOnnx(tt.elem_type());
    if (!dtype) {
      return Unimplemented("'" + info.name() + "' has ONNX element type " + std::to_string(tt.elem_type()) +
                           ", which rankd does not support");
    }
    v.dtype = *dtype;
    if (tt.has_shape()) {
      v.rank_known = true;
      for (const auto& d : tt.shape().dim()) v.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    return v;
  }

  // Public for ReadTensorProtoFile.
 public:
  StatusOr<Tensor> ConvertTensor(const onnx::TensorProto& t) {
    auto dtype = DTypeFromOnnx(t.data_type());
    std::string what = "tensor '" + t.name() + "'";
    if (!dtype) {
      return Unimplemented(what + " has ONNX element type " + std::to_string(t.data_type()) +
                           ", which rankd does not support");
    }
    Shape shape;
    for (int64_t d : t.dims()) {
      if (d < 0) return InvalidArgument(what + " has a negative dimension");
      shape.push_back(d);
    }
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d != 0 && n > (int64_t{1} << 40) / d) return InvalidArgument(what + " is too large");
      n *= d;
    }
    size_t bytes = static_cast<size_t>(n) * DTypeSize(*dtype);
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return ReadExternal(t, *dtype, shape, bytes);
    // Sizes are checked against the data present before anything is allocated.
    if (t.has_raw_data()) {
      if (t.raw_data().size() != bytes) {
        return InvalidArgument(what + " holds " + std::to_string(t.raw_data().size()) +
                               " bytes of raw data, its shape needs " + std::to_string(bytes));
      }
      Tensor out = Tensor::Zeros(*dtype, shape);
      std::memcpy(out.raw(), t.raw_data().data(), bytes);
      return out;
    }
    auto mismatch = [&](int have) {
      return InvalidArgument(what + " holds " + std::to_string(have) + " values, its shape " + ShapeToString(shape) +
                             " needs " + std::to_string(n));
    };
    int64_t present = *dtype == DType::kF32   ? t.float_data_size()
                      : *dtype == DType::kF64 ? t.double_data_size()
                      : *dtype == DType::kI64 ? t.int64_data_size()
                                              : t.int32_data_size();
    if (present != n) return mismatch(static_cast<int>(present));
    Tensor out = Tensor::Zeros(*dtype, shape);
    if (n == 0) return out;  // empty repeated fields may have no storage at all
    switch (*dtype) {
      case DType::kF32:
        std::memcpy(out.raw(), t.float_data().data(), bytes);
        break;
      case DType::kF64:
        std::memcpy(out.raw(), t.double_data().data(), bytes);
        break;
      case DType::kI64:
        std::memcpy(out.raw(), t.int64_data().data(), bytes);
        break;
      default:  // int32, int8, uint8, bool, fp16, bf16 live in int32_data
        for (int64_t i = 0; i < n; ++i) {
          int32_t v = t.int32_data(static_cast<int>(i));
          auto* p = static_cast<uint8_t*>(out.raw()) + i * static_cast<int64_t>(DTypeSize(*dtype));
          switch (DTypeSize(*dtype)) {
            case 1:
              *p = static_cast<uint8_t>(v);
              break;
            case 2: {
              uint16_t h = static_cast<uint16_t>(v);
              std::memcpy(p, &h, 2);
              break;
            }
            default:
              std::memcpy(p, &v, 4);
              break;
          }
        }
    }
    return out;
  }

 private:
  StatusOr<Tensor> ReadExternal(const onnx::TensorProto& t, DType dtype, const Shape& shape, size_t bytes) {
    std::string what = "tensor '" + t.name() + "'";
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoll(kv.value());
        if (kv.key() == "length") length = std::stoll(kv.value());
      } catch (const std::exception&) {
        return InvalidArgument(what + ": external_data '" + kv.key() + "' is not a number");
      }
    }
    if (location.empty()) return InvalidArgument(what + " is external but names no location");
    fs::path rel(location);
    if (rel.is_absolute() || location.find("..") != std::string::npos) {
      return InvalidArgument(what + ": external data location '" + location +
                             "' must be a relative path inside the model directory");
    }
    std::string path = (fs::path(options_.external_data_dir) / rel).string();
    auto it = mapped_.find(path);
    if (it == mapped_.end()) {
      RANKD_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
      it = mapped_.emplace(path, std::move(file)).first;
    }
    const auto& file = it->second;
    if (length >= 0 && static_cast<size_t>(length) != bytes) {
      return InvalidArgument(what + ": external length " + std::to_string(length) + " does not match its shape (" +
                             std::to_string(bytes) + " bytes)");
    }
    if (offset < 0 || static_cast<size_t>(offset) > file->size() ||
        file->size() - static_cast<size_t>(offset) < bytes) {
      return InvalidArgument(what + ": external data runs past the end of '" + location + "'");
    }
    const uint8_t* src = file->data() + offset;
    if (reinterpret_cast<uintptr_t>(src) % DTypeSize(dtype) != 0 || bytes == 0) {
      Tensor out = Tensor::Zeros(dtype, shape);  // misaligned: copy
      if (bytes) std::memcpy(out.raw(), src, bytes);
      return out;
    }
    // The view's mapping lives as long as the graph (Graph::mapped_files).
    return Tensor::View(dtype, shape, const_cast<uint8_t*>(src));
  }

  StatusOr<AttributeValue> ConvertAttribute(const onnx::AttributeProto& a, const std::string& node) {
    switch (a.type()) {
      case onnx::AttributeProto::INT:
        return AttributeValue(a.i());
      case onnx::AttributeProto::FLOAT:
        return AttributeValue(a.f());
      case onnx::AttributeProto::STRING:
        return AttributeValue(a.s());
      case onnx::AttributeProto::INTS:
        return AttributeValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
      case onnx::AttributeProto::FLOATS:
        return AttributeValue(std::vector<float>(a.floats().begin(), a.floats().end()));
      case onnx::AttributeProto::STRINGS:
        return AttributeValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
      case onnx::AttributeProto::TENSOR: {
        RANKD_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(a.t()));
        return AttributeValue(std::move(t));
      }
      default:
        return Unimplemented("node '" + node + "': attribute '" + a.name() + "' has type " + std::to_string(a.type()) +
                             " (graphs and sparse tensors unsupported)");
    }
  }

  Status ConvertNode(const onnx::NodeProto& p) {
    Node node;
    node.op = p.op_type();
    node.name = p.name().empty() ? p.op_type() + "_" + std::to_string(graph_.nodes.size()) : p.name();
    if (!p.domain().empty() && p.domain() != "ai.onnx") {
      return Unimplemented(node.Describe() + ": domain '" + p.domain() + "' is not supported");
    }
    if (node.op == "Loop") {  // PyTorch's nn.EmbeddingBag, or refused (bag_loop_import.h)
      RANKD_ASSIGN_OR_RETURN(BagLoop bag,
                             MatchBagLoop(p, graph_, [this](const onnx::TensorProto& t) { return ConvertTensor(t); }));
      ImportBagLoop(bag, node, graph_);
      RANKD_RETURN_IF_ERROR(AddOutputs(p, std::move(node)));
      if (bag.stacked) {  // the rows stacked already; the bag count is not written
        std::vector<int>& outputs = graph_.nodes.back().outputs;
        std::swap(outputs[0], outputs[static_cast<size_t>(bag.stacked_output)]);
        if (outputs[0] >= 0) stacked_bags_.insert(outputs[0]);
        outputs.resize(1);
      }
      return Status::Ok();
    }
    if (node.op == "ConcatFromSequence" && p.input_size() == 1 && stacked_bags_.count(graph_.FindValue(p.input(0)))) {
      node.op = "Identity";  // the rows of a dynamo-exported bag, stacked by the bag itself
      node.inputs = {graph_.FindValue(p.input(0))};
      for (const auto& a : p.attribute()) {
        if ((a.name() == "axis" && a.i() != 0) || (a.name() == "new_axis" && a.i() != 0)) {
          return Unimplemented(node.Describe() + " stacks an nn.EmbeddingBag's rows other than along axis 0");
        }
      }
      return AddOutputs(p, std::move(node));
    }
    for (const auto& a : p.attribute()) {
      RANKD_ASSIGN_OR_RETURN(AttributeValue v, ConvertAttribute(a, node.name));
      node.attrs[a.name()] = std::move(v);
    }
    if (node.op == "Constant") return ConvertConstant(p, node);
    for (const auto& in : p.input()) {
      if (in.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      int id = graph_.FindValue(in);
      if (id < 0) {
        return InvalidArgument(node.Describe() + " reads '" + in +
                               "', which no earlier node, input or initializer defines");
      }
      node.inputs.push_back(id);
    }
    if (node.op == "ReduceProd") ImportShapeProduct(node, graph_);  // an element count (shape_product_import.h)
    return AddOutputs(p, std::move(node));
  }

  // The node's outputs, named as the proto's, then the node itself.
  Status AddOutputs(const onnx::NodeProto& p, Node node) {
    for (const auto& out : p.output()) {
      if (out.empty()) {
        node.outputs.push_back(-1);
        continue;
      }
      if (graph_.FindValue(out) >= 0) {
        return InvalidArgument(node.Describe() + " writes '" + out + "', which is already defined");
      }
      Value v;
      v.name = out;
      node.outputs.push_back(graph_.AddValue(std::move(v)));
    }
    graph_.nodes.push_back(std::move(node));
    return Status::Ok();
  }

  Status ConvertConstant(const onnx::NodeProto& p, const Node& node) {
    if (p.output_size() != 1) return InvalidArgument(node.Describe() + " must have one output");
    Tensor t;
    auto it = node.attrs.begin();
    if (node.attrs.size() != 1) {
      return InvalidArgument(node.Describe() + " must have exactly one value attribute");
    }
    const std::string& key = it->first;
    const AttributeValue& a = it->second;
    if (key == "value" && std::holds_alternative<Tensor>(a)) {
      t = std::get<Tensor>(a);
    } else if (key == "value_float" && std::holds_alternative<float>(a)) {
      t = Tensor::FromVector<float>(DType::kF32, {}, {std::get<float>(a)});
    } else if (key == "value_int" && std::holds_alternative<int64_t>(a)) {
      t = Tensor::FromVector<int64_t>(DType::kI64, {}, {std::get<int64_t>(a)});
    } else if (key == "value_floats" && std::holds_alternative<std::vector<float>>(a)) {
      const auto& v = std::get<std::vector<float>>(a);
      t = Tensor::FromVector<float>(DType::kF32, {static_cast<int64_t>(v.size())}, v);
    } else if (key == "value_ints" && std::holds_alternative<std::vector<int64_t>>(a)) {
      const auto& v = std::get<std::vector<int64_t>>(a);
      t = Tensor::FromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v);
    } else {
      return Unimplemented(node.Describe() + ": attribute '" + key + "' is not supported");
    }
    if (graph_.FindValue(p.output(0)) >= 0) {
      return InvalidArgument(node.Describe() + " writes '" + p.output(0) + "', already defined");
    }
    graph_.AddConstant(p.output(0), std::move(t));
    return Status::Ok();
  }

  const OnnxImportOptions& options_;
  Graph graph_;
  std::set<int> stacked_bags_;  // sequences of bag rows a dynamo-exported Loop writes, stacked already

 public:
  // The external-data files mapped so far, by path; views point into them.
  std::map<std::string, std::shared_ptr<MappedFile>> mapped_;
};

}  // namespace

StatusOr<Graph> ImportOnnxBytes(const void* data, size_t size, const OnnxImportOptions& options) {
  onnx::ModelProto model;
  if (size > static_cast<size_t>(INT32_MAX) || !model.ParseFromArray(data, static_cast<int>(size))) {
    return InvalidArgument("not a valid ONNX ModelProto (protobuf parse failed)");
  }
  Importer importer(options);
  RANKD_ASSIGN_OR_RETURN(Graph graph, importer.Run(model));
  // Constants that view a mapping keep it alive through the graph.
  for (auto& [path, file] : importer.mapped_) graph.mapped_files.push_back(std::move(file));
  return graph;
}

namespace {

StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(std::string(what) + " file '" + path + "' cannot be opened");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

StatusOr<Tensor> ReadTensorProtoFile(const std::string& path) {
  RANKD_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, "tensor"));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return InvalidArgument("'" + path + "' is not a TensorProto");
  OnnxImportOptions options;
  Importer importer(options);
  return importer.ConvertTensor(proto);
}

StatusOr<Graph> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  RANKD_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, "model"));
  OnnxImportOptions opts = options;
  if (opts.external_data_dir.empty()) opts.external_data_dir = fs::path(path).parent_path().string();
  auto graph = ImportOnnxBytes(bytes.data(), bytes.size(), opts);
  if (!graph.ok()) return graph.status().WithContext(path);
  return graph;
}

}  // namespace rankd
