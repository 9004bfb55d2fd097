// The string hashes of common/string_hash.h written out for code that cannot call Debian's
// libraries: CUDA kernels hash strings on the device with them. Each reads its string through a
// reader of little-endian loads at byte offsets (Load64, Load32, Byte), so a kernel can read
// pinned host memory by aligned words while host code reads plain bytes. They follow the published
// algorithms (FarmHash's farmhashna Hash64, which Fingerprint64 is; xxHash's XXH64; MurmurHash3's
// x86_32); tests/portable_string_hashes_test.cc checks them against the libraries on random
// strings of every length class each algorithm treats apart.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace rankd::portable_hash {

RANKD_HOST_DEVICE inline uint64_t RotateRight(uint64_t v, int s) { return s == 0 ? v : (v >> s) | (v << (64 - s)); }
RANKD_HOST_DEVICE inline uint64_t RotateLeft(uint64_t v, int s) { return s == 0 ? v : (v << s) | (v >> (64 - s)); }
RANKD_HOST_DEVICE inline uint32_t RotateLeft32(uint32_t v, int s) { return s == 0 ? v : (v << s) | (v >> (32 - s)); }

// Host bytes read in place (x86 and the GPU are little-endian, as the algorithms' loads are).
struct HostBytes {
  const uint8_t* p;
  uint64_t Load64(uint64_t i) const {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    return v;
  }
  uint32_t Load32(uint64_t i) const {
    uint32_t v;
    std::memcpy(&v, p + i, 4);
    return v;
  }
  uint8_t Byte(uint64_t i) const { return p[i]; }
};

