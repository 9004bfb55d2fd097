// Decimal ids between single-byte delimiters ("123,456,789"), read in one pass: the common case of a
// split BYTES input (serving/string_ids.h, docs/strings.md). A text's delimiters are found 64 bytes
// at a time, as bits, and each piece of up to 16 digits is converted at once by multiply-adds of a
// vector's lanes, so that a piece costs no branch per byte whatever its length; a piece with spaces
// or a sign, or longer, is read by ParseDecimalId.
#pragma once

#include <cstdint>
#include <string_view>

namespace rankd {

// A piece as a decimal INT64: spaces around an optional '-' and digits (std::from_chars), nothing else.
bool ParseDecimalId(std::string_view piece, int64_t& id);

// The pieces `text` splits into on `delimiter`: one more than its delimiters, none if it is empty.
int64_t CountPieces(std::string_view text, char delimiter);

// Writes the ids of `text`'s pieces, split on `delimiter` (not a space, a sign or a digit), to
// `out`, which has room for CountPieces of them. Each piece is a decimal id as ParseDecimalId
// reads it. `readable` is a range holding `text` whose bytes may all be read
// (bytes before `text` are read and ignored). False, with `out` partly written, where a piece is
// anything else (empty, not a number, outside Id), a trailing delimiter
// included: the caller then reads the text piece by piece to name the mistake.
template <typename Id>
bool ParseDelimitedIds(std::string_view readable, std::string_view text, char delimiter, Id* out);

}  // namespace rankd
