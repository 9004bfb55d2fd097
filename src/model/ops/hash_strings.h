// HashStrings(records INT64 [..., 2]) -> ids [...]: a BYTES input's strings hashed into buckets
// by the model's backend (docs/strings.md, "On the device"). Each record is one string: its bytes'
// address in host memory (pinned where a GPU reads it) and its length, or, where the host hashed
// it already, the bucket and kPrehashed. Attributes: `function` (a common/string_hash.h name),
// `seed` (the 64 bits of the unsigned seed), `buckets` (> 0), `dtype` ("INT64" or "INT32", the ids').
// The records are made by the server from a request's strings (serving/string_ids.h, StringRecords), never
// taken from a client: a graph input of them is bound to a BYTES input only.
#pragma once

#include <cstdint>

namespace rankd::hash_strings {

constexpr int64_t kRecordWidth = 2;  // (address, length)
constexpr int64_t kPrehashed = -1;   // in the length's place: the first field is the bucket
// Each string's bytes lie in a buffer that starts 8-byte aligned and has at least kTailBytes
// readable bytes past its last string, so the device may read whole aligned words.
constexpr int64_t kTailBytes = 16;

}  // namespace rankd::hash_strings
