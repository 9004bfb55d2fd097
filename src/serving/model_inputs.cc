// Model: requests validated and turned into graph inputs (dense views, ragged values and offsets,
// user rows per user or repeated), and the example requests warm-up and checks use.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>

#include "common/helping_pool.h"
#include "common/host_allocator.h"
#include "common/parallel.h"
#include "runtime/op_profile.h"
#include "serving/model.h"
#include "serving/string_ids.h"

namespace rankd {

namespace {

// Strings for a BYTES input of an example request: rows of `length` zeros ("0,0,0") when split,
// else empty strings; they give valid ids whatever the config hashes or parses.
PackedStrings ExampleStrings(const InputConfig& in, int64_t rows, int64_t ragged_length) {
  PackedStrings s;
  const int64_t len = std::min(ragged_length, in.max_length);
  int64_t count = rows;
  if (!in.strings.split.empty()) {
    std::string row;
    for (int64_t i = 0; i < len; ++i) row += i ? in.strings.split + "0" : "0";
    for (int64_t r = 0; r < rows; ++r) s.Append(row);
    s.shape = {rows};
    return s;
  }
  if (in.ragged) {
    count = rows * len;
    s.shape = {count};
  } else {
    s.shape = {rows};
    for (int64_t d : in.dims) s.shape.push_back(d < 0 ? 1 : d);
    count = NumElements(s.shape);
  }
  for (int64_t i = 0; i < count; ++i) s.Append("");
  return s;
}

}  // namespace

InferRequest Model::ExampleRequest(int64_t rows, int64_t ragged_length) const {
  InferRequest r;
  r.id = "warm-up";
  for (const InputConfig& in : config_.inputs) {
    InferInput x;
    x.name = in.name;
    int64_t n = in.scope == InputScope::kUser ? 1 : rows;
    if (in.strings.bytes) {
      x.strings = ExampleStrings(in, n, ragged_length);
      if (in.ragged && in.strings.split.empty())
        x.lengths.assign(static_cast<size_t>(n), std::min(ragged_length, in.max_length));
    } else if (in.ragged) {
      int64_t len = std::min(ragged_length, in.max_length);
      x.data = Tensor::Zeros(in.dtype, {n * len});
      x.lengths.assign(static_cast<size_t>(n), len);
    } else {
      Shape s{n};
      for (int64_t d : in.dims) s.push_back(d < 0 ? 1 : d);
      x.data = Tensor::Zeros(in.dtype, s);
    }
    r.inputs.push_back(std::move(x));
  }
  return r;
}

void RandomizeFloats(InferRequest& request, uint32_t seed) {
  for (InferInput& in : request.inputs) {
    if (in.data.dtype() != DType::kF32) continue;
    for (int64_t i = 0; i < in.data.size(); ++i) {
      seed = seed * 1664525u + 1013904223u;
      in.data.data<float>()[i] = static_cast<float>(seed >> 8) / static_cast<float>(1 << 24);
    }
  }
}

namespace {

// Whether any float's exponent bits are all set (infinite or NaN), as an integer test: the loop
// then vectorises (std::isfinite did not: about 0.5 ns a value, 60 µs for W1's dense input at
// 8,192 pairs on a 2-core host). It runs on the calling thread: checking W1's 426k dense floats at
// 32,768 pairs in chunks on the pool's threads took the request's graph inputs from 0.48–0.53 to
// 1.09–1.22 ms on the H200 host (docs/log/benchmarks.md).
template <typename Float, typename Bits, Bits kExponent>
bool AnyNotFinite(const Float* p, int64_t n) {
  Bits bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= static_cast<Bits>((std::bit_cast<Bits>(p[i]) & kExponent) == kExponent);
  return bad != 0;
}

Status CheckFinite(const InferInput& in) {
  const Tensor& t = in.data;
  auto report = [&](const auto* p) -> Status {
    for (int64_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(p[i])) {
        return InvalidArgument("input '" + in.name + "' holds a NaN or infinite value at element " + std::to_string(i));
      }
    }
    return Status::Ok();
  };
  if (t.dtype() == DType::kF32 && AnyNotFinite<float, uint32_t, 0x7f800000u>(t.data<float>(), t.size())) {
    return report(t.data<float>());
  }
  if (t.dtype() == DType::kF64 && AnyNotFinite<double, uint64_t, 0x7ff0000000000000u>(t.data<double>(), t.size())) {
    return report(t.data<double>());
  }
  return Status::Ok();
}

// The config input whose lengths an input named `name` carries (NAME + kLengthsTensorSuffix),
// or nullopt when `name` is no such name.
std::optional<size_t> LengthsTensorOf(const ModelConfig& config, std::string_view name) {
  if (!name.ends_with(kLengthsTensorSuffix)) return std::nullopt;
  name.remove_suffix(kLengthsTensorSuffix.size());
  for (size_t c = 0; c < config.inputs.size(); ++c) {
    if (config.inputs[c].name == name) return c;
  }
  return std::nullopt;
}

// `values`, a ragged input sent flat without lengths, with the lengths its NAME.lengths tensor
// carries, and those summed as a parser sums a lengths parameter (common/parsed_request.h). The
// values are viewed (a BYTES input's strings copied).
Status TakeLengthsTensor(const InputConfig& cfg, const InferInput& values, const InferInput& lengths, InferInput& out,
                         LengthSums& sums) {
  const Tensor& t = lengths.data;
  if (!cfg.ragged) {
    return InvalidArgument("input '" + cfg.name + "' is not ragged: send it without '" + lengths.name + "'");
  }
  if (lengths.is_bytes() || (t.dtype() != DType::kI32 && t.dtype() != DType::kI64)) {
    return InvalidArgument("input '" + lengths.name + "' must be INT32 or INT64, got " +
                           (lengths.is_bytes() ? "BYTES" : DTypeName(t.dtype())));
  }
  if (t.rank() != 1 || !lengths.lengths.empty()) {
    return InvalidArgument("input '" + lengths.name + "' must have shape [rows] (one length a row), got " +
                           ShapeToString(t.shape()) + (lengths.lengths.empty() ? "" : " with lengths"));
  }
  if (!values.lengths.empty()) {
    return InvalidArgument("ragged input '" + cfg.name + "' already has lengths (a parameter or nested rows): send '" +
                           lengths.name + "' only with flat values");
  }
  if ((values.is_bytes() ? values.strings.shape.size() : static_cast<size_t>(values.data.rank())) != 1) {
    return InvalidArgument("ragged input '" + cfg.name + "' with lengths must be flat values");
  }
  out.name = values.name;
  out.data = values.data;
  if (values.is_bytes()) out.strings = values.strings;
  const auto count = static_cast<size_t>(t.size());
  sums = t.dtype() == DType::kI32 ? SumLengths(std::span(t.data<int32_t>(), count), out.lengths)
                                  : SumLengths(std::span(t.data<int64_t>(), count), out.lengths);
  return Status::Ok();
}

}  // namespace

