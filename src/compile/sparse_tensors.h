// TensorFlow's sparse tensors as tf2onnx writes them: which padded ids input a pair of (indices,
// values) values holds, read back through the ops that made them.
//
// A feature column makes its sparse tensor from a padded ids input as TensorFlow's
// `to_sparse_input` does (the entries that are not -1):
//
//   mask    = Not(Equal(ids, -1))          (or Greater(ids, -1), GreaterOrEqual(ids, 0))
//   indices = Transpose(NonZero(mask))     [T, 2]: (row, slot) of each present id
//   values  = GatherND(ids, indices)       [T]
//
// and `safe_embedding_lookup_sparse` (an `embedding_column`'s lookup) then passes it through
//
//   SparseReshape to [rows, slots]         the same shape: indices Div(Mod(Unsqueeze(MatMul(indices,
//                                          strides)), [rows * slots, slots]), new strides)
//   sparse_retain of the values >= 0       Gather(indices, r), Gather(values, r) with
//                                          r = Reshape(Transpose(NonZero(values >= 0)), [-1])
//   SparseFillEmptyRows                    Concat(indices, Pad(Unsqueeze(Compress(Range(0, rows),
//                                          empty)))), Concat(values, Expand(default, Shape(...)));
//                                          empty = ScatterElements(true [rows], Unique(column 0),
//                                          false): each row without an id (tf2onnx's handler)
//
// each of which keeps (or, for the fill, adds one default id to the empty rows of) the padded ids'
// entries that are not negative. Nothing here changes the graph.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "model/graph.h"

namespace rankd {

class SparseTensorMatcher {
 public:
  explicit SparseTensorMatcher(const Graph& g) : g_(g), producer_(g.Producers()) {}

  // What a sparse tensor holds: the entries >= 0 of padded ids input `ids` (a value), and where
  // SparseFillEmptyRows added a default id to each row without one, its empty-row indicator
  // (`empty_rows`, a [rows] bool value; -1 for none).
  // With weights (a weighted lookup's `sp_weights`), the padded weights input whose entries at
  // the ids' they hold (`weights`), and whether a retain dropped the weights <= 0 with their ids
  // (`weights_pruned`: safe_embedding_lookup_sparse's _prune_invalid_weights, or TensorFlow 1's
  // _prune_invalid_ids, which asks for both).
  struct Sparse {
    int ids = -1;
    int empty_rows = -1;
    int weights = -1;
    bool weights_pruned = false;
  };
  // The sparse tensor whose indices and values `indices` and `values` are, or nullopt; with
  // `weights` (>= 0) the weights' sparse values beside them, which every step the ids pass keeps
  // in step (retained by the same mask, filled by weight 1 where the ids are filled), made from a
  // padded weights input at the ids' entries (GatherND at the ids' indices, or at the weights' own
  // to_sparse_input: Transpose(NonZero(Not(Equal(weights, 0))))).
  std::optional<Sparse> SparseTensorOf(int indices, int values, int weights = -1) const;

  // The node writing `value` if it is `op` (any op when null), else nullptr.
  const Node* Producer(int value, const char* op = nullptr) const;
  // Which output of its producer `value` is (-1 for none).
  int OutputIndex(int value) const;
  // `value` past any Casts.
  int Uncast(int value) const;
  // A node's integer list from its constant input `i`, or from attribute `attr` where it has no
  // such input (opsets before 13 give axes and the like as attributes).
  std::optional<std::vector<int64_t>> Ints(const Node& n, int i, const char* attr) const;
  bool IsScalar(int value, double want) const { return g_.ScalarConstant(value) == want; }
  const Graph& graph() const { return g_; }

  // The value whose column 0 `segment` is (Slice + Squeeze, or Gather(., 0, axis 1); -1 for none).
  int ColumnZeroOf(int segment) const;
  // Whether `value` (a scalar or a one-element vector) counts the rows of `ids`: the first entry of
  // its shape (Gather(., 0), Slice(., [0], [1]) or their ReduceProd) past Casts, Squeezes,
  // Unsqueezes and Reshapes, read from Shape(ids) or from SparseReshape's new shape that keeps it.
  bool CountsRowsOf(int value, int ids) const;
  // Whether `value` is all zeros: ConstantOfShape of 0, or a zero constant.
  bool IsZeros(int value) const;

 private:
  // The padded ids whose present entries `mask` marks.
  int MaskedIds(int mask) const;
  // Whether `mask` marks the entries >= 0 of `values`.
  bool MarksNonNegative(int mask, int values) const;
  // Whether `mask` retains ids `values` and their weights `weights` as safe_embedding_lookup_sparse
  // does: the ids >= 0 And ones_like(weights), or And the weights > 0 (`pruned`), or the weights > 0
  // alone (`pruned`).
  bool RetainsWeighted(int mask, int values, int weights, bool& pruned) const;
  // Whether `mask` is Greater(`weights`, 0).
  bool MarksPositive(int mask, int weights) const;
  // The padded weights input `weights` (the weights' sparse values) is gathered from at `indices`,
  // the ids' to_sparse_input indices, or -1.
  int PaddedWeightsOf(int weights, int indices) const;
  // The value sliced to its column 0 as a [T, 1] matrix by node `slice` (-1 for none).
  int SlicedColumnZero(const Node* slice) const;
  // The shape vector whose first entry counts rows: true for one whose entry 0 counts `ids`' rows.
  bool FirstEntryCountsRowsOf(int shape, int ids) const;
  // The shape vector `strides` is the row-major strides of (ReduceProd over Where(lower triangle,
  // 1, shape)), for a shape of two entries; -1 for none.
  int StridesOf(int strides) const;
  // The indices SparseReshape writes from `indices` when it keeps their shape (-1 for none).
  int UnreshapedIndices(int indices) const;
  // Whether ConstantOfShape node `n` fills with `value`.
  bool Fills(const Node& n, double value) const;

  const Graph& g_;
  std::vector<int> producer_;
};

}  // namespace rankd
