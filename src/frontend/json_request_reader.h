// ReadJsonRequest: a KServe v2 JSON request body read without a DOM of its tensor data.
//
// Two readers build the same document. Bodies up to 8 MB (every binary request's JSON header, and
// JSON requests of tens of thousands of values) go to simdjson's On-Demand parser
// (json_indexed_reader.cc), three to four times faster than nlohmann's here (a W1 header's 7,000
// lengths: 85 against 325 µs on the dev machine), but its index of the body takes five times the
// body's size. Larger bodies are read in one streaming pass by nlohmann's SAX interface
// (json_request_reader.cc), whose memory stays a small multiple of the body.
//
// Everything but the inputs' `data` and `parameters.lengths` (id, names, shapes, other parameters,
// outputs: a few hundred bytes) is kept as a small flat document (json_tree.h). Each `inputs[i].data`
// is read straight into compact leaves, nine bytes a value, with the lengths of its rows; in the
// document that `data` becomes the leaves' index. A list given as `inputs[i].parameters.lengths`
// (a ragged input's row lengths: one per row, thousands in a large request with binary data) is
// read into leaves too and left out of the document. A DOM of the same body took 18 times its size; this takes at most
// a few times the body, and a body whose data passes `max_elements` or nests deeper than `max_depth` stops being read
// at that point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/json_tree.h"
#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

// One input's `data`, flattened in row-major order.
struct JsonLeaves {
  enum Kind : uint8_t { kInt, kUnsigned, kFloat, kBool, kString, kOther };
  std::vector<Kind> kinds;
  // kInt: the int64 bits; kUnsigned: uint64 values past INT64_MAX; kFloat: the double's bits;
  // kBool: 0 or 1; kString: its index in `strings`; kOther (null, objects): 0.
  std::vector<uint64_t> values;
  PackedStrings strings;             // the strings among the values, in order (a BYTES input's elements)
  std::vector<int64_t> row_lengths;  // the length of each list directly inside `data`

  size_t size() const { return kinds.size(); }
  int64_t AsInt(size_t i) const { return static_cast<int64_t>(values[i]); }
  double AsDouble(size_t i) const;  // kInt, kUnsigned or kFloat
};

struct JsonRequestDocument {
  // The body, with each input's `data` replaced by an index into `data`, and its
  // `parameters.lengths` left out where that was a list.
  JsonTree root;
  std::vector<JsonLeaves> data;
  std::vector<JsonLeaves> lengths;
  std::vector<int> lengths_of_input;  // per input: its index in `lengths`, or -1 (not given as a list)

  // The `parameters.lengths` list of input `i`, or nullptr.
  const JsonLeaves* LengthsOf(size_t i) const {
    return i < lengths_of_input.size() && lengths_of_input[i] >= 0 ? &lengths[static_cast<size_t>(lengths_of_input[i])]
                                                                   : nullptr;
  }
};

struct JsonReadLimits {
  int64_t max_elements = int64_t{1} << 26;  // per input
  int max_depth = 8;                        // nesting of `data`
};

// InvalidArgument for a body that is not JSON or nests too deeply, ResourceExhausted for data past
// `max_elements`.
StatusOr<JsonRequestDocument> ReadJsonRequest(std::string_view body, const JsonReadLimits& limits);

// The two readers ReadJsonRequest picks from by size (tests compare them).
StatusOr<JsonRequestDocument> ReadJsonRequestStreaming(std::string_view body, const JsonReadLimits& limits);
StatusOr<JsonRequestDocument> ReadJsonRequestIndexed(std::string_view body, const JsonReadLimits& limits);

}  // namespace rankd
