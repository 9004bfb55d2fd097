// Keyed tables (the config's tables.keyed, docs/embedding.md): a table whose lookups read 64-bit
// keys instead of row numbers. Its rows and keys are imported from HugeCTR's sparse-model files
// (model/keyed_table_files.h) and replace the graph's table, with one more row, the default, that
// a key the files do not hold reads; every lookup of it reads its ids through a KeyedRows node,
// which maps each key to its row with the table's index (model/key_index.h), a graph constant
// that goes wherever weights go.
#include <algorithm>
#include <map>
#include <utility>

#include "compile/passes.h"
#include "model/key_index.h"
#include "model/keyed_table_files.h"
#include "model/ops/keyed_rows.h"

namespace rankd {
namespace {

// A lookup of the table: an EmbeddingBag or a row Gather reading it as input 0 (the only forms
// before the concatenation fusion), its ids input 1.
bool IsLookupOf(const Node& n, int table) {
  if (n.NumInputs() < 2 || n.inputs[0] != table) return false;
  return n.op == "EmbeddingBag" || (n.op == "Gather" && n.GetInt("axis", 0) == 0);
}

// Replaces the table's constant by `files`' vectors and a default row.
void ReplaceRows(Graph& graph, int table, const KeyedTableFiles& files, float default_value) {
  const int64_t keys = static_cast<int64_t>(files.keys.size()), dim = files.vectors.dim(1);
  Tensor rows = Tensor::Empty(DType::kF32, {keys + 1, dim});
  float* to = rows.data<float>();
  std::copy(files.vectors.data<float>(), files.vectors.data<float>() + keys * dim, to);
  std::fill(to + keys * dim, to + (keys + 1) * dim, default_value);
  graph.constants[table] = std::move(rows);
  graph.values[static_cast<size_t>(table)].shape = {keys + 1, dim};
}

}  // namespace

StatusOr<int> KeyTables(Graph& graph, const std::map<std::string, KeyedTableConfig>& keyed) {
  int counter = 0;
  for (const auto& [name, config] : keyed) {
    const std::string field = "tables.keyed." + name;
    const int table = graph.FindValue(name);
    const Tensor* rows = graph.FindConstant(table);
    if (!rows) return InvalidArgument(field + ": the model has no constant table of that name");
    if (rows->dtype() != DType::kF32 || rows->rank() != 2) {
      return InvalidArgument(field + ": the table is " + DTypeName(rows->dtype()) + " " + ShapeToString(rows->shape()) +
                             "; a keyed table is FP32 [rows, width]");
    }
    bool read_by_bag = false;
    for (const Node& n : graph.nodes) {
      for (int i = 0; i < n.NumInputs(); ++i) {
        if (n.inputs[static_cast<size_t>(i)] != table) continue;
        if (i != 0 || !IsLookupOf(n, table)) {
          return InvalidArgument(field + ": " + n.Describe() + " reads the table other than as a lookup");
        }
        read_by_bag = read_by_bag || n.op == "EmbeddingBag";
      }
    }
    for (int out : graph.outputs) {
      if (out == table) return InvalidArgument(field + ": the table is a graph output");
    }
    StatusOr<KeyedTableFiles> read = ReadKeyedTableFiles(config.path, rows->dim(1));
    if (!read.ok()) return read.status().WithContext(field);
    KeyedTableFiles files = std::move(*read);
    if (read_by_bag) {
      for (int64_t key : files.keys) {
        if (key < 0) {
          return InvalidArgument(field + ": key " + std::to_string(key) +
                                 " is negative, and a bag reads the table (negative ids are its empty slots)");
        }
      }
    }
    StatusOr<Tensor> built = BuildKeyIndex(files.keys);
    if (!built.ok()) return built.status().WithContext(field);
    const int64_t default_row = static_cast<int64_t>(files.keys.size());
    ReplaceRows(graph, table, files, config.default_value);
    const int index = graph.AddConstant(name + ".key_index", std::move(*built));
    // One KeyedRows per ids value (and bag or not) the table's lookups read, just before the first.
    std::map<std::pair<int, bool>, int> rows_of;
    std::vector<Node> nodes;
    nodes.reserve(graph.nodes.size() + 4);
    for (Node& n : graph.nodes) {
      if (IsLookupOf(n, table)) {
        const bool bag = n.op == "EmbeddingBag";
        const int ids = n.inputs[1];
        auto [it, fresh] = rows_of.try_emplace({ids, bag}, -1);
        if (fresh) {
          Value v = graph.values[static_cast<size_t>(ids)];
          v.name = name + ".rows_of." + v.name;
          v.dtype = DType::kI64;
          it->second = graph.AddValue(std::move(v));
          Node map;
          map.op = "KeyedRows";
          map.name = name + ".keyed_rows." + std::to_string(rows_of.size());
          map.inputs = {ids, index};
          map.outputs = {it->second};
          keyed_rows::SetParts(map, {{default_row, bag, counter, name}});
          nodes.push_back(std::move(map));
        }
        n.inputs[1] = it->second;
      }
      nodes.push_back(std::move(n));
    }
    graph.nodes = std::move(nodes);
    ++counter;
  }
  return counter;
}

int MergeKeyedRows(Graph& graph) {
  // The nodes whose ids are all graph inputs or constants: known before any node runs.
  std::vector<bool> ready(graph.values.size(), false);
  for (int v : graph.inputs) ready[static_cast<size_t>(v)] = true;
  for (const auto& [v, t] : graph.constants) ready[static_cast<size_t>(v)] = true;
  std::vector<bool> merged(graph.nodes.size(), false);
  Node all;
  std::vector<keyed_rows::Part> parts;
  int count = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (n.op != "KeyedRows" || !std::all_of(n.inputs.begin(), n.inputs.end(),
                                            [&](int v) { return v >= 0 && ready[static_cast<size_t>(v)]; })) {
      continue;
    }
    merged[i] = true;
    ++count;
    all.inputs.insert(all.inputs.end(), n.inputs.begin(), n.inputs.end());
    all.outputs.insert(all.outputs.end(), n.outputs.begin(), n.outputs.end());
    for (keyed_rows::Part& p : keyed_rows::Parts(n)) parts.push_back(std::move(p));
  }
  if (count < 2) return 0;
  all.op = "KeyedRows";
  all.name = "keyed_rows";
  keyed_rows::SetParts(all, parts);
  graph.EraseNodes(merged);
  graph.nodes.insert(graph.nodes.begin(), std::move(all));
  return count;
}

}  // namespace rankd
