// Shape buckets: a few fixed shapes that every request is padded up to (docs/buckets.md).
//
// A plan is built per input shape, and on a GPU each plan is captured as a CUDA graph; left
// alone, every new candidate count or sequence length would build (and capture) one more. So a
// request's rows are padded up to the smallest allowed batch size that holds them, and each ragged
// input's rows up to the smallest allowed length that holds its longest row: dense rows with
// zeros, ragged slots with -1 (empty slots, which embedding bags skip and models mask). CTR graphs
// are row-wise, so the padded rows never change the real ones; the model checks that at load and
// the outputs are cut back to the real rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/prepared_request.h"
#include "rankd/tensor.h"
#include "runtime/plan_runner.h"

namespace rankd {

struct BucketKey {
  int64_t rows = 0;
  std::vector<int64_t> lengths;          // per ragged input
  int64_t users = 0;                     // user rows of a hoisted model (0: none)
  std::string ToString() const;          // "rows=64 lengths=[8,20] users=1"
  std::vector<int64_t> Numbers() const;  // rows, users, then the lengths: a key that tells buckets apart
};

// Shape buckets and captured graphs at run time (metrics).
struct BucketCounters : CaptureCounters {  // the captures' (runtime/plan_runner.h), then the buckets'
  uint64_t real_rows = 0;                  // rows of bucketed executions ...
  uint64_t padded_rows = 0;                // ... and the rows they ran with
  uint64_t merges_deferred = 0;  // batches run as their requests: their bucket had no graph yet (merge_gate.h)
};

class ShapeBuckets {
 public:
  // `rows`: allowed batch sizes; `lengths[k]`: allowed lengths of ragged input k, or empty to
  // keep that input's rows at the request's own longest row (no length padding); `users`: allowed
  // user counts of a hoisted model (empty when it has no user rows); `own_length_if_idless[k]`:
  // input k keeps the request's own longest row when one of its rows has no id (a fully masked
  // softmax averages over the padded width, so only such rows depend on it).
  ShapeBuckets(std::vector<int64_t> rows, std::vector<std::vector<int64_t>> lengths, std::vector<int64_t> users = {},
               std::vector<bool> own_length_if_idless = {});
  // The allowed lengths of a ragged input: `configured` (powers of two when empty) cut at
  // `max_length`, which is always added so every valid row fits.
  static std::vector<int64_t> AllowedLengths(std::vector<int64_t> configured, int64_t max_length);
  // Eighth-of-an-octave steps up to `limit` (1, 2, 3, ..., 16, 18, 20, ..., 32, 36, ...; at most
  // 12.5% padding), and `limit` itself.
  static std::vector<int64_t> Geometric(int64_t limit);

  // The smallest bucket holding a request, or nullopt when its rows (or users) exceed the largest.
  // `idless_rows[k]` (when given): ragged input k has a row without an id (RowsWithoutIds).
  std::optional<BucketKey> Find(int64_t rows, const std::vector<int64_t>& ragged_max_lengths, int64_t users = 0,
                                const std::vector<bool>* idless_rows = nullptr) const;
  // The buckets captured at warm-up: the power-of-two row buckets up to `max_rows` (and the
  // largest), each with every length level (level j: each ragged input at its j-th power-of-two
  // allowed length, or its longest; inputs kept at their own lengths take level j's longest
  // length, up to their max_length in `max_lengths`), with one user when there are users. The
  // others are captured on first use.
  std::vector<BucketKey> WarmupKeys(int64_t max_rows, const std::vector<int64_t>& max_lengths) const;

  const std::vector<int64_t>& rows() const { return rows_; }
  const std::vector<std::vector<int64_t>>& lengths() const { return lengths_; }
  const std::vector<int64_t>& users() const { return users_; }
  // Per ragged input: whether a row without an id keeps it at its own length (constructor).
  const std::vector<bool>& own_length_if_idless() const { return own_length_if_idless_; }

 private:
  std::vector<int64_t> rows_;
  std::vector<std::vector<int64_t>> lengths_;
  std::vector<int64_t> users_;
  std::vector<bool> own_length_if_idless_;
};

// For each ragged input k with `which[k]`, whether one of its rows in `p` holds no id (is empty or
// only -1 slots); false for the others. `kinds` describes p's graph inputs.
std::vector<bool> RowsWithoutIds(const PreparedRequest& p, const std::vector<GraphInputKind>& kinds,
                                 const std::vector<bool>& which);
// The same for the batch MergeRequests would make of `parts`, from the parts themselves: a merged
// input has a row without an id where one of its parts has.
std::vector<bool> RowsWithoutIds(const std::vector<const PreparedRequest*>& parts,
                                 const std::vector<GraphInputKind>& kinds, const std::vector<bool>& which);

// `p` padded to `key` (key.rows >= p.rows, key.users >= p.users, each key length >= that input's
// longest row): dense inputs get zero rows; each ragged input gets key.lengths[k] slots per row
// in all, its ids packed first and -1 after, and offsets whose padded rows are empty; padded
// candidates belong to user 0. `kinds` describes each graph input. Inputs already in the bucket's
// shape are viewed, not copied, so the result may view `p`'s tensors. With `ids_unpadded` (for an
// executor that FillsRaggedTails) each ragged input's ids are viewed as they are, without the -1
// slots after them.
PreparedRequest PadToBucket(const PreparedRequest& p, const BucketKey& key, const std::vector<GraphInputKind>& kinds,
                            bool ids_unpadded = false);

// Whether PadToBucket(p, key, kinds, ids_unpadded) would only view each of p's inputs whole, as
// it is: then p's inputs run as the bucket's, and no padded copy of the request is made.
bool FitsBucket(const PreparedRequest& p, const BucketKey& key, const std::vector<GraphInputKind>& kinds,
                bool ids_unpadded = false);

// The first `rows` rows of each output (the real ones of a padded batch), as views sharing its buffer.
std::vector<Tensor> TakeRows(std::vector<Tensor> outputs, int64_t rows);

}  // namespace rankd
