// Base64 (RFC 4648, standard alphabet, padded), as JSON carries bytes: Triton's CUDA shared memory
// registration sends the IPC handle as {"b64": "..."}.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rankd {

// The bytes `text` encodes, or nullopt when it is not padded base64 of the standard alphabet.
std::optional<std::string> DecodeBase64(std::string_view text);

}  // namespace rankd
