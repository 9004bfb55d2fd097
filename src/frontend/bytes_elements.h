// BYTES elements as KServe's binary tensor extension and gRPC's raw_input_contents carry them:
// each element a 4-byte little-endian length, then that many bytes.
#pragma once

#include <string>
#include <string_view>

#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

// `raw` read as exactly `count` elements, packed (one copy of their bytes), or an error naming
// `input` for a length that runs past the data or bytes left after the last element.
StatusOr<PackedStrings> DecodeBytesElements(std::string_view raw, int64_t count, const std::string& input);

// The strings in that form (what a client sends).
std::string EncodeBytesElements(const PackedStrings& strings);

}  // namespace rankd
