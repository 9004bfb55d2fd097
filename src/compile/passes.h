// Load-time graph passes. Each rewrites the graph in place, keeps nodes in topological order and
// returns how many nodes it changed (for `rankd inspect`).
#pragma once

#include <string>
#include <vector>

#include "rankd/status.h"
#include "model/graph.h"

namespace rankd {

// Evaluates every node whose inputs are all constants (outputs up to `max_bytes` each) and
// replaces it with constants.
StatusOr<int> FoldConstants(Graph& graph, int64_t max_bytes = int64_t{64} << 20);

// Removes nodes none of whose outputs reach a graph output.
int RemoveDeadNodes(Graph& graph);

// Finds the PyTorch form of a ragged embedding bag,
//   ReduceSum(Gather(table, clamp(ids, 0)) * unsqueeze(cast(ids >= 0), -1), axes=[1])
// (with the usual variants: Clip/Max/Relu/Where for the clamp, Greater(ids, -1), Not(Equal/Less)
// for the mask, the mask on either side of Mul) and replaces it with EmbeddingBag(table, ids).
int FuseMaskedEmbeddingBags(Graph& graph);

// Gemm whose only reader is a Relu becomes one Gemm with activation="Relu" (the Relu is removed).
int FuseGemmActivations(Graph& graph);

// Turns each named rank-2 id input into a ragged pair "NAME.values" [total] + "NAME.offsets"
// [rows + 1], in place of the input in graph.inputs. EmbeddingBags reading it read the pair
// directly; any other reader gets RaggedToPadded(values, offsets), padded with -1. The k-th name
// gets ragged_index k.
Status ApplyRaggedInputs(Graph& graph, const std::vector<std::string>& ragged_inputs);

}  // namespace rankd
