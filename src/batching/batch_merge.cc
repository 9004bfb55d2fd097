#include "batching/batch_merge.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/host_allocator.h"
#include "common/host_copies.h"

namespace rankd {

PreparedRequest MergedSizes(const std::vector<const PreparedRequest*>& parts) {
  RANKD_CHECK(!parts.empty());
  PreparedRequest merged;
  merged.ragged_max_lengths.assign(parts.front()->ragged_max_lengths.size(), 0);
  for (const PreparedRequest* p : parts) {
    merged.rows += p->rows;
    merged.users += p->users;
    merged.sequence_elements += p->sequence_elements;
    for (size_t r = 0; r < merged.ragged_max_lengths.size(); ++r) {
      merged.ragged_max_lengths[r] = std::max(merged.ragged_max_lengths[r], p->ragged_max_lengths[r]);
    }
  }
  return merged;
}

PreparedRequest MergeRequests(const std::vector<const PreparedRequest*>& parts,
                              const std::vector<GraphInputKind>& kinds, bool defer) {
  RequestTensorScope request_tensors;
  PreparedRequest merged = MergedSizes(parts);
  const PreparedRequest& first = *parts.front();
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    const Tensor& t0 = first.inputs[i];
    if (kinds[i].part == GraphInputKind::kOffsets) {
      Tensor offsets = Tensor::Zeros(DType::kI64, {(kinds[i].user ? merged.users : merged.rows) + 1});
      int64_t* out = offsets.data<int64_t>();
      int64_t row = 0, base = 0;
      for (const PreparedRequest* p : parts) {
        const Tensor& t = p->inputs[i];
        const int64_t* in = t.data<int64_t>();
        for (int64_t k = 1; k < t.dim(0); ++k) out[row + k] = base + in[k];
        row += t.dim(0) - 1;
        base += in[t.dim(0) - 1];
      }
      merged.inputs.push_back(std::move(offsets));
      continue;
    }
    if (kinds[i].part == GraphInputKind::kRequestIndex) {
      Tensor index = Tensor::Zeros(DType::kI64, {merged.rows});
      int64_t* out = index.data<int64_t>();
      int64_t users = 0;
      for (const PreparedRequest* p : parts) {
        const int64_t* in = p->inputs[i].data<int64_t>();
        for (int64_t k = 0; k < p->rows; ++k) *out++ = users + in[k];
        users += p->users;
      }
      merged.inputs.push_back(std::move(index));
      continue;
    }
    Shape shape = t0.shape();
    shape[0] = 0;
    for (const PreparedRequest* p : parts) shape[0] += p->inputs[i].dim(0);
    Tensor out = Tensor::Empty(t0.dtype(), shape);  // written in full below, or by its reader
    if (defer && kinds[i].part == GraphInputKind::kValues && GatherablePart(out) &&
        std::all_of(parts.begin(), parts.end(), [&](const PreparedRequest* p) {
          return p->inputs[i].bytes() == 0 || GatherablePart(p->inputs[i]);
        })) {
      std::vector<Tensor> pieces;
      for (const PreparedRequest* p : parts) pieces.push_back(p->inputs[i]);
      if (!merged.deferred) merged.deferred = std::make_shared<DeferredMerge>();
      merged.deferred->Add(out, std::move(pieces));
      merged.inputs.push_back(std::move(out));
      continue;
    }
    auto* dst = static_cast<uint8_t*>(out.raw());
    for (const PreparedRequest* p : parts) {
      const Tensor& t = p->inputs[i];
      if (t.bytes() > 0) std::memcpy(dst, t.raw(), t.bytes());
      dst += t.bytes();
      CountHostCopy(HostCopy::kMerge, t.bytes());
    }
    merged.inputs.push_back(std::move(out));
  }
  return merged;
}

Status CheckSliceable(const PreparedRequest& whole, const std::vector<GraphInputKind>& kinds) {
  if (kinds.size() != whole.inputs.size()) {
    return Internal(std::to_string(whole.inputs.size()) + " graph inputs for " + std::to_string(kinds.size()) +
                    " kinds: the request cannot be split");
  }
  std::vector<int64_t> values(whole.ragged_max_lengths.size(), -1);
  for (size_t i = 0; i < whole.inputs.size(); ++i) {
    if (kinds[i].part == GraphInputKind::kValues && !kinds[i].user) {
      const auto r = static_cast<size_t>(kinds[i].ragged);
      if (r >= values.size() || whole.inputs[i].rank() == 0) return Internal("ragged values without a ragged input");
      values[r] = values[r] < 0 ? whole.inputs[i].dim(0) : std::min(values[r], whole.inputs[i].dim(0));
    }
  }
  for (size_t i = 0; i < whole.inputs.size(); ++i) {
    const Tensor& t = whole.inputs[i];
    const GraphInputKind& kind = kinds[i];
    if (kind.user || kind.part == GraphInputKind::kValues) continue;
    const bool offsets = kind.part == GraphInputKind::kOffsets;
    const int64_t want = whole.rows + (offsets ? 1 : 0);
    bool fits = t.rank() >= 1 && t.dim(0) == want;
    if (fits && offsets) {
      const auto r = static_cast<size_t>(kind.ragged);
      const int64_t* o = t.data<int64_t>();
      fits = t.dtype() == DType::kI64 && r < values.size() && o[0] == 0 && o[whole.rows] <= values[r];
    }
    if (!fits) {
      return Internal("graph input " + std::to_string(i) + " has shape " + ShapeToString(t.shape()) + " for " +
                      std::to_string(whole.rows) + " rows: the request cannot be split by rows");
    }
  }
  return Status::Ok();
}

