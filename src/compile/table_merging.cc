// Tables that share ids, merged (passes.h, MergeTablesSharingIds): in a ConcatEmbeddingBags,
// adjacent parts that pool or look up the same ids with the same mode and column, each from a
// constant table of the same rows and dtype read nowhere else, become one part over the tables
// side by side. Row r of the merged table is row r of each, so every id reads the same rows, a
// -1 slot skips them all, an out-of-range id is out of range for all, and each column is pooled
// in the same order as before: the result is the same to the bit. One part instead of several:
// the ids are read once, and a bag's row is one wider load instead of several narrow ones.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compile/passes.h"

namespace rankd {
namespace {

// A part of a ConcatEmbeddingBags: its inputs [first, first + count), its mode and column.
struct Part {
  size_t first = 0;
  int64_t count = 0, mode = 0, column = -1;
};

// [rows, a + b + ...]: the tables' rows side by side.
Tensor SideBySide(const std::vector<const Tensor*>& tables) {
  const int64_t rows = tables.front()->dim(0);
  const size_t element = DTypeSize(tables.front()->dtype());
  int64_t width = 0;
  for (const Tensor* t : tables) width += t->dim(1);
  Tensor out = Tensor::Zeros(tables.front()->dtype(), {rows, width});
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t r = 0; r < rows; ++r) {
    for (const Tensor* t : tables) {
      const size_t bytes = static_cast<size_t>(t->dim(1)) * element;
      std::memcpy(dst, static_cast<const uint8_t*>(t->raw()) + static_cast<size_t>(r) * bytes, bytes);
      dst += bytes;
    }
  }
  return out;
}

class TableMerger {
 public:
  explicit TableMerger(Graph& graph) : graph_(graph), uses_(graph.UseCounts()) {}

  int Run() {
    int merged = 0;
    for (Node& node : graph_.nodes) {
      if (node.op == "ConcatEmbeddingBags" && !node.Has("floors"))
        merged += Merge(node);  // (floors: ids clipped, not shared)
    }
    return merged;
  }

 private:
  // A constant [rows, dim] table read only by its part.
  const Tensor* OwnTable(int value) const {
    if (value < 0 || !graph_.IsConstant(value) || uses_[static_cast<size_t>(value)] != 1) return nullptr;
    const Tensor& t = graph_.constants.at(value);
    return t.rank() == 2 ? &t : nullptr;
  }

  // Whether part b can join part a (a's table and ids stand for the run being built).
  bool SharesIds(const Node& node, const Part& a, const Part& b) const {
    if (a.count < 2 || b.count != a.count || b.mode != a.mode || b.column != a.column) return false;
    for (int64_t i = 1; i < a.count; ++i) {
      if (node.inputs[a.first + static_cast<size_t>(i)] != node.inputs[b.first + static_cast<size_t>(i)]) return false;
    }
    const Tensor* ta = OwnTable(node.inputs[a.first]);
    const Tensor* tb = OwnTable(node.inputs[b.first]);
    return ta && tb && ta->dtype() == tb->dtype() && ta->dim(0) == tb->dim(0);
  }

  // Merges the runs of parts sharing ids in `node`; returns how many tables went into others.
  int Merge(Node& node) {
    std::vector<int64_t> counts = node.GetInts("parts"), modes = node.GetInts("modes"),
                         columns = node.GetInts("columns");
    std::vector<Part> parts;
    size_t first = 0;
    for (size_t p = 0; p < counts.size(); ++p) {
      parts.push_back({first, counts[p], modes[p], columns.empty() ? -1 : columns[p]});
      first += static_cast<size_t>(counts[p]);
    }
    int merged = 0;
    std::vector<int> inputs;
    std::vector<int64_t> new_counts, new_modes, new_columns;
    for (size_t p = 0; p < parts.size();) {
      size_t end = p + 1;
      while (end < parts.size() && SharesIds(node, parts[p], parts[end])) ++end;
      const Part& part = parts[p];
      const size_t from = inputs.size();
      inputs.insert(inputs.end(), node.inputs.begin() + static_cast<std::ptrdiff_t>(part.first),
                    node.inputs.begin() + static_cast<std::ptrdiff_t>(part.first + static_cast<size_t>(part.count)));
      if (end > p + 1) {
        std::vector<const Tensor*> tables;
        std::string name;
        for (size_t q = p; q < end; ++q) {
          const int table = node.inputs[parts[q].first];
          tables.push_back(&graph_.constants.at(table));
          name += (q == p ? "" : "+") + graph_.values[static_cast<size_t>(table)].name;
        }
        Tensor side_by_side = SideBySide(tables);
        for (size_t q = p; q < end; ++q) graph_.constants.erase(node.inputs[parts[q].first]);  // read nowhere else
        inputs[from] = graph_.AddConstant(name, std::move(side_by_side));
        merged += static_cast<int>(end - p - 1);
      }
      new_counts.push_back(part.count);
      new_modes.push_back(part.mode);
      new_columns.push_back(part.column);
      p = end;
    }
    if (merged == 0) return 0;
    node.inputs = std::move(inputs);
    node.attrs["parts"] = new_counts;
    node.attrs["modes"] = new_modes;
    if (!columns.empty()) node.attrs["columns"] = new_columns;
    return merged;
  }

  Graph& graph_;
  std::vector<int> uses_;
};

}  // namespace

int MergeTablesSharingIds(Graph& graph) { return TableMerger(graph).Run(); }

}  // namespace rankd
