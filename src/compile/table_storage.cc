// Embedding tables stored in 16 bits (the config's `tables: {dtype: BF16}`): each FP32 constant
// read only as the table of EmbeddingBag nodes is rounded to BF16 or FP16 (to nearest even) once at
// load. The tables take half the memory and a lookup reads half the bytes; bags still pool in FP32.
#include "common/parallel.h"
#include "compile/passes.h"

namespace rankd {

int StoreTablesAs(Graph& graph, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return 0;
  std::vector<bool> table_only(graph.values.size(), true);
  std::vector<bool> bag_table(graph.values.size(), false);
  for (const Node& n : graph.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      int v = n.inputs[i];
      if (v < 0) continue;
      if (n.op == "EmbeddingBag" && i == 0)
        bag_table[static_cast<size_t>(v)] = true;
      else
        table_only[static_cast<size_t>(v)] = false;
    }
  }
  for (int out : graph.outputs) table_only[static_cast<size_t>(out)] = false;
  int stored = 0;
  for (auto& [id, table] : graph.constants) {
    size_t v = static_cast<size_t>(id);
    if (!bag_table[v] || !table_only[v] || table.dtype() != DType::kF32) continue;
    Tensor narrow = Tensor::Empty(dtype, table.shape());
    const float* from = table.data<float>();
    auto* to = narrow.data<uint16_t>();
    ParallelFor(table.size(), 1, [&](int64_t first, int64_t last) {
      if (dtype == DType::kBF16) {
        for (int64_t i = first; i < last; ++i) to[i] = FloatToBF16(from[i]);
      } else {
        for (int64_t i = first; i < last; ++i) to[i] = FloatToHalf(from[i]);
      }
    });
    table = std::move(narrow);
    graph.values[v].dtype = dtype;
    ++stored;
  }
  return stored;
}

}  // namespace rankd