PreparedRequest SliceRequest(const PreparedRequest& whole, const std::vector<GraphInputKind>& kinds, int64_t begin,
                             int64_t count) {
  RANKD_CHECK(begin >= 0 && count > 0 && begin + count <= whole.rows);
  PreparedRequest part;
  part.rows = count;
  part.users = whole.users;
  part.deadline = whole.deadline;
  part.ragged_max_lengths = whole.ragged_max_lengths;
  // Per candidate ragged input, its values' first row for the part (set by its offsets).
  std::vector<std::pair<int64_t, int64_t>> values_rows(whole.ragged_max_lengths.size(), {0, -1});
  for (size_t i = 0; i < whole.inputs.size(); ++i) {
    if (kinds[i].part != GraphInputKind::kOffsets || kinds[i].user) continue;
    const int64_t* in = whole.inputs[i].data<int64_t>() + begin;
    Tensor offsets = Tensor::Empty(DType::kI64, {count + 1});
    int64_t* out = offsets.data<int64_t>();
    int64_t longest = 0;
    for (int64_t k = 0; k <= count; ++k) {
      out[k] = in[k] - in[0];
      if (k > 0) longest = std::max(longest, out[k] - out[k - 1]);
    }
    const auto r = static_cast<size_t>(kinds[i].ragged);
    part.ragged_max_lengths[r] = longest;
    values_rows[r] = {in[0], out[count]};
    part.owned.push_back(std::move(offsets));
  }
  size_t made = 0;
  for (size_t i = 0; i < whole.inputs.size(); ++i) {
    const Tensor& t = whole.inputs[i];
    const GraphInputKind& kind = kinds[i];
    if (kind.user) {
      part.inputs.push_back(t);
      if (kind.part == GraphInputKind::kValues) part.sequence_elements += t.dim(0);
    } else if (kind.part == GraphInputKind::kOffsets) {
      part.inputs.push_back(part.owned[made++]);
    } else if (kind.part == GraphInputKind::kValues) {
      const auto [first, n] = values_rows[static_cast<size_t>(kind.ragged)];
      part.inputs.push_back(t.Rows(first, n));
      part.sequence_elements += n;
    } else {  // dense rows and the candidates' user row indices
      part.inputs.push_back(t.Rows(begin, count));
    }
  }
  return part;
}

StatusOr<std::vector<std::vector<Tensor>>> SplitRows(const std::vector<Tensor>& outputs,
                                                     const std::vector<int64_t>& rows,
                                                     const std::vector<std::string>& output_names) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  std::vector<std::vector<Tensor>> split(rows.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& t = outputs[o];
    if (t.rank() == 0 || t.dim(0) != total) {
      return Internal("output '" + output_names[o] + "' has shape " + ShapeToString(t.shape()) + " for a batch of " +
                      std::to_string(total) + " rows: it is not one row per candidate, so the model cannot be batched");
    }
    // Each request's part views the batch's output (an owning tensor: the parts keep it alive
    // until the last answer is written); a view of memory the batch does not own is copied.
    int64_t begin = 0;
    for (size_t k = 0; k < rows.size(); ++k) {
      Tensor part = t.Rows(begin, rows[k]);
      split[k].push_back(t.owns() ? std::move(part) : part.Clone());
      begin += rows[k];
    }
  }
  return split;
}

Tensor RepeatRows(const Tensor& t, int64_t times) {
  Shape s = t.shape();
  s[0] *= times;
  Tensor out = Tensor::Zeros(t.dtype(), s);
  size_t bytes = t.bytes();
  for (int64_t i = 0; i < times; ++i) {
    if (bytes > 0) std::memcpy(static_cast<uint8_t*>(out.raw()) + static_cast<size_t>(i) * bytes, t.raw(), bytes);
  }
  return out;
}

bool OutputsAgree(const Tensor& a, const Tensor& b, double tolerance) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  auto close = [&](const auto* x, const auto* y) {
    for (int64_t i = 0; i < a.size(); ++i) {
      double u = static_cast<double>(x[i]), v = static_cast<double>(y[i]);
      if (!(std::fabs(u - v) <= tolerance * (1.0 + std::fabs(u)))) return false;
    }
    return true;
  };
  if (a.dtype() == DType::kF32) return close(a.data<float>(), b.data<float>());
  if (a.dtype() == DType::kF64) return close(a.data<double>(), b.data<double>());
  return a.bytes() == b.bytes() && (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

}  // namespace rankd