Status Model::Admit(const InferRequest& request, std::span<const LengthSums> length_sums,
                    PreparedRequest& prepared) const {
  // Every replica's device poisoned: refused at once (503), unless the CPU takes the model's runs.
  RANKD_RETURN_IF_ERROR(DeviceServable());
  for (const std::string& out : request.outputs) {
    if (!std::any_of(config_.outputs.begin(), config_.outputs.end(),
                     [&](const OutputConfig& o) { return o.name == out; })) {
      return InvalidArgument("unknown output '" + out + "' for model '" + name() + "'");
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  RANKD_RETURN_IF_ERROR(BuildGraphInputs(request, prepared, length_sums));
  if (OpProfile::phases()) OpProfile::RecordSince("(request turned into graph inputs)", t0);
  return Status::Ok();
}

StatusOr<PreparedRequest> Model::PrepareForInspection(const InferRequest& request) const {
  PreparedRequest prepared;
  RANKD_RETURN_IF_ERROR(Admit(request, {}, prepared));
  return prepared;
}

Status Model::BuildGraphInputs(const InferRequest& request, PreparedRequest& prepared,
                               std::span<const LengthSums> length_sums) const {
  RequestTensorScope request_tensors;  // the offsets and repeated rows, pinned where a GPU reads them
  std::vector<Tensor>& inputs = prepared.inputs;
  prepared.owned.clear();
  std::vector<int64_t>& ragged_max_lengths = prepared.ragged_max_lengths;
  std::vector<const InferInput*> given(config_.inputs.size(), nullptr);
  std::vector<const LengthSums*> summed(config_.inputs.size(), nullptr);          // by the parser, as the lengths are
  std::vector<const InferInput*> lengths_tensor(config_.inputs.size(), nullptr);  // NAME.lengths, by NAME
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const InferInput& in = request.inputs[i];
    size_t c = i;  // clients mostly send the inputs in the config's order: no search then
    if (c >= config_.inputs.size() || config_.inputs[c].name != in.name) {
      auto it = std::find_if(config_.inputs.begin(), config_.inputs.end(),
                             [&](const InputConfig& x) { return x.name == in.name; });
      if (it == config_.inputs.end()) {
        std::optional<size_t> owner = LengthsTensorOf(config_, in.name);
        if (!owner) return InvalidArgument("unknown input '" + in.name + "' for model '" + name() + "'");
        if (lengths_tensor[*owner]) return InvalidArgument("input '" + in.name + "' is given twice");
        lengths_tensor[*owner] = &in;
        continue;
      }
      c = static_cast<size_t>(it - config_.inputs.begin());
    }
    if (given[c]) return InvalidArgument("input '" + in.name + "' is given twice");
    given[c] = &in;
    if (i < length_sums.size()) {
      const LengthSums& s = length_sums[i];
      if (s.offsets.defined() && s.offsets.dtype() == DType::kI64 &&
          s.offsets.size() == static_cast<int64_t>(in.lengths.size()) + 1) {
        summed[c] = &s;
      }
    }
  }
  // Lengths sent as tensors join their values, as if sent as the values' lengths parameter.
  std::vector<InferInput> converted;  // pointed into by `given`: never grows past its reserve
  converted.reserve(2 * config_.inputs.size());
  std::vector<LengthSums> tensor_sums;
  tensor_sums.reserve(config_.inputs.size());
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    if (!lengths_tensor[c]) continue;
    if (!given[c]) return InvalidArgument("input '" + config_.inputs[c].name + "' is missing");
    RANKD_RETURN_IF_ERROR(TakeLengthsTensor(config_.inputs[c], *given[c], *lengths_tensor[c], converted.emplace_back(),
                                            tensor_sums.emplace_back()));
    given[c] = &converted.back();
    summed[c] = &tensor_sums.back();
    prepared.owned.push_back(tensor_sums.back().offsets);  // the offsets' graph input views them
  }
  // Strings become their ids first (serving/string_ids.h); the graph inputs view them.
  const bool time_strings = OpProfile::phases() && std::any_of(config_.inputs.begin(), config_.inputs.end(),
                                                               [](const InputConfig& c) { return c.strings.bytes; });
  PhaseTimer strings_timer(time_strings ? "(of which: strings into ids)" : nullptr);
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    const InputConfig& cfg = config_.inputs[c];
    const InferInput* in = given[c];
    if (!in) continue;  // reported below
    if (in->is_bytes() != cfg.strings.bytes) {
      return InvalidArgument("input '" + cfg.name + "' must be " +
                             (cfg.strings.bytes ? "BYTES" : DTypeName(cfg.dtype)) + ", got " +
                             (in->is_bytes() ? "BYTES" : DTypeName(in->data.dtype())));
    }
    if (!cfg.strings.bytes) continue;
    if (cfg.HashedByBackend()) {  // the strings' records: the plan's first step hashes them
      InferInput records;
      records.name = in->name;
      Tensor bytes;
      RANKD_ASSIGN_OR_RETURN(records.data,
                             StringRecords(cfg, *in, backend().device_kind() != DeviceKind::kHost, bytes));
      if (bytes.defined()) prepared.owned.push_back(std::move(bytes));
      converted.push_back(std::move(records));
    } else {
      RANKD_ASSIGN_OR_RETURN(InferInput ids, StringsToIds(cfg, *in));
      converted.push_back(std::move(ids));
    }
    prepared.owned.push_back(converted.back().data);
    given[c] = &converted.back();
    summed[c] = nullptr;
  }
  strings_timer.Stop();
  // Rows per input; the candidate count N comes from item-scope inputs.
  std::vector<int64_t> rows(config_.inputs.size());
  std::vector<size_t> with_lengths;  // ragged inputs sent as flat values with lengths
  int64_t n = -1;
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    const InputConfig& cfg = config_.inputs[c];
    const InferInput* in = given[c];
    if (!in) return InvalidArgument("input '" + cfg.name + "' is missing");
    const Tensor& t = in->data;
    const bool records = cfg.HashedByBackend();  // checked by StringRecords, shaped as the strings
    if (!records && t.dtype() != cfg.dtype) {
      return InvalidArgument("input '" + cfg.name + "' must be " + DTypeName(cfg.dtype) + ", got " +
                             DTypeName(t.dtype()));
    }
    RANKD_RETURN_IF_ERROR(CheckFinite(*in));
    if (cfg.ragged) {
      if (cfg.dtype == DType::kF32 && t.rank() != 1) {
        return InvalidArgument("ragged input '" + cfg.name + "' (a value an id) must be flat values with lengths");
      }
      if (!in->lengths.empty() || t.rank() == 1) {
        if (t.rank() != 1) return InvalidArgument("ragged input '" + cfg.name + "' with lengths must be flat values");
        with_lengths.push_back(c);  // lengths checked below, on several threads
        rows[c] = static_cast<int64_t>(in->lengths.size());
      } else {
        if (t.rank() != 2)
          return InvalidArgument("ragged input '" + cfg.name + "' must be [rows, length] or flat values with lengths");
        if (t.dim(1) > cfg.max_length)
          return InvalidArgument("ragged input '" + cfg.name + "' rows exceed max_length " +
                                 std::to_string(cfg.max_length));
        rows[c] = t.dim(0);
      }
    } else {
      std::span<const int64_t> shape(t.shape());  // a record's width is not the strings' shape
      if (records) shape = shape.first(shape.size() - 1);
      const auto sent = [&] { return ShapeToString(Shape(shape.begin(), shape.end())); };
      if (shape.size() != cfg.dims.size() + 1) {
        return InvalidArgument("input '" + cfg.name + "' must have shape [rows" +
                               std::string(cfg.dims.empty() ? "" : ", ") + ShapeToString(cfg.dims).substr(1) +
                               ", got " + sent());
      }
      for (size_t d = 0; d < cfg.dims.size(); ++d) {
        if (cfg.dims[d] >= 0 && shape[d + 1] != cfg.dims[d]) {
          return InvalidArgument("input '" + cfg.name + "' must have shape [rows, " +
                                 ShapeToString(cfg.dims).substr(1) + ", got " + sent());
        }
      }
      rows[c] = shape[0];
    }
    if (cfg.scope == InputScope::kItem) {
      if (n >= 0 && rows[c] != n) {
        return InvalidArgument("input '" + cfg.name + "' has " + std::to_string(rows[c]) + " rows; other inputs have " +
                               std::to_string(n));
      }
      n = rows[c];
    }
  }
  // Ragged inputs sharing their bags' starts (ids and their per-sample weights), or values paired
  // with ids, have equal lengths.
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    const InputConfig& cfg = config_.inputs[c];
    if (!cfg.ragged || (cfg.offsets_input.empty() && cfg.paired_with.empty())) continue;
    for (size_t d = 0; d < config_.inputs.size(); ++d) {
      const InputConfig& other = config_.inputs[d];
      const bool sharing =
          cfg.paired_with.empty() ? d < c && other.offsets_input == cfg.offsets_input : other.name == cfg.paired_with;
      if (!other.ragged || !sharing) continue;
      const InferInput& a = *given[d];
      const InferInput& b = *given[c];
      const bool same =
          a.lengths.empty() ? b.lengths.empty() && a.data.shape() == b.data.shape() : a.lengths == b.lengths;
      if (!same) {
        return InvalidArgument("ragged inputs '" + other.name + "' and '" + cfg.name + "' " +
                               (cfg.paired_with.empty() ? "share their bags' starts ('" + cfg.offsets_input + "')"
                                                        : std::string("are paired (a value an id, both sent as "
                                                                      "flat values with lengths)")) +
                               ": their lengths must be equal");
      }
      break;
    }
  }
  if (n < 0) n = rows.empty() ? 0 : rows[0];  // only user-scope inputs
  if (n == 0) return InvalidArgument("the request has no rows (empty candidate list)");
  int64_t limit = config_.max_batch_size > 0 ? config_.max_batch_size : options_.max_rows;
  if (n > limit) {
    return ResourceExhausted("the request has " + std::to_string(n) + " rows; the limit is " + std::to_string(limit));
  }
  // Users: one, or one per candidate when any user input has a row per candidate.
  int64_t users = 1;
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    if (config_.inputs[c].scope == InputScope::kUser && rows[c] != 1 && rows[c] != n) {
      return InvalidArgument("user input '" + config_.inputs[c].name +
                             "' must have 1 row (or one per candidate), got " + std::to_string(rows[c]));
    }
    if (config_.inputs[c].scope == InputScope::kUser) users = std::max(users, rows[c]);
  }
  // Dense tensors and ragged (values, offsets). User rows go once per user to a hoisted graph
  // (with each candidate's user row), else repeated to every candidate.
  prepared.rows = n;
  prepared.users = compiled_->hoisted() ? users : 0;
  prepared.sequence_elements = 0;
  inputs.clear();
  inputs.reserve(compiled_->bindings().size());  // Tensors hold their shape on the heap: no copies on growth
  ragged_max_lengths.assign(compiled_->ragged_names().size(), 0);
  // Ragged offsets and the checks of lengths (each in range, adding up to the values sent), one
  // pass over each input's lengths, inputs on several threads (W1 at 32,768 pairs: 26 inputs of
  // 32,768 rows). The first failing input in config order is reported.
  constexpr size_t kNoInput = ~size_t{0};
  struct LengthsJob {
    size_t config;
    bool padded;
    int64_t rows;  // of the graph input
    int ragged;    // index into ragged_max_lengths
    size_t input;  // the offsets' graph input; kNoInput: only check the lengths
    Status status;
    const LengthSums* summed = nullptr;  // the parser's sums: its offsets are the graph input
  };
  std::vector<LengthsJob> jobs;
  for (const InputBinding& b : compiled_->bindings()) {
    if (b.kind.part == GraphInputKind::kRequestIndex) {
      Tensor index = Tensor::Zeros(DType::kI64, {n});
      if (users > 1) std::iota(index.data<int64_t>(), index.data<int64_t>() + n, int64_t{0});
      inputs.push_back(std::move(index));
      continue;
    }
    const InferInput& in = *given[b.config_index];
    int64_t want = b.kind.user ? users : n;  // rows this graph input has
    int64_t repeat = rows[b.config_index] == want ? 1 : want;
    if (b.kind.part == GraphInputKind::kDense) {
      inputs.push_back(repeat == 1 ? in.data.ViewBytes(in.data.dtype(), in.data.shape()) : RepeatRows(in.data, repeat));
      continue;
    }
    // Ragged: lengths per row (flat values with lengths, or the padded form's row width),
    // repeated when one user row goes to every candidate.
    bool padded = in.lengths.empty() && in.data.rank() == 2;
    if (b.kind.part == GraphInputKind::kValues) {
      Tensor values = in.data.ViewBytes(in.data.dtype(), {in.data.size()});
      inputs.push_back(repeat == 1 ? std::move(values) : RepeatRows(values, repeat));
      prepared.sequence_elements += inputs.back().size();
    } else {
      const LengthSums* sums = padded || repeat != 1 ? nullptr : summed[b.config_index];
      jobs.push_back({b.config_index, padded, want, b.kind.ragged, inputs.size(), Status::Ok(), sums});
      inputs.push_back(sums ? sums->offsets.ViewBytes(DType::kI64, {want + 1})
                            : Tensor::Empty(DType::kI64, {want + 1}));
    }
  }
  for (size_t c : with_lengths) {
    if (std::none_of(jobs.begin(), jobs.end(), [&](const LengthsJob& j) { return j.config == c; })) {
      jobs.push_back({c, false, 0, -1, kNoInput, Status::Ok()});
    }
  }
  auto lengths = [&](int64_t first, int64_t last) {
    for (int64_t j = first; j < last; ++j) {
      LengthsJob& job = jobs[static_cast<size_t>(j)];
      const InputConfig& cfg = config_.inputs[job.config];
      const InferInput& in = *given[job.config];
      int64_t* o = job.input == kNoInput || job.summed ? nullptr : inputs[job.input].data<int64_t>();
      int64_t max_len = 0;
      if (job.padded) {
        max_len = job.rows > 0 ? in.data.dim(1) : 0;
        for (int64_t r = 0; r <= job.rows; ++r) o[r] = r * max_len;
      } else {
        const std::vector<int64_t>& lengths = in.lengths;
        const int64_t limit = cfg.max_length, count = static_cast<int64_t>(lengths.size());
        bool in_range = true;
        int64_t total = 0;
        if (job.summed) {  // summed by the parser: checked, not passed over again
          in_range = job.summed->min_length >= 0 && job.summed->max_length <= limit;
          max_len = job.summed->max_length;
          total = job.summed->offsets.data<int64_t>()[count];
        } else if (o && count != job.rows) {  // the one user row, repeated to every row
          max_len = job.rows > 0 ? lengths[0] : 0;
          in_range = lengths[0] >= 0 && lengths[0] <= limit;
          total = lengths[0];
          for (int64_t r = 0; r <= job.rows; ++r) o[r] = r * lengths[0];
        } else {
          for (int64_t r = 0; r < count; ++r) {  // no branch on a bad length: vectorises
            int64_t len = lengths[static_cast<size_t>(r)];
            in_range &= len >= 0 && len <= limit;
            max_len = std::max(max_len, len);
            total += len;
            if (o) o[r + 1] = total;
          }
          if (o) o[0] = 0;
        }
        if (!in_range) {
          int64_t len = *std::find_if(lengths.begin(), lengths.end(), [&](int64_t l) { return l < 0 || l > limit; });
          job.status = InvalidArgument("ragged input '" + cfg.name + "' has a row of length " + std::to_string(len) +
                                       " (allowed 0 to " + std::to_string(limit) + ")");
        } else if (total != in.data.size()) {
          job.status = InvalidArgument("ragged input '" + cfg.name + "': lengths add up to " + std::to_string(total) +
                                       " but " + std::to_string(in.data.size()) + " values were sent");
        }
      }
      if (job.input != kNoInput) ragged_max_lengths[static_cast<size_t>(job.ragged)] = max_len;
    }
  };
  // Lengths a parser summed are only checked, on the calling thread. Up to 65,536 other lengths (W1
  // to 2,520 pairs) are summed there too: a server runs many requests at
  // once, and the helping pool's helpers, spinning between the requests that woke them, took the
  // cores the server needed (W1 at 3,000 requests/s went from 1.9 to 2.7 ms of CPU a request;
  // one pass over W1's 13,312 lengths at 512 pairs is about 10 µs). Larger GPU requests take the
  // helping pool (the calling thread plus the helpers awake: no wait for a sleeping one;
  // common/helping_pool.h); the largest, and every CPU model's (whose OpenMP threads the pool's
  // spinning helpers would slow), take OpenMP's pool.
  PhaseTimer offsets_timer("(of which: lengths into offsets)");
  const int64_t total_lengths = static_cast<int64_t>(jobs.size()) * n;
  const bool all_summed = std::all_of(jobs.begin(), jobs.end(), [](const LengthsJob& j) { return j.summed; });
  if (all_summed || total_lengths <= 65536) {
    lengths(0, static_cast<int64_t>(jobs.size()));
  } else if (backend().device_kind() != DeviceKind::kHost && total_lengths <= 262144) {
    HelpingPool::Shared().Run(static_cast<int64_t>(jobs.size()), [&](int64_t j) { lengths(j, j + 1); });
  } else {
    ParallelFor(static_cast<int64_t>(jobs.size()), n, lengths);
  }
  std::sort(jobs.begin(), jobs.end(), [](const LengthsJob& a, const LengthsJob& b) { return a.config < b.config; });
  for (const LengthsJob& job : jobs) RANKD_RETURN_IF_ERROR(job.status);
  return Status::Ok();
}

}  // namespace rankd
