#include "serving/delimited_ids.h"

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace rankd {
namespace {

// Bit i set where block[i] is `delimiter`, for the 64 bytes at `block` (fewer where `end` comes
// first: the bytes past it are not read).
[[gnu::always_inline]] inline uint64_t DelimiterBits(const char* block, const char* end, char delimiter) {
  uint64_t bits = 0;
#if defined(__SSE2__)
  if (end - block >= 64) {
    const __m128i wanted = _mm_set1_epi8(delimiter);
    for (int i = 0; i < 4; ++i) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i));
      const auto found = static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, wanted)));
      bits |= static_cast<uint64_t>(found) << (16 * i);
    }
    return bits;
  }
#endif
  const int64_t count = end - block < 64 ? end - block : 64;
  for (int64_t i = 0; i < count; ++i) bits |= static_cast<uint64_t>(block[i] == delimiter) << i;
  return bits;
}

#if defined(__SSE2__)
// The piece [end - n, end) of 1-16 bytes as a decimal number, into `value`; false if a byte is not a
// digit. Reads the 16 bytes before `end`, or from `first` where fewer lie between them; the bytes
// before the piece count as leading zeros. Neighbouring digits are combined by multiply-adds of
// 16-bit lanes: pairs, fours, then eights, with no branch on the piece's length.
[[gnu::always_inline]] inline bool SixteenDigits(const char* first, const char* end, int n, uint64_t& value) {
  __m128i bytes;
  if (end - first >= 16) {
    bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16));
  } else {
    alignas(16) char copy[16] = {};
    const auto have = static_cast<size_t>(end - first);
    std::memcpy(copy + (16 - have), first, have);
    bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(copy));
  }
  const __m128i position = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m128i before = _mm_cmplt_epi8(position, _mm_set1_epi8(static_cast<char>(16 - n)));
  const __m128i digits = _mm_andnot_si128(before, _mm_sub_epi8(bytes, _mm_set1_epi8('0')));
  const __m128i nine = _mm_set1_epi8(9);
  if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(digits, nine), nine)) != 0xFFFF) return false;
  const __m128i zero = _mm_setzero_si128();
  const __m128i tens = _mm_setr_epi16(10, 1, 10, 1, 10, 1, 10, 1);
  const __m128i pairs = _mm_packs_epi32(_mm_madd_epi16(_mm_unpacklo_epi8(digits, zero), tens),
                                        _mm_madd_epi16(_mm_unpackhi_epi8(digits, zero), tens));
  const __m128i fours = _mm_madd_epi16(pairs, _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1));
  const __m128i eights = _mm_madd_epi16(_mm_packs_epi32(fours, fours), _mm_set1_epi32(10000 | (1 << 16)));
  const auto high = static_cast<uint32_t>(_mm_cvtsi128_si32(eights));
  const auto low = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_srli_si128(eights, 4)));
  value = uint64_t{high} * 100000000 + low;
  return true;
}
#endif

// The id of the piece [p, end) into `id`; `first` is the first byte that may be read. False where
// the piece is not an id, or not one of Id's.
template <typename Id>
[[gnu::always_inline]] inline bool PieceId(const char* first, const char* p, const char* end, Id& id) {
  int64_t value = 0;
#if defined(__SSE2__)
  const auto n = static_cast<int>(end - p);
  uint64_t digits = 0;
  if (n >= 1 && n <= 16 && SixteenDigits(first, end, n, digits)) {
    value = static_cast<int64_t>(digits);
  } else if (!ParseDecimalId(std::string_view(p, static_cast<size_t>(end - p)), value)) {
    return false;
  }
#else
  (void)first;
  if (!ParseDecimalId(std::string_view(p, static_cast<size_t>(end - p)), value)) return false;
#endif
  id = static_cast<Id>(value);
  return value >= std::numeric_limits<Id>::min() && value <= std::numeric_limits<Id>::max();
}

}  // namespace

bool ParseDecimalId(std::string_view piece, int64_t& id) {
  while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
  while (!piece.empty() && piece.back() == ' ') piece.remove_suffix(1);
  if (piece.empty()) return false;
  const auto [end, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), id);
  return ec == std::errc() && end == piece.data() + piece.size();
}

int64_t CountPieces(std::string_view text, char delimiter) {
  if (text.empty()) return 0;
  const char* const end = text.data() + text.size();
  int64_t delimiters = 0;
  for (const char* block = text.data(); block < end; block += 64) {
    delimiters += std::popcount(DelimiterBits(block, end, delimiter));
  }
  return delimiters + 1;
}

template <typename Id>
bool ParseDelimitedIds(std::string_view readable, std::string_view text, char delimiter, Id* out) {
  if (text.empty()) return true;  // an empty list
  const char* const first = readable.data();
  const char* const end = text.data() + text.size();
  const char* piece = text.data();
  // The delimiters of 64 bytes at a time as bits: the pieces between them are found without a
  // branch a byte, and a piece's reading does not wait for the search for the next delimiter.
  for (const char* block = text.data(); block < end; block += 64) {
    for (uint64_t bits = DelimiterBits(block, end, delimiter); bits != 0; bits &= bits - 1) {
      const char* const at = block + std::countr_zero(bits);
      if (!PieceId(first, piece, at, *out++)) return false;
      piece = at + 1;
    }
  }
  return piece != end && PieceId(first, piece, end, *out);  // a trailing delimiter leaves an empty last piece
}

template bool ParseDelimitedIds<int32_t>(std::string_view, std::string_view, char, int32_t*);
template bool ParseDelimitedIds<int64_t>(std::string_view, std::string_view, char, int64_t*);

}  // namespace rankd
