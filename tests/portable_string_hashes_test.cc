// The string hashes CUDA kernels run (common/portable_string_hashes.h) against Debian's
// libraries on random strings: every length from 0 to 300 (each length class the algorithms treat
// apart, FarmHash's loop over 64-byte blocks included) with random seeds.
#include "common/portable_string_hashes.h"

#include <farmhash.h>
#include <gtest/gtest.h>
#include <murmurhash.h>
#include <xxhash.h>

#include <random>
#include <vector>

namespace rankd {
namespace {

TEST(PortableStringHashes, EqualDebiansLibrariesOnRandomStrings) {
  std::mt19937_64 rng(17);
  for (size_t len = 0; len <= 300; ++len) {
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<uint8_t> bytes(len + 1);  // one past the end, so data() is valid for len 0
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      const portable_hash::HostBytes r{bytes.data()};
      const char* s = reinterpret_cast<const char*>(bytes.data());
      const uint64_t seed = rep == 0 ? 0 : rng();
      EXPECT_EQ(portable_hash::farm::Fingerprint64(r, len), util::Fingerprint64(s, len)) << "length " << len;
      EXPECT_EQ(portable_hash::xx::Hash64(r, len, seed), XXH64(s, len, seed)) << "length " << len;
      uint32_t murmur = 0;
      lmmh_x86_32(s, static_cast<unsigned>(len), static_cast<uint32_t>(seed), &murmur);
      EXPECT_EQ(portable_hash::murmur::Hash32(r, len, static_cast<uint32_t>(seed)), murmur) << "length " << len;
    }
  }
}

// The published answers the host's hashes are checked against (string_features_test.cc).
TEST(PortableStringHashes, KnownAnswers) {
  auto bytes = [](const char* s) { return portable_hash::HostBytes{reinterpret_cast<const uint8_t*>(s)}; };
  EXPECT_EQ(portable_hash::farm::Fingerprint64(bytes(""), 0), 0x9ae16a3b2f90404fu);
  EXPECT_EQ(portable_hash::xx::Hash64(bytes("abc"), 3, 0), 0x44bc2cf5ad770999u);
  EXPECT_EQ(portable_hash::murmur::Hash32(bytes("Hello, world!"), 13, 0), 0xc0363e43u);
  std::vector<uint64_t> buckets;
  for (const char* s : {"Hello", "TensorFlow", "2.x"}) {
    buckets.push_back(portable_hash::farm::Fingerprint64(bytes(s), std::char_traits<char>::length(s)) % 3);
  }
  EXPECT_EQ(buckets, std::vector<uint64_t>({0, 2, 2}));
}

}  // namespace
}  // namespace rankd