// FarmHash's Fingerprint64 (farmhashna's Hash64): TensorFlow's to_hash_bucket_fast.
namespace farm {

constexpr uint64_t k0 = 0xc3a5c85c97cb3127ULL, k1 = 0xb492b66fbe98f273ULL, k2 = 0x9ae16a3b2f90404fULL;

RANKD_HOST_DEVICE inline uint64_t ShiftMix(uint64_t v) { return v ^ (v >> 47); }

RANKD_HOST_DEVICE inline uint64_t Mix16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

struct Pair {
  uint64_t first, second;
};

RANKD_HOST_DEVICE inline Pair Weak32(uint64_t w, uint64_t x, uint64_t y, uint64_t z, uint64_t a, uint64_t b) {
  a += w;
  b = RotateRight(b + a + z, 21);
  const uint64_t c = a;
  a += x;
  a += y;
  b += RotateRight(a, 44);
  return {a + z, b + c};
}

template <typename R>
RANKD_HOST_DEVICE Pair Weak32At(const R& r, uint64_t at, uint64_t a, uint64_t b) {
  return Weak32(r.Load64(at), r.Load64(at + 8), r.Load64(at + 16), r.Load64(at + 24), a, b);
}

template <typename R>
RANKD_HOST_DEVICE uint64_t UpTo16(const R& r, uint64_t len) {
  if (len >= 8) {
    const uint64_t mul = k2 + len * 2, a = r.Load64(0) + k2, b = r.Load64(len - 8);
    const uint64_t c = RotateRight(b, 37) * mul + a, d = (RotateRight(a, 25) + b) * mul;
    return Mix16(c, d, mul);
  }
  if (len >= 4) {
    const uint64_t mul = k2 + len * 2, a = r.Load32(0);
    return Mix16(len + (a << 3), r.Load32(len - 4), mul);
  }
  if (len > 0) {
    const uint32_t y = uint32_t{r.Byte(0)} + (uint32_t{r.Byte(len >> 1)} << 8);
    const uint32_t z = static_cast<uint32_t>(len) + (uint32_t{r.Byte(len - 1)} << 2);
    return ShiftMix(y * k2 ^ z * k0) * k2;
  }
  return k2;
}

template <typename R>
RANKD_HOST_DEVICE uint64_t UpTo32(const R& r, uint64_t len) {
  const uint64_t mul = k2 + len * 2, a = r.Load64(0) * k1, b = r.Load64(8);
  const uint64_t c = r.Load64(len - 8) * mul, d = r.Load64(len - 16) * k2;
  return Mix16(RotateRight(a + b, 43) + RotateRight(c, 30) + d, a + RotateRight(b + k2, 18) + c, mul);
}

template <typename R>
RANKD_HOST_DEVICE uint64_t UpTo64(const R& r, uint64_t len) {
  const uint64_t mul = k2 + len * 2, a = r.Load64(0) * k2, b = r.Load64(8);
  const uint64_t c = r.Load64(len - 8) * mul, d = r.Load64(len - 16) * k2;
  const uint64_t y = RotateRight(a + b, 43) + RotateRight(c, 30) + d;
  const uint64_t z = Mix16(y, a + RotateRight(b + k2, 18) + c, mul);
  const uint64_t e = r.Load64(16) * mul, f = r.Load64(24);
  const uint64_t g = (y + r.Load64(len - 32)) * mul, h = (z + r.Load64(len - 24)) * mul;
  return Mix16(RotateRight(e + f, 43) + RotateRight(g, 30) + h, e + RotateRight(f + a, 18) + g, mul);
}

template <typename R>
RANKD_HOST_DEVICE uint64_t Fingerprint64(const R& r, uint64_t len) {
  if (len <= 16) return UpTo16(r, len);
  if (len <= 32) return UpTo32(r, len);
  if (len <= 64) return UpTo64(r, len);
  constexpr uint64_t seed = 81;
  uint64_t x = seed, y = seed * k1 + 113, z = ShiftMix(y * k2 + 113) * k2;
  Pair v{0, 0}, w{0, 0};
  x = x * k2 + r.Load64(0);
  const uint64_t end = ((len - 1) / 64) * 64, last64 = end + ((len - 1) & 63) - 63;
  for (uint64_t s = 0; s != end; s += 64) {
    x = RotateRight(x + y + v.first + r.Load64(s + 8), 37) * k1;
    y = RotateRight(y + v.second + r.Load64(s + 48), 42) * k1;
    x ^= w.second;
    y += v.first + r.Load64(s + 40);
    z = RotateRight(z + w.first, 33) * k1;
    v = Weak32At(r, s, v.second * k1, x + w.first);
    w = Weak32At(r, s + 32, z + w.second, y + r.Load64(s + 16));
    const uint64_t t = z;
    z = x;
    x = t;
  }
  const uint64_t mul = k1 + ((z & 0xff) << 1);
  const uint64_t s = last64;
  w.first += (len - 1) & 63;
  v.first += w.first;
  w.first += v.first;
  x = RotateRight(x + y + v.first + r.Load64(s + 8), 37) * mul;
  y = RotateRight(y + v.second + r.Load64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + r.Load64(s + 40);
  z = RotateRight(z + w.first, 33) * mul;
  v = Weak32At(r, s, v.second * mul, x + w.first);
  w = Weak32At(r, s + 32, z + w.second, y + r.Load64(s + 16));
  const uint64_t t = z;
  z = x;
  x = t;
  return Mix16(Mix16(v.first, w.first, mul) + ShiftMix(y) * k0 + z, Mix16(v.second, w.second, mul) + x, mul);
}

}  // namespace farm

// xxHash's XXH64.
namespace xx {

constexpr uint64_t p1 = 0x9E3779B185EBCA87ULL, p2 = 0xC2B2AE3D27D4EB4FULL, p3 = 0x165667B19E3779F9ULL,
                   p4 = 0x85EBCA77C2B2AE63ULL, p5 = 0x27D4EB2F165667C5ULL;

RANKD_HOST_DEVICE inline uint64_t Round(uint64_t acc, uint64_t in) { return RotateLeft(acc + in * p2, 31) * p1; }
RANKD_HOST_DEVICE inline uint64_t Merge(uint64_t h, uint64_t v) { return (h ^ Round(0, v)) * p1 + p4; }

template <typename R>
RANKD_HOST_DEVICE uint64_t Hash64(const R& r, uint64_t len, uint64_t seed) {
  uint64_t i = 0, h;
  if (len >= 32) {
    uint64_t v1 = seed + p1 + p2, v2 = seed + p2, v3 = seed, v4 = seed - p1;
    for (; i + 32 <= len; i += 32) {
      v1 = Round(v1, r.Load64(i));
      v2 = Round(v2, r.Load64(i + 8));
      v3 = Round(v3, r.Load64(i + 16));
      v4 = Round(v4, r.Load64(i + 24));
    }
    h = RotateLeft(v1, 1) + RotateLeft(v2, 7) + RotateLeft(v3, 12) + RotateLeft(v4, 18);
    h = Merge(Merge(Merge(Merge(h, v1), v2), v3), v4);
  } else {
    h = seed + p5;
  }
  h += len;
  for (; i + 8 <= len; i += 8) h = RotateLeft(h ^ Round(0, r.Load64(i)), 27) * p1 + p4;
  if (i + 4 <= len) {
    h = RotateLeft(h ^ (uint64_t{r.Load32(i)} * p1), 23) * p2 + p3;
    i += 4;
  }
  for (; i < len; ++i) h = RotateLeft(h ^ (uint64_t{r.Byte(i)} * p5), 11) * p1;
  h ^= h >> 33;
  h *= p2;
  h ^= h >> 29;
  h *= p3;
  return h ^ (h >> 32);
}

}  // namespace xx

// MurmurHash3's x86_32.
namespace murmur {

template <typename R>
RANKD_HOST_DEVICE uint32_t Hash32(const R& r, uint64_t len, uint32_t seed) {
  constexpr uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
  auto scramble = [](uint32_t k) { return RotateLeft32(k * c1, 15) * c2; };
  uint32_t h = seed;
  const uint64_t blocks = len / 4;
  for (uint64_t b = 0; b < blocks; ++b) {
    h ^= scramble(r.Load32(b * 4));
    h = RotateLeft32(h, 13) * 5 + 0xe6546b64u;
  }
  uint32_t tail = 0;
  for (uint64_t i = len & 3; i > 0; --i) tail = (tail << 8) | r.Byte(blocks * 4 + i - 1);
  if (len & 3) h ^= scramble(tail);
  h ^= static_cast<uint32_t>(len);
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

}  // namespace murmur

}  // namespace rankd::portable_hash
