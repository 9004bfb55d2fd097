#include "frontend/http_compression.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

namespace rankd {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// zlib's window bits for the encoding: 15 + 16 reads and writes a gzip wrapper, 15 a zlib one.
int WindowBits(const std::string& encoding) { return encoding == "gzip" ? 15 + 16 : 15; }

}  // namespace

StatusOr<std::string> DecodeBody(std::string_view encoding_value, std::string_view body, size_t max_bytes) {
  const std::string encoding = Lower(Trim(encoding_value));
  if (encoding.empty() || encoding == "identity") return std::string(body);
  if (encoding != "gzip" && encoding != "deflate") {
    return Unimplemented("unsupported Content-Encoding '" + std::string(encoding_value) +
                         "' (gzip, deflate or identity)");
  }
  if (body.size() > std::numeric_limits<uInt>::max()) return InvalidArgument("the compressed body is too large");
  z_stream z{};
  if (inflateInit2(&z, WindowBits(encoding)) != Z_OK) return Internal("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  std::string out;
  int result = Z_OK;
  while (result == Z_OK) {
    const size_t room = std::min<size_t>(std::max<size_t>(out.size(), size_t{1} << 16), max_bytes + 1 - out.size());
    const size_t at = out.size();
    out.resize(at + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    z.avail_out = static_cast<uInt>(std::min<size_t>(room, std::numeric_limits<uInt>::max()));
    result = inflate(&z, Z_NO_FLUSH);
    out.resize(at + (room - z.avail_out));
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      return InvalidArgument("the " + encoding + " body inflates past the largest body accepted (" +
                             std::to_string(max_bytes) + " bytes)");
    }
    if (result == Z_BUF_ERROR && z.avail_in == 0) break;  // the input ended before the stream did
  }
  const bool whole = result == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  if (!whole) {
    return InvalidArgument("the request body is not valid " + encoding +
                           (result == Z_STREAM_END ? " (bytes follow its end)" : " data"));
  }
  return out;
}

std::string ChooseEncoding(std::string_view accept_encoding) {
  bool gzip = false, deflate = false;
  std::string_view rest = accept_encoding;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t semicolon = item.find(';');
    const std::string name = Lower(Trim(item.substr(0, semicolon)));
    bool refused = false;
    if (semicolon != std::string_view::npos) {
      std::string params = Lower(Trim(item.substr(semicolon + 1)));
      params.erase(std::remove(params.begin(), params.end(), ' '), params.end());
      refused = params.rfind("q=0", 0) == 0 && params.find_first_of("123456789", 3) == std::string::npos;
    }
    if (refused) continue;
    gzip = gzip || name == "gzip";
    deflate = deflate || name == "deflate";
  }
  return gzip ? "gzip" : deflate ? "deflate" : "";
}

StatusOr<std::string> EncodeBody(std::string_view encoding, std::string_view body) {
  const std::string e = Lower(encoding);
  if (e != "gzip" && e != "deflate") return InvalidArgument("unsupported encoding '" + std::string(encoding) + "'");
  if (body.size() > std::numeric_limits<uInt>::max()) return InvalidArgument("the body is too large to compress");
  z_stream z{};
  // Level 1: answers are mostly floats, which compress little; the time goes to the request.
  if (deflateInit2(&z, 1, Z_DEFLATED, WindowBits(e), 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return Internal("zlib: deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(body.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int result = deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  if (result != Z_STREAM_END) return Internal("zlib: deflate did not finish");
  return out;
}

}  // namespace rankd
