// The binary part of a KServe request body (the binary tensor extension: the bytes after the
// Inference-Header-Content-Length bytes of JSON), as one run of bytes or in pieces.
//
// The HTTP server reads a binary inference request's body from its socket straight into place
// (http_server.cc): before the binary part arrives it reads the JSON part, finds the sizes the
// inputs announce (AnnouncedBinarySizes) and gives each input's bytes a piece of their own from a
// 64-byte boundary of one request tensor (LayOutBinary: page-locked on a GPU server), where the
// parser views them instead of copying them (kserve_json.h). The sizes are only a layout: the
// parser takes the bytes in order whatever the pieces, so a wrong announcement costs a copy, never
// a wrong byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "rankd/tensor.h"

namespace rankd {

struct BinaryPieces {
  struct Piece {
    char* data;
    size_t bytes;
  };
  std::vector<Piece> pieces;  // in the body's order
  Tensor storage;             // holds the pieces where defined (views of them keep it alive)

  // `bytes`, not held: they must outlive the parse (a view of them is never made).
  static BinaryPieces Contiguous(std::string_view bytes);
  size_t size() const;
};

// The length of a body's JSON part where the body can be read into place: its
// Inference-Header-Content-Length value `header`, a whole number from 1 to short of the body's
// `body_bytes`; else nullopt (the body is read whole, and a malformed value answered as such).
std::optional<size_t> JsonPartBytes(std::string_view header, uint64_t body_bytes);

// Inputs of a body read into place that get a piece of their own; any after them share the last.
inline constexpr size_t kMaxBinaryPieces = 1024;

// The binary_data_size values of a request's JSON part, in the order they appear (the inputs'
// order), at most `limit` of them; a key inside a string is not one. A hint that is never trusted:
// any text, valid JSON or not, gives some list.
std::vector<uint64_t> AnnouncedBinarySizes(std::string_view json, size_t limit = kMaxBinaryPieces);

// Room for a binary part of `bytes` bytes in one request tensor (pinned where a GPU reads request
// tensors, common/host_allocator.h): a piece per announced size while they fit, each from a 64-byte
// boundary and followed by at least 64 bytes of the tensor (kernels may read that far past a
// tensor's end), the rest of the bytes in one last piece. The pieces' bytes are to be written.
BinaryPieces LayOutBinary(const std::vector<uint64_t>& announced, size_t bytes);

// `binary` copied into the pieces LayOutBinary gives for `json`'s announcement, as the HTTP server
// reads a body into place from its socket (for tests and fuzzers of the parse).
BinaryPieces PlaceBinary(std::string_view json, std::string_view binary);

// Takes a binary part's bytes in order, each input's `bytes` at a time.
class BinaryReader {
 public:
  explicit BinaryReader(const BinaryPieces& binary);

  size_t left() const { return left_; }
  // The next `bytes` bytes (REQUIRES: bytes <= left()): where they lie when one piece holds them
  // (else nullptr), and copied into `to` by CopyTo.
  struct Span {
    const char* contiguous = nullptr;
    size_t bytes = 0;
    size_t piece = 0, offset = 0;  // where they start
  };
  Span Take(size_t bytes);
  void CopyTo(const Span& span, void* to) const;
  // A view of `span` as `dtype` and `shape` where it can be read in place (one piece of a defined
  // storage, starting 64-byte aligned), else an undefined Tensor.
  Tensor View(const Span& span, DType dtype, Shape shape) const;

 private:
  const BinaryPieces& binary_;
  size_t piece_ = 0, offset_ = 0, left_ = 0;
};

}  // namespace rankd
