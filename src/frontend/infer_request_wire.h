// A KServe v2 gRPC ModelInferRequest read from its wire bytes with its raw_input_contents left where
// they lie. gRPC hands a message over as reference-counted slices; parsing it into a
// ModelInferRequest copies every raw_input_contents entry into a std::string of its own (W1's mix:
// about 476 KB a request, 27 strings, each a fresh allocation) before the request builder copies
// them again into their pinned request tensors. Here the top level of the message is scanned once:
// raw_input_contents entries are recorded as spans of the slices, every other field (a few KB:
// names, shapes, parameters) is parsed by protobuf, and the request builder copies each entry once,
// from the slices to its final place.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grpc_service.pb.h"
#include "rankd/status.h"

namespace rankd {

// The raw_input_contents entries of one request, as views into memory the caller keeps alive (the
// message's slices, or the strings of a parsed ModelInferRequest). An entry may cross pieces.
class RawInputContents {
 public:
  // The entries of a parsed message: one piece each, viewing `proto`'s strings.
  static RawInputContents Of(const inference::ModelInferRequest& proto);

  int size() const { return static_cast<int>(entries_.size()); }
  uint64_t bytes(int i) const { return entries_[static_cast<size_t>(i)].bytes; }
  // Copies entry i's bytes(i) bytes to `to`.
  void CopyTo(int i, void* to) const;
  // Entry i as one string view: the entry's own bytes where it lies in one piece, else copied into
  // `scratch`, which must outlive the view.
  std::string_view View(int i, std::string& scratch) const;

 private:
  friend StatusOr<inference::ModelInferRequest> ReadInferRequest(const std::vector<std::string_view>&,
                                                                 RawInputContents&);
  struct Entry {
    size_t piece = 0;  // where it starts: pieces_[piece], at byte `offset`
    size_t offset = 0;
    uint64_t bytes = 0;  // its length, possibly running on through the following pieces
  };
  std::vector<std::string_view> pieces_;
  std::vector<Entry> entries_;
};

// Reads the message whose bytes are the concatenation of `pieces`: every field but
// raw_input_contents into the returned message (whose raw_input_contents stays empty), the entries
// of raw_input_contents into `raw` (viewing `pieces`' memory, which must outlive it). A message
// protobuf would refuse (truncated, a malformed tag or length) is refused, InvalidArgument saying
// where; fields protobuf would keep as unknown are kept as unknown.
StatusOr<inference::ModelInferRequest> ReadInferRequest(const std::vector<std::string_view>& pieces,
                                                        RawInputContents& raw);

}  // namespace rankd
