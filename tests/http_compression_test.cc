#include "frontend/http_compression.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>

namespace rankd {
namespace {

std::string Text(size_t n) {
  std::mt19937 rng(3);
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + rng() % 4));  // compresses well
  return s;
}

// The value of an answer that must succeed.
std::string Must(StatusOr<std::string> got) {
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  return got.ok() ? std::string(*got) : std::string();
}

TEST(HttpCompression, RoundTripsGzipAndDeflate) {
  const std::string body = Text(300000);
  for (const char* encoding : {"gzip", "deflate"}) {
    auto packed = EncodeBody(encoding, body);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    EXPECT_LT(packed->size(), body.size() / 2) << encoding;
    auto back = DecodeBody(encoding, *packed, body.size());
    ASSERT_TRUE(back.ok()) << encoding << ": " << back.status().ToString();
    EXPECT_EQ(*back, body);
  }
  // gzip's magic bytes; deflate is zlib's format (RFC 1950: CMF 0x78).
  EXPECT_EQ(Must(EncodeBody("gzip", body)).substr(0, 2), "\x1f\x8b");
  EXPECT_EQ(static_cast<unsigned char>(Must(EncodeBody("DEFLATE", body))[0]), 0x78);
  EXPECT_EQ(Must(DecodeBody("identity", "abc", 3)), "abc");
  EXPECT_EQ(Must(DecodeBody(" GZip ", Must(EncodeBody("gzip", "x")), 10)), "x");
}

TEST(HttpCompression, ReadsWhatZlibItselfWrote) {
  const std::string body = Text(5000);
  uLongf size = compressBound(static_cast<uLong>(body.size()));
  std::string packed(size, '\0');
  ASSERT_EQ(compress(reinterpret_cast<Bytef*>(packed.data()), &size, reinterpret_cast<const Bytef*>(body.data()),
                     static_cast<uLong>(body.size())),
            Z_OK);
  packed.resize(size);
  auto back = DecodeBody("deflate", packed, body.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, body);
}

TEST(HttpCompression, RefusesMalformedBodies) {
  const std::string body = Text(100000);
  const std::string gz = Must(EncodeBody("gzip", body));
  auto expect_invalid = [](const StatusOr<std::string>& got, const std::string& what) {
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << what << ": " << got.status().ToString();
  };
  EXPECT_EQ(DecodeBody("br", gz, body.size()).status().code(), StatusCode::kUnimplemented);  // 415
  expect_invalid(DecodeBody("gzip", gz.substr(0, gz.size() / 2), body.size()), "truncated");
  expect_invalid(DecodeBody("gzip", gz + "trailing", body.size()), "bytes after the stream");
  expect_invalid(DecodeBody("gzip", "not gzip at all", body.size()), "not gzip");
  expect_invalid(DecodeBody("gzip", "", body.size()), "empty");
  expect_invalid(DecodeBody("deflate", gz, body.size()), "gzip sent as deflate");
  std::string flipped = gz;
  flipped[gz.size() / 2] = static_cast<char>(flipped[gz.size() / 2] ^ 0x55);
  expect_invalid(DecodeBody("gzip", flipped, body.size()), "corrupted");
  // A small body that inflates past the limit stops there.
  const std::string bomb = Must(EncodeBody("gzip", std::string(size_t{64} << 20, '\0')));
  EXPECT_LT(bomb.size(), size_t{1} << 20);
  auto big = DecodeBody("gzip", bomb, size_t{1} << 20);
  expect_invalid(big, "inflates past the limit");
  EXPECT_NE(big.status().message().find("largest body"), std::string::npos) << big.status().ToString();
}

TEST(HttpCompression, ChoosesFromAcceptEncoding) {
  EXPECT_EQ(ChooseEncoding("gzip"), "gzip");
  EXPECT_EQ(ChooseEncoding("deflate"), "deflate");
  EXPECT_EQ(ChooseEncoding("deflate, gzip"), "gzip");
  EXPECT_EQ(ChooseEncoding("br, deflate;q=0.5"), "deflate");
  EXPECT_EQ(ChooseEncoding("gzip;q=0, deflate"), "deflate");
  EXPECT_EQ(ChooseEncoding("gzip; q=0.0"), "");
  EXPECT_EQ(ChooseEncoding("gzip;q=0.1"), "gzip");
  EXPECT_EQ(ChooseEncoding("identity"), "");
  EXPECT_EQ(ChooseEncoding(""), "");
  EXPECT_EQ(ChooseEncoding("GZIP"), "gzip");
}

}  // namespace
}  // namespace rankd
