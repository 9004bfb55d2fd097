// HTTP bodies compressed with gzip or deflate (zlib), as Triton's HTTP endpoint and its clients
// use them: a request body with Content-Encoding is inflated before it is parsed, and an answer is
// compressed when the request's Accept-Encoding asks for it (tritonclient's
// request_compression_algorithm / response_compression_algorithm).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "rankd/status.h"

namespace rankd {

// The body as sent before `encoding` (a Content-Encoding value: "gzip", "deflate" - zlib's format,
// as HTTP defines it - or "identity"; case-insensitive). Unimplemented for another encoding (the
// server answers 415); InvalidArgument for a body that is not valid in its encoding or one that
// inflates past `max_bytes` (reading stops there: a small body cannot make the server allocate
// more).
StatusOr<std::string> DecodeBody(std::string_view encoding, std::string_view body, size_t max_bytes);

// The coding to answer with for an Accept-Encoding value: "gzip" or "deflate" when it names one
// (gzip first; a q=0 entry refuses it), else "" (identity).
std::string ChooseEncoding(std::string_view accept_encoding);

// `body` compressed in `encoding` ("gzip" or "deflate").
StatusOr<std::string> EncodeBody(std::string_view encoding, std::string_view body);

}  // namespace rankd
