// A KServe v2 gRPC ModelInferRequest read from its wire bytes with its bulk left where it lies.
// gRPC hands a message over as reference-counted slices; parsing it into a ModelInferRequest copies
// every raw_input_contents entry into a std::string of its own (W1's mix: about 476 KB a request,
// 27 strings, each a fresh allocation), and every string of a typed BYTES input's bytes_contents too
// (W4s at 512 candidates: 3,072 strings, an allocation each), before the request builder copies
// them again. Here the message is scanned once: raw_input_contents entries and each input's
// bytes_contents strings are recorded as spans of the slices, every other field (a few KB: names,
// shapes, parameters, typed numbers) is parsed by protobuf, and the request builder copies each span
// once, from the slices to its final place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grpc_service.pb.h"
#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

// The raw_input_contents entries and the inputs' bytes_contents strings of one request, as views
// into memory the caller keeps alive (the message's slices, or the strings of a parsed
// ModelInferRequest). An entry or a string may cross pieces.
class WireContents {
 public:
  // Where an entry or a string lies in the pieces (the reader records them as it scans).
  struct Span {
    size_t piece = 0;  // where it starts: pieces_[piece], at byte `offset`
    size_t offset = 0;
    uint64_t bytes = 0;  // its length, possibly running on through the following pieces
  };

  // The contents of a parsed message: one piece each, viewing `proto`'s strings.
  static WireContents Of(const inference::ModelInferRequest& proto);

  // raw_input_contents.
  int size() const { return static_cast<int>(entries_.size()); }
  uint64_t bytes(int i) const { return entries_[static_cast<size_t>(i)].bytes; }
  // Copies entry i's bytes(i) bytes to `to`.
  void CopyTo(int i, void* to) const;
  // Entry i as one string view: the entry's own bytes where it lies in one piece, else copied into
  // `scratch`, which must outlive the view.
  std::string_view View(int i, std::string& scratch) const;

  // The bytes_contents of the message's input `input` (its index in `inputs`): how many strings,
  // and all of them appended to `to`.
  int64_t string_count(int input) const;
  void AppendStrings(int input, PackedStrings& to) const;

  // Puts every entry and string back into `proto` (the message ReadInferRequest returned): the
  // message as it was sent. For tests.
  void PutBack(inference::ModelInferRequest& proto) const;

 private:
  friend Status ReadInferRequestInto(const std::vector<std::string_view>&, WireContents&,
                                     inference::ModelInferRequest&);
  void Copy(const Span& s, char* to) const;
  std::string_view View(const Span& s, std::string& scratch) const;

  std::vector<std::string_view> pieces_;
  std::vector<Span> entries_;               // raw_input_contents
  std::vector<std::vector<Span>> strings_;  // per input: its bytes_contents (none past the last with some)
};

// Reads the message whose bytes are the concatenation of `pieces`: every field but
// raw_input_contents and the inputs' bytes_contents into the returned message (where those stay
// empty), the entries and strings into `wire` (viewing `pieces`' memory, which must outlive it). A
// message protobuf would refuse (truncated, a malformed tag or length, at any depth) is refused,
// InvalidArgument saying where; fields protobuf would keep as unknown are kept as unknown.
StatusOr<inference::ModelInferRequest> ReadInferRequest(const std::vector<std::string_view>& pieces,
                                                        WireContents& wire);

// The same, into `proto` (cleared first), which may live on an arena: the server's does, so that a
// request's messages, names, shapes and parameters take no heap allocation of their own (W1's 53
// inputs took about 400 a request, and the heap 19% of a served W1 request's CPU; docs/serving.md).
Status ReadInferRequestInto(const std::vector<std::string_view>& pieces, WireContents& wire,
                            inference::ModelInferRequest& proto);

// The model_name and model_version a ModelInferRequest's bytes begin with, read without parsing
// the rest (clients write fields in order: these two come first). nullopt when model_name is not
// among the leading fields of `head` (or they run past its end): then only a full parse tells. A
// later repeat of a field (protobuf keeps the last) is not seen: an answer to choose a thread by,
// never to serve by.
struct NamedModel {
  std::string_view name, version;  // views of `head`
};
std::optional<NamedModel> PeekNamedModel(std::string_view head);

}  // namespace rankd
