// Inference requests and results, as rankd's engine takes and returns them. All are value types:
// each owns what it holds (a Tensor shares its storage, rankd/tensor.h), none locks, and one is
// used by one thread at a time, as a standard container is. Engine::Infer reads a request only
// while it runs (its batcher's threads among the readers), so the caller leaves the request
// unchanged until Infer returns; the outputs it returns are the caller's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rankd/tensor.h"

namespace rankd {

// A BYTES tensor: its elements (strings, any bytes) packed back to back, element i being
// bytes[offsets[i], offsets[i + 1]). It owns its bytes (a value type; copies copy them). Built with
// Append, or with Reserve, each string's bytes written onto the end of `bytes` and EndString, it is
// consistent; a caller that fills `offsets` itself keeps them from 0 up to
// bytes.size(), never decreasing, with one more entry than `shape` has elements (a request that
// does not is refused, naming the input).
struct PackedStrings {
  Shape shape;
  std::string bytes;
  // String i is bytes[offsets[i], offsets[i + 1]): from 0 once a string is appended, empty before
  // (a PackedStrings holding none allocates nothing: every input of every request has one).
  std::vector<int64_t> offsets;

  int64_t size() const { return offsets.empty() ? 0 : static_cast<int64_t>(offsets.size()) - 1; }
  std::string_view at(int64_t i) const {
    const auto b = static_cast<size_t>(offsets[static_cast<size_t>(i)]);
    return std::string_view(bytes).substr(b, static_cast<size_t>(offsets[static_cast<size_t>(i) + 1]) - b);
  }
  void Append(std::string_view s) {
    Start();
    bytes.append(s);
    EndString();
  }
  // Room for `strings` more strings of `more_bytes` bytes in all, and the offsets started: then
  // Append, or write a string's bytes at the end of `bytes` and call EndString.
  void Reserve(size_t strings, size_t more_bytes) {
    bytes.reserve(bytes.size() + more_bytes);
    offsets.reserve((offsets.empty() ? 1 : offsets.size()) + strings);
    Start();
  }
  // Ends the string whose bytes went onto the end of `bytes` since the last one ended (after Reserve).
  void EndString() { offsets.push_back(static_cast<int64_t>(bytes.size())); }

 private:
  void Start() {
    if (offsets.empty()) offsets.push_back(0);
  }
};

// A ragged input's lengths may also come as a tensor of their own, the input NAME + this suffix
// (INT32 or INT64, [rows]) beside flat values NAME: what a client without per-input parameters
// (tritonclient) can send. It is an input like the others, owned by the request. The model takes it as NAME's `lengths`
// (docs/serving.md).
inline constexpr std::string_view kLengthsTensorSuffix = ".lengths";

struct InferInput {
  std::string name;
  // Dense: [rows, dims...]. Ragged: flat values [total] with `lengths` (or an input NAME.lengths),
  // or padded [rows, length] (negative ids are empty slots) with `lengths` empty. Undefined for a
  // BYTES input.
  Tensor data;
  std::vector<int64_t> lengths;
  // A BYTES input (string features, turned into ids as the model's config says: docs/strings.md),
  // shaped as `data` would be.
  PackedStrings strings;

  bool is_bytes() const { return !data.defined() && !strings.shape.empty(); }
};

struct InferRequest {
  std::string id;
  std::vector<InferInput> inputs;
  std::vector<std::string> outputs;  // requested outputs; empty = all
  // For models with batching (docs/batching.md), as Triton's request parameters: priority 1 is
  // the highest, 0 the model's default (ignored by a model without priority levels); a request
  // still queued `timeout_us` after it arrived is answered DEADLINE_EXCEEDED without running (0:
  // the model's default timeout; a request run at once never queued).
  int priority = 0;
  int64_t timeout_us = 0;
};

struct InferOutput {
  std::string name;
  // Owns (a share of) its storage: a request merged into a batch gets a view of its rows of the
  // batch's output (Tensor::Rows), which keeps that buffer alive; other requests' rows are theirs.
  Tensor data;
};

}  // namespace rankd
