// Load-time graph passes. Each rewrites the graph in place, keeps nodes in topological order and
// returns how many nodes it changed (for `rankd inspect`).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compile/plan.h"
#include "model/config.h"
#include "model/graph.h"
#include "rankd/status.h"

namespace rankd {

// ONNX Split as one Slice per output (split_lowering.cc), so that backends need no Split kernel.
// The sizes come from the constant `split` input or, without it, equal parts of the axis's length
// (opset 18's rounding up included), computed from shapes. Returns the number of Splits lowered.
StatusOr<int> LowerSplits(Graph& graph);

// ONNX Gelu (opset 20) as Mul, Erf (or Tanh for approximate="tanh") and Add (gelu_lowering.cc),
// which the element-wise fusion makes one kernel again. Returns the number of Gelus lowered.
StatusOr<int> LowerGelus(Graph& graph);
// The attribute the nodes of a lowered approximate="tanh" Gelu carry: the Gelu's output value.
inline constexpr char kLoweredGeluTanh[] = "rankd_gelu_tanh";

// Evaluates every node whose inputs are all constants (outputs up to `max_bytes` each) and
// replaces it with constants.
StatusOr<int> FoldConstants(Graph& graph, int64_t max_bytes = int64_t{64} << 20);

// Removes nodes none of whose outputs reach a graph output.
int RemoveDeadNodes(Graph& graph);

// Finds the PyTorch form of a ragged embedding bag,
//   ReduceSum(Gather(table, clamp(ids, 0)) * unsqueeze(cast(ids >= 0), -1), axes=[1])
// (with the usual variants: Clip/Max/Relu/Where for the clamp, Greater(ids, -1), Not(Equal/Less)
// for the mask, the mask on either side of Mul) and replaces it with EmbeddingBag(table, ids); the
// sum over the count of ids >= 0 (or its square root) with the mean (sqrtn) bag; and the masked max,
//   ReduceMax(Where(unsqueeze(ids >= 0, -1), Gather(table, clamp(ids, 0)), fill), axes=[1])
// (or Where(ids < 0, fill, rows): masked_fill), with fill -inf or the lowest float, with the max bag
// whose empty bags give the fill.
int FuseMaskedEmbeddingBags(Graph& graph);

// TensorFlow's SparseSegmentSum, Mean and SqrtN as tf2onnx writes them (TopK, Unique, ScatterND and
// a ReduceSum over a grid of the rows, the mean and sqrt-n divided by the counts; or, before 2021,
// a MatMul of the segment ids one-hot with the rows, reshaped back), over a sparse
// tensor made from a padded ids input (NonZero of ids != -1, GatherND) and rows gathered from a
// constant table, become EmbeddingBag(table, ids) with the sum, mean or sqrtn combiner; the same
// over rows multiplied by a sparse tensor of weights from a padded weights input (a weighted
// lookup, its mean and sqrt-n divided by segment sums of the weights), a weighted bag over the
// flattened ids and weights (segment_bags.cc). Returns the number recognised; a segment sum of
// that form over anything else is refused, naming its node.
StatusOr<int> FuseSegmentBags(Graph& graph);

// A layer norm written out op by op (PyTorch's export below opset 17: ReduceMean, Sub, Pow or Mul,
// ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add beta, over the last axis) becomes one
// LayerNormalization node (layernorm_fusion.cc). Returns the number recognised.
int FuseDecomposedLayerNorms(Graph& graph);

// Epilogues into products (gemm_epilogue_fusion.cc): MatMul(a, W) whose only reader adds a
// constant row b (W a constant FP32 matrix [K, H], b FP32 [H] or [1, ..., 1, H]) becomes
// MatMul(a, W, b[H]), a rankd extension of MatMul; a Gemm or MatMul whose only reader is a Relu
// takes activation="Relu", and one read only by a lowered approximate="tanh" Gelu (whose values
// nothing else reads) takes activation="GeluTanh". The Add, the Relu and the Gelu's nodes are
// removed.
int FuseGemmEpilogues(Graph& graph);

// Sibling products (sibling_products.cc): Gemms or MatMuls that read the same input by different
// constant FP32 weight matrices, with the same attributes (transB, a fused epilogue's activation)
// and each a constant bias row or none, become one product by the weights side by side (and the
// biases end to end), each member's output a Slice of its columns: MMoE's four experts' first
// layers one product. Only groups whose weights side by side hold at least `min_weights` values
// (Backend::SiblingProductsMinWeights). Returns the number of merged products.
int MergeSiblingProducts(Graph& graph, int64_t min_weights);

// The DIN first-layer split (concat_product_split.cc). MatMul(Concat(parts, last axis), W), W a
// constant matrix and the Concat read only there, becomes a sum of products of the distinct parts,
// each with its rows of W summed: a part that is the sum or difference of two others (DIN's q - k
// beside q and k) adds its rows to theirs, and a part that is Expand(x) over the leading dims is
// multiplied as x, the sum broadcasting it (a bias added to the product goes onto that small
// product). Done only where it saves work. `shapes` are the value shapes of a plan of the graph.
// Returns the number of products split.
int SplitConcatProducts(Graph& graph, const std::vector<PlanValue>& shapes);

// Add/Sub/Mul/Div of Expand(x, Shape(y)) and y read x instead: the broadcast gives the same
// elements without writing the expansion (DIN's q * k). Returns the number of operands rewired.
int ReadBroadcastsUnexpanded(Graph& graph);

// Add(Mul(a, b), c), the product read only there, all FP32 (as `shapes` say), becomes rankd's
// MulAdd(a, b, c) (muladd_fusion.cc). Returns the number of pairs fused.
int FuseMulAdd(Graph& graph, const std::vector<PlanValue>& shapes);

// MulAdd(m, P, c) (or MulAdd(P, m, c)) with P a Gemm or a MatMul by a constant matrix, read only
// there, and m, c and the result FP32 of one shape, becomes P with the multiply-add as its
// epilogue: P's inputs (input 2 omitted when it had none), then m and c, in the MulAdd's place
// (product_muladd_fusion.cc; the result is m * act(P + bias) + c). DCNv2's cross layers. Returns
// the number of MulAdds fused.
int FuseProductMulAdds(Graph& graph, const std::vector<PlanValue>& shapes);

// Concat(parts, axis 1 or -1) with EmbeddingBag outputs or column lookups (Gather(table,
// Gather(ids, c, axis=1)), an FP32 constant table) among its parts, each read only there, becomes
// ConcatEmbeddingBags (embedding_concat_fusion.cc): bags pooled, lookups and the other parts
// copied into their columns by one kernel. Returns the number of concatenations fused.
int FuseEmbeddingConcats(Graph& graph);

// Adjacent parts of a ConcatEmbeddingBags pooling or looking up the same ids (same mode and
// column), each from a constant table of the same rows and dtype read nowhere else, become one
// part over the tables side by side (table_merging.cc): the same result to the bit, the ids read
// once. The merged tables leave the graph's constants. Returns the number of tables merged into
// another.
int MergeTablesSharingIds(Graph& graph);

// Chains of FP32 element-wise ops (Add, Sub, Mul, Div, Pow, Max, Min, MulAdd, Clip and the
// unary float ops) become FusedElementwise nodes (elementwise_fusion.cc; the program format is in
// elementwise_program.h): an op joins its reader's group when its output has the reader group's
// shape and is read only inside the group. Scalar constants become immediates. `shapes` are the
// value shapes of a plan of the graph. Returns the number of fused nodes made.
int FuseElementwiseChains(Graph& graph, const std::vector<PlanValue>& shapes);

// DIN's attention unit (the split first layer, ReLU hidden layers, a one-wide last layer, the
// masked weighted sum of the keys over the sequence axis) becomes one TargetAttention node
// (attention_fusion.cc, model/ops/target_attention.h); after hoisting it reads the per-user
// keys, key projection and mask with the request index. `shapes` are the value shapes of a plan
// of the graph. Returns the number of attention units fused.
int FuseTargetAttention(Graph& graph, const std::vector<PlanValue>& shapes);

// Softmax attention (softmax_attention_fusion.cc): the scores Q·Kᵀ of several heads, one head or
// one query column, optionally scaled and masked by a Where, their softmax over the last axis and
// its weighted sum of the values (a MatMul, or Mul and ReduceSum), become one SoftmaxAttention node
// (model/ops/softmax_attention.h), the heads' reshapes and transposes included; after hoisting
// it reads the per-user keys, values and mask with the request index. `shapes` are the value
// shapes of a plan of the graph. Returns the number of attentions fused.
int FuseSoftmaxAttention(Graph& graph, const std::vector<PlanValue>& shapes);

// DLRM's dot interaction (dot_interaction_fusion.cc): the pairwise dot products of a row's
// feature vectors, MatMul(T, Transpose(T)) gathered at constant positions (flattened, or through
// torch.onnx's advanced indexing), become one DotInteraction node (model/ops/dot_interaction.h),
// and a Concat of a dense part before it joins the node. `shapes` are the value shapes of a plan
// of the graph. Returns the number of interactions fused.
int FuseDotInteractions(Graph& graph, const std::vector<PlanValue>& shapes);

// Keyed tables (keyed_tables.cc): each table `keyed` names (the config's tables.keyed) takes the
// rows and keys of its files and a default row after them, and its lookups (EmbeddingBag, row
// Gather) read their ids through a KeyedRows node (model/ops/keyed_rows.h; counter c for the c-th
// table in name order).
// Errors name the field: no such FP32 [rows, width] constant, a reader other than a lookup, the
// files' own errors, duplicate keys, negative keys where a bag reads the table. Returns the number
// of tables keyed.
StatusOr<int> KeyTables(Graph& graph, const std::map<std::string, KeyedTableConfig>& keyed);

// The KeyedRows nodes whose ids are graph inputs become one node, first in the graph, so that one
// kernel launch maps every table's keys (keyed_tables.cc). Run after hoisting, which reads each
// node's ids on their own side. Returns the number of nodes merged (0 when fewer than two).
int MergeKeyedRows(Graph& graph);

// Embedding tables in 16 bits (table_storage.cc): each FP32 constant read only as the table of
// EmbeddingBag nodes becomes `dtype` (BF16 or FP16; FP32 changes nothing), rounded to nearest
// even. Returns the number of tables converted.
int StoreTablesAs(Graph& graph, DType dtype);

// Turns each named rank-2 id input into a ragged pair "NAME.values" [total] + "NAME.offsets"
// [rows + 1], in place of the input in graph.inputs. EmbeddingBags reading it read the pair
// directly; any other reader gets RaggedToPadded(values, offsets), padded with -1. The k-th name
// gets ragged_index k. Where offsets_inputs[k] names a graph input (PyTorch's nn.EmbeddingBag: flat
// ids [n] and their bags' starts), the ids input is flat and that input goes too: the bags over
// Concat(starts, [n]) read the pair, a row Gather or Shape of the ids reads the values (a weighted
// bag's rows), and nothing else may read either input. Several inputs may name the same starts:
// ids and their per-sample weights (FP32, a value an id, read as the flat values by any reader).
// Where paired_with[k] names ragged ids (TensorFlow's weighted lookups: padded ids and weights,
// FuseSegmentBags' EmbeddingBag(table, Reshape(ids, [-1]), b * slots, Reshape(weights, [-1]))), the
// FP32 input k weights their slots: those bags read both inputs' values and the ids' offsets, and
// nothing else may read input k; such a bag over ragged ids whose weights are not paired is refused.
Status ApplyRaggedInputs(Graph& graph, const std::vector<std::string>& ragged_inputs,
                         const std::vector<std::string>& offsets_inputs = {},
                         const std::vector<std::string>& paired_with = {});

// BYTES inputs hashed by the model's backend (string_inputs.cc; InputConfig::HashedByBackend):
// graph input NAME, the ids, becomes NAME INT64 [rows, dims..., 2], the records of the request's
// strings (model/ops/hash_strings.h), and a HashStrings node first in the graph computes the ids
// under their new name "NAME.ids" for every reader. Returns the number of inputs rewritten.
StatusOr<int> HashStringsInGraph(Graph& graph, const std::vector<InputConfig>& inputs);

// What HoistUserSide did, for `rankd inspect`.
struct HoistReport {
  bool hoisted = false;
  std::string why_not;                // when not hoisted
  int user_nodes = 0;                 // nodes that run once per user
  int user_compute_nodes = 0;         // of those, the ones that compute (lookups, products, arithmetic)
  std::vector<std::string> gathered;  // the per-user values gathered to the candidates
};

// User-side hoisting (user_hoisting.cc): the nodes that read only user inputs (graph inputs
// `user_rows`, one row per user, and the (values, offsets) pairs `user_ragged`) and constants, and
// that are provably row-wise, run on one row per user; where a candidate node reads their results
// it reads Gather(result, request_index) instead, request_index being a new last graph input
// "rankd.request_index" (INT64 [candidates]: each candidate's user row). `shapes` are the value
// shapes of a plan of the graph built with user rows repeated to `plan_rows` candidates. When
// nothing worth hoisting is found the graph is left as it was and the report says why.
HoistReport HoistUserSide(Graph& graph, const std::vector<int>& user_rows,
                          const std::vector<std::pair<int, int>>& user_ragged, const std::vector<PlanValue>& shapes,
                          int64_t plan_rows);

}  // namespace rankd
