// String features (docs/strings.md): the hashes against published known answers, strings turned
// into ids (hashed, split and parsed, split and hashed) with every refusal, the binary form of
// BYTES elements against malformed data, the config's checks, and zoo models served strings
// scoring as they do with the ids those strings stand for.
#include <gtest/gtest.h>

#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/string_hash.h"
#include "frontend/bytes_elements.h"
#include "model/config.h"
#include "model/ops/hash_strings.h"
#include "serving/model.h"
#include "serving/string_ids.h"
#include "test_util.h"

namespace rankd {
namespace {

void ExpectError(const Status& s, const std::string& fragment) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "'" << s.message() << "' lacks '" << fragment << "'";
}

PackedStrings Strings(Shape shape, const std::vector<std::string>& values) {
  PackedStrings s;
  s.shape = std::move(shape);
  for (const std::string& v : values) s.Append(v);
  return s;
}

InferInput BytesInput(Shape shape, const std::vector<std::string>& values, std::vector<int64_t> lengths = {}) {
  InferInput in;
  in.name = "s";
  in.strings = Strings(std::move(shape), values);
  in.lengths = std::move(lengths);
  return in;
}

InputConfig Config(std::optional<StringHash> hash, int64_t buckets, const std::string& split = "") {
  InputConfig c;
  c.name = "s";
  c.dtype = DType::kI64;
  c.strings.bytes = true;
  c.strings.hash = hash;
  c.strings.buckets = buckets;
  c.strings.split = split;
  c.ragged = !split.empty();
  return c;
}

std::vector<int64_t> Ids(const InferInput& in) {
  const int64_t* p = in.data.data<int64_t>();
  return std::vector<int64_t>(p, p + in.data.size());
}

// Published answers: TensorFlow's documented tf.strings.to_hash_bucket_fast example, xxHash's
// XXH64 vectors, MurmurHash3 x86_32's (SMHasher's verification strings).
TEST(StringHash, KnownAnswers) {
  std::vector<uint64_t> buckets;
  for (const char* s : {"Hello", "TensorFlow", "2.x"})
    buckets.push_back(HashBucket(StringHash::kFingerprint64, 0, 3, s));
  EXPECT_EQ(buckets, std::vector<uint64_t>({0, 2, 2}));
  EXPECT_EQ(HashString(StringHash::kFingerprint64, 0, ""), 0x9ae16a3b2f90404fu);
  EXPECT_EQ(HashString(StringHash::kXxHash64, 0, ""), 0xef46db3751d8e999u);
  EXPECT_EQ(HashString(StringHash::kXxHash64, 0, "a"), 0xd24ec4f1a98c6e5bu);
  EXPECT_EQ(HashString(StringHash::kXxHash64, 0, "abc"), 0x44bc2cf5ad770999u);
  EXPECT_EQ(HashString(StringHash::kMurmur3_32, 0, ""), 0u);
  EXPECT_EQ(HashString(StringHash::kMurmur3_32, 1, ""), 0x514e28b7u);
  EXPECT_EQ(HashString(StringHash::kMurmur3_32, 0, "test"), 0xba6bd213u);
  EXPECT_EQ(HashString(StringHash::kMurmur3_32, 0, "Hello, world!"), 0xc0363e43u);
  EXPECT_EQ(HashString(StringHash::kMurmur3_32, 0, "The quick brown fox jumps over the lazy dog"), 0x2e4ff723u);
  EXPECT_NE(HashString(StringHash::kXxHash64, 1, "abc"), HashString(StringHash::kXxHash64, 0, "abc"));
  for (const char* name : {"fingerprint64", "xxhash64", "murmur3_32"}) {
    EXPECT_EQ(StringHashName(*StringHashFromName(name)), std::string(name));
  }
  EXPECT_FALSE(StringHashFromName("murmur3").has_value());
}

TEST(StringIds, HashedInTheStringsShape) {
  auto ids = StringsToIds(Config(StringHash::kFingerprint64, 3), BytesInput({1, 3}, {"Hello", "TensorFlow", "2.x"}));
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->data.shape(), Shape({1, 3}));
  EXPECT_EQ(Ids(*ids), std::vector<int64_t>({0, 2, 2}));
  // A ragged list of strings keeps its lengths; an empty string is hashed as one.
  auto ragged = StringsToIds(Config(StringHash::kXxHash64, 1000), BytesInput({3}, {"a", "", "abc"}, {2, 0, 1}));
  ASSERT_TRUE(ragged.ok());
  EXPECT_EQ(ragged->lengths, std::vector<int64_t>({2, 0, 1}));
  EXPECT_EQ(Ids(*ragged), std::vector<int64_t>({static_cast<int64_t>(0xd24ec4f1a98c6e5bu % 1000),
                                                static_cast<int64_t>(0xef46db3751d8e999u % 1000),
                                                static_cast<int64_t>(0x44bc2cf5ad770999u % 1000)}));
  // INT32 ids.
  InputConfig narrow = Config(StringHash::kMurmur3_32, 7);
  narrow.dtype = DType::kI32;
  auto small = StringsToIds(narrow, BytesInput({2}, {"test", ""}));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->data.dtype(), DType::kI32);
  EXPECT_EQ(small->data.data<int32_t>()[0], static_cast<int32_t>(0xba6bd213u % 7));
  EXPECT_EQ(small->data.data<int32_t>()[1], 0);
}

TEST(StringIds, SplitRowsParsedOrHashed) {
  auto parsed = StringsToIds(Config(std::nullopt, 0, ","), BytesInput({4}, {"1,2,3", "", " 40 , -5", "7"}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->lengths, std::vector<int64_t>({3, 0, 2, 1}));
  EXPECT_EQ(Ids(*parsed), std::vector<int64_t>({1, 2, 3, 40, -5, 7}));
  // A delimiter of several bytes; [rows, 1] is a string per row too.
  auto wide = StringsToIds(Config(std::nullopt, 0, "||"), BytesInput({2, 1}, {"9||8", "123456789012"}));
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(Ids(*wide), std::vector<int64_t>({9, 8, 123456789012}));
  // Hashed pieces, empty ones included (as TensorFlow's split keeps them).
  auto hashed = StringsToIds(Config(StringHash::kXxHash64, 1 << 20, "|"), BytesInput({2}, {"a|abc|", "abc"}));
  ASSERT_TRUE(hashed.ok());
  const auto h = [](const char* s) { return static_cast<int64_t>(HashBucket(StringHash::kXxHash64, 0, 1 << 20, s)); };
  EXPECT_EQ(hashed->lengths, std::vector<int64_t>({3, 1}));
  EXPECT_EQ(Ids(*hashed), std::vector<int64_t>({h("a"), h("abc"), h(""), h("abc")}));
}

// Split rows of random pieces, most of them ids (spaces around, a sign, up to 20 digits, INT32's
// and INT64's edges) and some not (empty, "+5", "1x", "- 3", a tab, a trailing delimiter, a row
// past max_string_bytes), through each single-byte delimiter's fast way and a two-byte one's general
// way: the ids and lengths of a reference that splits and parses each piece on its own, or
// the error naming the first row it fails at.
TEST(StringIds, SplitIdsMatchAPieceByPieceReference) {
  std::mt19937_64 rng(29);
  // Not ids; ':' and '?' lie just past the digits.
  const std::vector<std::string> oddities = {"",
                                             "+5",
                                             "1x",
                                             "4:",
                                             "12?5",
                                             "- 3",
                                             "\t7",
                                             "5 5",
                                             "-",
                                             " ",
                                             "99999999999999999999",
                                             "9223372036854775808",
                                             "-9223372036854775809"};
  const std::vector<std::string> edges = {
      "2147483647",          "2147483648",           "-2147483648",           "-2147483649",
      "9223372036854775807", "-9223372036854775808", "000000000000000000042", "-0"};
  auto piece = [&]() -> std::string {
    const uint64_t kind = rng() % 100;
    if (kind < 3) return oddities[rng() % oddities.size()];
    if (kind < 8) return edges[rng() % edges.size()];
    std::string p = rng() % 10 == 0 ? "-" : "";
    const int digits = 1 + static_cast<int>(rng() % (rng() % 4 == 0 ? 20 : 9));
    for (int d = 0; d < digits; ++d) p += static_cast<char>('0' + rng() % 10);
    if (rng() % 8 == 0) p = " " + p;
    if (rng() % 8 == 0) p += "  ";
    return p;
  };
  for (const std::string delimiter : {",", ";", "|", "::"}) {
    for (DType dtype : {DType::kI64, DType::kI32}) {
      for (int trial = 0; trial < 300; ++trial) {
        InputConfig config = Config(std::nullopt, 0, delimiter);
        config.dtype = dtype;
        config.strings.max_bytes = trial % 10 == 0 ? 40 : 65536;
        const int64_t rows = 1 + static_cast<int64_t>(rng() % 4);
        std::vector<std::string> texts;
        std::vector<int64_t> want_ids, want_lengths;
        int64_t failing_row = -1;
        for (int64_t r = 0; r < rows; ++r) {
          std::string text;
          // A quarter of the trials with rows of up to 60 pieces.
          const int pieces = static_cast<int>(rng() % (trial % 4 == 0 ? 60 : 12));
          for (int k = 0; k < pieces; ++k) text += (k ? delimiter : "") + piece();
          if (rng() % 50 == 0) text += delimiter;
          texts.push_back(text);
          if (failing_row >= 0) continue;
          // The reference: the row checked against max_string_bytes, then each piece on its own.
          bool ok = static_cast<int64_t>(text.size()) <= config.strings.max_bytes;
          std::vector<std::string> split;
          for (size_t at = 0; ok && !text.empty();) {
            const size_t next = text.find(delimiter, at);
            split.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
            if (next == std::string::npos) break;
            at = next + delimiter.size();
            if (at == text.size()) split.push_back("");
          }
          int64_t count = 0;
          for (std::string p : split) {
            while (!p.empty() && p.front() == ' ') p.erase(p.begin());
            while (!p.empty() && p.back() == ' ') p.pop_back();
            int64_t id = 0;
            const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), id);
            const bool fits = dtype == DType::kI64 || (id >= INT32_MIN && id <= INT32_MAX);
            if (p.empty() || ec != std::errc() || end != p.data() + p.size() || !fits) {
              ok = false;
              break;
            }
            want_ids.push_back(id);
            ++count;
          }
          if (!ok) failing_row = r;
          want_lengths.push_back(count);
        }
        const std::string what = "delimiter '" + delimiter + "', " + DTypeName(dtype) + ", trial " +
                                 std::to_string(trial) + ", row 0 '" + texts[0] + "'";
        auto got = StringsToIds(config, BytesInput({rows}, texts));
        if (failing_row >= 0) {
          ASSERT_FALSE(got.ok()) << what;
          ExpectError(got.status(), "element " + std::to_string(failing_row) + " ");
          continue;
        }
        ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
        EXPECT_EQ(got->lengths, want_lengths) << what;
        ASSERT_EQ(got->data.dtype(), dtype) << what;
        std::vector<int64_t> ids;
        for (int64_t i = 0; i < got->data.size(); ++i)
          ids.push_back(dtype == DType::kI64 ? got->data.data<int64_t>()[i] : got->data.data<int32_t>()[i]);
        EXPECT_EQ(ids, want_ids) << what;
      }
    }
  }
}

// Split rows hashed piece by piece (empty pieces too, a trailing delimiter's among them), through a
// single-byte delimiter's one pass and a two-byte one's general way, against each piece hashed on
// its own; a row past max_string_bytes is named.
TEST(StringIds, SplitAndHashedPiecesMatchAPieceByPieceReference) {
  std::mt19937_64 rng(31);
  for (const std::string delimiter : {"|", ",", "::"}) {
    for (int trial = 0; trial < 200; ++trial) {
      InputConfig config = Config(StringHash::kXxHash64, 1 + static_cast<int64_t>(rng() % 100000), delimiter);
      config.strings.seed = rng() % 3;
      config.strings.max_bytes = trial % 10 == 0 ? 30 : 65536;
      const int64_t rows = 1 + static_cast<int64_t>(rng() % 4);
      std::vector<std::string> texts;
      std::vector<int64_t> want_ids, want_lengths;
      int64_t failing_row = -1;
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<std::string> pieces(rng() % 8);
        std::string text;
        for (size_t k = 0; k < pieces.size(); ++k) {
          for (uint64_t n = rng() % 7; n > 0; --n) pieces[k] += static_cast<char>("ab: ,|x"[rng() % 7]);
          if (pieces[k].find(delimiter) != std::string::npos || pieces[k].ends_with(delimiter.substr(0, 1))) {
            pieces[k] = "p";  // no delimiter inside a piece, nor half of one before the next
          }
          text += (k ? delimiter : "") + pieces[k];
        }
        if (pieces.size() == 1 && pieces[0].empty()) pieces.clear();  // "" is an empty list
        texts.push_back(text);
        if (failing_row >= 0) continue;
        if (static_cast<int64_t>(text.size()) > config.strings.max_bytes) {
          failing_row = r;
          continue;
        }
        for (const std::string& piece : pieces)
          want_ids.push_back(static_cast<int64_t>(HashBucket(StringHash::kXxHash64, config.strings.seed,
                                                             static_cast<uint64_t>(config.strings.buckets), piece)));
        want_lengths.push_back(static_cast<int64_t>(pieces.size()));
      }
      const std::string what = "delimiter '" + delimiter + "', trial " + std::to_string(trial);
      auto got = StringsToIds(config, BytesInput({rows}, texts));
      if (failing_row >= 0) {
        ASSERT_FALSE(got.ok()) << what;
        ExpectError(got.status(), "element " + std::to_string(failing_row) + " is ");
        continue;
      }
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      EXPECT_EQ(got->lengths, want_lengths) << what;
      EXPECT_EQ(Ids(*got), want_ids) << what;
    }
  }
}

TEST(StringIds, MistakesNameTheInputAndElement) {
  const InputConfig split = Config(std::nullopt, 0, ",");
  ExpectError(StringsToIds(split, BytesInput({2}, {"1,2", "3,x"})).status(), "input 's': element 1 has the piece 'x'");
  ExpectError(StringsToIds(split, BytesInput({1}, {"1,,2"})).status(), "element 0 has an empty piece");
  ExpectError(StringsToIds(split, BytesInput({1}, {"1,"})).status(), "empty piece");
  ExpectError(StringsToIds(split, BytesInput({1}, {"99999999999999999999"})).status(), "where an INT64 id belongs");
  ExpectError(StringsToIds(split, BytesInput({1}, {"1.5"})).status(), "the piece '1.5'");
  ExpectError(StringsToIds(split, BytesInput({2, 2}, {"1", "2", "3", "4"})).status(), "one string per row");
  ExpectError(StringsToIds(split, BytesInput({2}, {"1", "2"}, {1, 1})).status(), "without lengths");
  InputConfig narrow = split;
  narrow.dtype = DType::kI32;
  ExpectError(StringsToIds(narrow, BytesInput({1}, {"3000000000"})).status(), "where an INT32 id belongs");

  InputConfig limited = Config(StringHash::kXxHash64, 10);
  limited.strings.max_bytes = 4;
  EXPECT_TRUE(StringsToIds(limited, BytesInput({1}, {"abcd"})).ok());
  ExpectError(StringsToIds(limited, BytesInput({2}, {"ab", "abcde"})).status(),
              "element 1 is 5 bytes; the limit is 4 (max_string_bytes)");
  InputConfig utf8 = Config(StringHash::kXxHash64, 10);
  utf8.strings.utf8 = true;
  EXPECT_TRUE(StringsToIds(utf8, BytesInput({2}, {"Beijing", "\xe5\x8c\x97\xe4\xba\xac"})).ok());
  ExpectError(StringsToIds(utf8, BytesInput({2}, {"ok", "\xff\xfe"})).status(), "element 1 is not valid UTF-8");
  ExpectError(StringsToIds(utf8, BytesInput({1}, {"\xe5\x8c"})).status(), "not valid UTF-8");  // cut short
  utf8.strings.utf8 = false;  // bytes are bytes unless the config says otherwise
  EXPECT_TRUE(StringsToIds(utf8, BytesInput({1}, {"\xff\xfe"})).ok());
  // Packed strings an in-process caller got wrong: the shape, or offsets past the bytes.
  ExpectError(StringsToIds(utf8, BytesInput({3}, {"a", "b"})).status(), "do not match its bytes");
  InferInput past = BytesInput({2}, {"a", "b"});
  past.strings.offsets[2] = 9;
  ExpectError(StringsToIds(utf8, past).status(), "do not match its bytes");
  past.strings.offsets = {0, 2, 1};
  ExpectError(StringsToIds(utf8, past).status(), "do not match its bytes");
}

// A PackedStrings holding no string allocates nothing (every input of every request has one); its
// offsets start at 0 with the first string. An input of no strings is still a valid BYTES input.
TEST(PackedStrings, NoneHeldAllocatesNothing) {
  PackedStrings s;
  EXPECT_EQ(s.size(), 0);
  EXPECT_EQ(s.offsets.capacity(), 0u);
  s.Append("ab");
  s.Append("");
  EXPECT_EQ(s.offsets, (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(s.size(), 2);
  EXPECT_EQ(s.at(0), "ab");
  EXPECT_EQ(s.at(1), "");
  const InputConfig config = Config(StringHash::kXxHash64, 100);
  auto none = StringsToIds(config, BytesInput({0}, {}));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->data.shape(), Shape({0}));
  Tensor bytes;
  for (bool device_reads : {false, true}) {
    auto records = StringRecords(config, BytesInput({0}, {}), device_reads, bytes);
    ASSERT_TRUE(records.ok()) << records.status().ToString();
    EXPECT_EQ(records->shape(), Shape({0, 2}));
  }
  // Strings written in place after Reserve: the offsets start at 0 and end each where its bytes end.
  PackedStrings written;
  written.Reserve(2, 3);
  EXPECT_EQ(written.size(), 0);
  EXPECT_GE(written.offsets.capacity(), 3u);
  written.bytes += "xyz";
  written.EndString();
  written.EndString();
  written.Append("w");
  EXPECT_EQ(written.offsets, (std::vector<int64_t>{0, 3, 3, 4}));
  EXPECT_EQ(written.at(0), "xyz");
  EXPECT_EQ(written.at(1), "");
  EXPECT_EQ(written.at(2), "w");
  InferInput stray = BytesInput({0}, {});
  stray.strings.bytes = "x";  // bytes without offsets: not what a parser makes
  ExpectError(StringsToIds(config, stray).status(), "do not match its bytes");
}

// Records of strings the backend hashes (model/ops/hash_strings.h): each points at its string in
// the copied bytes (8-byte aligned, zeros past the last), or, where a device would read them and
// the copy is not pinned (here: no pinned pool), carries its bucket; either way the HashStrings
// kernel gives the ids StringsToIds gives, INT64 or INT32, in the strings' shape.
TEST(StringRecords, PointIntoTheirBytesOrCarryTheirBuckets) {
  const std::vector<std::string> values = {"Hello", "", "TensorFlow", "2.x", std::string(70, 'z'), "f17=v3"};
  for (DType dtype : {DType::kI64, DType::kI32}) {
    for (StringHash h : {StringHash::kFingerprint64, StringHash::kXxHash64, StringHash::kMurmur3_32}) {
      InputConfig config = Config(h, 1000);
      config.dtype = dtype;
      config.strings.seed = h == StringHash::kFingerprint64 ? 0 : 42;
      const InferInput in = BytesInput({2, 3}, values);
      auto want = StringsToIds(config, in);
      ASSERT_TRUE(want.ok());
      for (bool device_reads : {false, true}) {
        Tensor bytes;
        auto records = StringRecords(config, in, device_reads, bytes);
        ASSERT_TRUE(records.ok()) << records.status().ToString();
        ASSERT_EQ(records->shape(), Shape({2, 3, 2}));
        const int64_t* r = records->data<int64_t>();
        if (device_reads) {
          EXPECT_FALSE(bytes.defined());
          for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(r[2 * i + 1], hash_strings::kPrehashed);
        } else {
          ASSERT_TRUE(bytes.defined());
          const auto base = reinterpret_cast<intptr_t>(bytes.raw());
          EXPECT_EQ(base % 8, 0);
          for (int64_t i = 0; i < 6; ++i) {
            EXPECT_EQ(r[2 * i + 1], static_cast<int64_t>(values[static_cast<size_t>(i)].size()));
            EXPECT_EQ(std::string(reinterpret_cast<const char*>(r[2 * i]), static_cast<size_t>(r[2 * i + 1])),
                      values[static_cast<size_t>(i)]);
          }
          const int64_t end = r[2 * 5] + r[2 * 5 + 1] - base;
          ASSERT_GE(static_cast<int64_t>(bytes.bytes()), (end + 7) / 8 * 8 + hash_strings::kTailBytes);
          for (int64_t b = end; b < static_cast<int64_t>(bytes.bytes()); ++b) EXPECT_EQ(bytes.data<uint8_t>()[b], 0);
        }
        testing::GraphBuilder g;
        const int in_records = g.Input("s", DType::kI64, {2, 3, 2});
        g.Output(g.Op("HashStrings", {in_records},
                      {{"function", std::string(StringHashName(h))},
                       {"seed", static_cast<int64_t>(config.strings.seed)},
                       {"buckets", int64_t{1000}},
                       {"dtype", std::string(DTypeName(dtype))}}));
        auto ids = testing::RunGraph(g.graph(), {*records});
        ASSERT_TRUE(ids.ok()) << ids.status().ToString();
        EXPECT_EQ((*ids)[0].shape(), Shape({2, 3}));
        ASSERT_EQ((*ids)[0].dtype(), dtype);
        EXPECT_EQ(std::memcmp((*ids)[0].raw(), want->data.raw(), want->data.bytes()), 0)
            << StringHashName(h) << (device_reads ? ", hashed on the host" : ", hashed by the kernel");
      }
    }
  }
  // The checks StringsToIds makes, made here too.
  InputConfig limited = Config(StringHash::kXxHash64, 10);
  limited.strings.max_bytes = 4;
  Tensor bytes;
  ExpectError(StringRecords(limited, BytesInput({2}, {"ab", "abcde"}), false, bytes).status(),
              "element 1 is 5 bytes; the limit is 4 (max_string_bytes)");
  ExpectError(StringRecords(limited, BytesInput({3}, {"a", "b"}), false, bytes).status(), "do not match its bytes");
  ExpectError(StringRecords(limited, BytesInput({2}, {"a", "b"}, {1, 1}), false, bytes).status(), "not ragged");
}

// A model whose BYTES input its backend hashes reads records, through a HashStrings node first in
// its graph; a record that is neither a string nor a bucket fails the request, not the process.
TEST(StringModels, HashedByTheBackendThroughItsGraph) {
  auto model = Model::Load(testing::SourcePath("models/zoo/mmoe_strings"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->load_report().hashed_string_inputs, 1);
  testing::GraphBuilder g;
  const int records = g.Input("s", DType::kI64, {2, 2});
  g.Output(g.Op("HashStrings", {records},
                {{"function", std::string("xxhash64")}, {"buckets", int64_t{10}}, {"dtype", std::string("INT64")}}));
  Tensor bad = Tensor::Zeros(DType::kI64, {2, 2});
  bad.data<int64_t>()[1] = hash_strings::kPrehashed;
  bad.data<int64_t>()[3] = 5;  // five bytes at address 0
  auto ids = testing::RunGraph(g.graph(), {bad});
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("record 1 is not a string"), std::string::npos) << ids.status().ToString();
  // An unknown function, or no buckets, is refused when the graph is checked.
  testing::GraphBuilder h;
  const int r2 = h.Input("s", DType::kI64, {2, 2});
  h.Output(h.Op("HashStrings", {r2},
                {{"function", std::string("md5")}, {"buckets", int64_t{10}}, {"dtype", std::string("INT64")}}));
  EXPECT_FALSE(testing::RunGraph(h.graph(), {bad}).ok());
}

std::string Elements(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    const auto n = static_cast<uint32_t>(v.size());
    for (int b = 0; b < 4; ++b) out += static_cast<char>((n >> (8 * b)) & 0xff);
    out += v;
  }
  return out;
}

TEST(BytesElements, DecodedOrRefused) {
  auto s = DecodeBytesElements(Elements({"ab", "", std::string(300, 'x')}), 3, "in");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 3);
  EXPECT_EQ(s->at(0), "ab");
  EXPECT_EQ(s->at(1), "");
  EXPECT_EQ(s->at(2), std::string(300, 'x'));
  EXPECT_EQ(DecodeBytesElements("", 0, "in")->size(), 0);
  EXPECT_EQ(DecodeBytesElements("", 0, "in")->offsets.capacity(), 0u);  // none held: nothing allocated
  const std::string two = Elements({"ab", "cd"});
  ExpectError(DecodeBytesElements(two, 4, "in").status(), "12 bytes cannot hold 4 BYTES elements");
  ExpectError(DecodeBytesElements(two, 3, "in").status(), "the data ends before BYTES element 2");
  ExpectError(DecodeBytesElements(two.substr(0, 9), 2, "in").status(), "the data ends before BYTES element 1");
  ExpectError(DecodeBytesElements(two.substr(0, 11), 2, "in").status(), "element 1 says 2 bytes but 1 are left");
  ExpectError(DecodeBytesElements(two, 1, "in").status(), "6 bytes are left after its 1 BYTES elements");
  std::string huge = two;
  huge[0] = huge[1] = huge[2] = huge[3] = '\xff';  // 4 GiB - 1
  ExpectError(DecodeBytesElements(huge, 2, "in").status(), "element 0 says 4294967295 bytes");
  ExpectError(DecodeBytesElements(two, -1, "in").status(), "cannot hold -1");
}

StatusOr<ModelConfig> ParseYaml(const std::string& yaml) { return ParseModelConfig(yaml, true); }

TEST(StringConfig, Refusals) {
  const std::string head = "inputs:\n  - name: s\n";
  EXPECT_TRUE(ParseYaml(head + "    datatype: BYTES\n    hash: {function: xxhash64, buckets: 10, seed: 7}\n").ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    datatype: BYTES\n", "needs 'hash' (strings to ids) or 'split'"},
      {"    datatype: BYTES\n    hash: {function: murmur3, buckets: 10}\n", "unknown hash function 'murmur3'"},
      {"    datatype: BYTES\n    hash: {function: xxhash64}\n", "'buckets', a positive integer"},
      {"    datatype: BYTES\n    hash: {function: xxhash64, buckets: 0}\n", "'buckets', a positive integer"},
      {"    datatype: BYTES\n    hash: {function: fingerprint64, buckets: 5, seed: 1}\n", "takes no seed"},
      {"    datatype: BYTES\n    hash: {function: murmur3_32, buckets: 5, seed: 4294967296}\n", "from 0 to 4294967295"},
      {"    datatype: BYTES\n    hash: {function: xxhash64, buckets: 5, salt: 1}\n", "unknown field 'salt'"},
      {"    datatype: BYTES\n    split: \"\"\n", "split must be a non-empty delimiter"},
      {"    datatype: BYTES\n    split: \",\"\n    max_string_bytes: 0\n", "max_string_bytes must be"},
      {"    datatype: INT64\n    hash: {function: xxhash64, buckets: 10}\n", "hash needs datatype BYTES"},
      {"    datatype: INT64\n    split: \",\"\n", "split needs datatype BYTES"},
  };
  for (const auto& [body, fragment] : cases) ExpectError(ParseYaml(head + body).status(), fragment);
}

// A zoo model's directory with its model file and `config` instead of the zoo's config.
std::string ModelWithConfig(const std::string& zoo, const std::string& name, const std::string& config) {
  std::ifstream in(testing::SourcePath("models/zoo/" + zoo + "/1/model.onnx"), std::ios::binary);
  std::stringstream onnx;
  onnx << in.rdbuf();
  testing::WriteTempFile(name + "/1/model.onnx", onnx.str());
  const std::string path = testing::WriteTempFile(name + "/config.yaml", config);
  return path.substr(0, path.size() - std::string("/config.yaml").size());
}

TEST(StringConfig, GraphChecks) {
  const std::string dense =
      "inputs:\n  - name: dense\n    datatype: BYTES\n    hash: {function: xxhash64, buckets: 10}\n";
  ExpectError(Model::Load(ModelWithConfig("mmoe", "mmoe_float_strings", dense), -1).status(),
              "the model takes FP32; strings become INT64 or INT32 ids");
  const std::string split = "inputs:\n  - name: sparse\n    datatype: BYTES\n    split: \",\"\n";
  ExpectError(Model::Load(ModelWithConfig("mmoe", "mmoe_split", split), -1).status(),
              "split makes a list of ids per row: the input must be ragged");
}

// W4s (models/zoo/mmoe_strings) scores as mmoe does with the ids its strings hash to.
TEST(StringModels, MmoeStringsScoresAsTheIdsItsStringsHashTo) {
  auto strings = Model::Load(testing::SourcePath("models/zoo/mmoe_strings"), -1);
  ASSERT_TRUE(strings.ok()) << strings.status().ToString();
  auto ids = Model::Load(testing::SourcePath("models/zoo/mmoe"), -1);
  ASSERT_TRUE(ids.ok());
  std::mt19937_64 rng(7);
  for (int64_t rows : {1, 5, 64}) {
    InferRequest with_ids = (*ids)->ExampleRequest(rows);
    InferRequest with_strings;
    InferInput sparse_ids{"ids", Tensor::Zeros(DType::kI64, {rows, 14}), {}, {}};
    InferInput categories;
    categories.name = "categories";
    categories.strings.shape = {rows, 6};
    int64_t* sparse = with_ids.inputs[0].data.data<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < 20; ++f) {
        if (f < 14) {
          sparse[r * 20 + f] = static_cast<int64_t>(rng() % 100);
          sparse_ids.data.data<int64_t>()[r * 14 + f] = sparse[r * 20 + f];
        } else {
          const std::string s = "f" + std::to_string(f) + "=v" + std::to_string(rng() % 1000);
          categories.strings.Append(s);
          sparse[r * 20 + f] = static_cast<int64_t>(HashBucket(StringHash::kXxHash64, 0, 100, s));
        }
      }
    }
    RandomizeFloats(with_ids, static_cast<uint32_t>(rows));
    with_strings.inputs = {sparse_ids, categories, with_ids.inputs[1]};
    auto want = (*ids)->Infer(with_ids);
    auto got = (*strings)->Infer(with_strings);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << " / " << got.status().ToString();
    testing::ExpectOutputsNear({(*got)[0].data, (*got)[1].data}, {(*want)[0].data, (*want)[1].data}, 0,
                               std::to_string(rows) + " rows");
  }
}

// DIN with its behaviour sequences sent as delimited strings ("12,7,40") and its category hashed.
TEST(StringModels, DinWithSplitSequencesScoresAsItsIds) {
  std::string config;
  {
    std::ifstream in(testing::SourcePath("models/zoo/din/config.yaml"));
    std::stringstream s;
    s << in.rdbuf();
    config = s.str();
  }
  for (const char* seq : {"seq_items", "seq_cats"}) {
    const std::string from = "  - name: " + std::string(seq) + "\n    datatype: INT64\n";
    ASSERT_NE(config.find(from), std::string::npos);
    config.replace(config.find(from), from.size(),
                   "  - name: " + std::string(seq) + "\n    datatype: BYTES\n    split: \",\"\n");
  }
  const std::string cat = "  - name: cat\n    datatype: INT64\n";
  ASSERT_NE(config.find(cat), std::string::npos);
  config.replace(config.find(cat), cat.size(),
                 "  - name: cat\n    datatype: BYTES\n    hash: {function: murmur3_32, seed: 42, buckets: 5}\n");
  auto strings = Model::Load(ModelWithConfig("din", "din_strings", config), -1);
  ASSERT_TRUE(strings.ok()) << strings.status().ToString();
  auto ids = Model::Load(testing::SourcePath("models/zoo/din"), -1);
  ASSERT_TRUE(ids.ok());
  std::mt19937_64 rng(11);
  for (int64_t rows : {1, 3, 17}) {
    InferRequest with_ids = (*ids)->ExampleRequest(rows, 1);
    InferRequest with_strings = with_ids;
    const int64_t length = static_cast<int64_t>(rng() % 21);  // 0 (no history) to max_length
    for (size_t i : {size_t{1}, size_t{2}}) {                 // seq_items, seq_cats: one user row
      InferInput& in = with_ids.inputs[i];
      in.data = Tensor::Zeros(DType::kI64, {length});
      in.lengths = {length};
      std::string row;
      for (int64_t k = 0; k < length; ++k) {
        in.data.data<int64_t>()[k] = static_cast<int64_t>(rng() % 5);
        row += (k ? "," : "") + std::to_string(in.data.data<int64_t>()[k]);
      }
      with_strings.inputs[i] = InferInput{in.name, Tensor(), {}, Strings({1}, {row})};
    }
    std::vector<std::string> cats;
    for (int64_t r = 0; r < rows; ++r) {
      cats.push_back("cat" + std::to_string(rng() % 1000));
      with_ids.inputs[4].data.data<int64_t>()[r] =
          static_cast<int64_t>(HashBucket(StringHash::kMurmur3_32, 42, 5, cats.back()));
    }
    with_strings.inputs[4] = InferInput{"cat", Tensor(), {}, Strings({rows}, cats)};
    auto want = (*ids)->Infer(with_ids);
    auto got = (*strings)->Infer(with_strings);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << " / " << got.status().ToString();
    testing::ExpectOutputsNear({(*got)[0].data}, {(*want)[0].data}, 0, std::to_string(rows) + " rows");
  }
  // The wrong kind of input for either config is named.
  InferRequest r = (*strings)->ExampleRequest(2);
  r.inputs[4] = (*ids)->ExampleRequest(2).inputs[4];
  ExpectError((*strings)->Infer(r).status(), "input 'cat' must be BYTES, got INT64");
  InferRequest s = (*ids)->ExampleRequest(2);
  s.inputs[4] = InferInput{"cat", Tensor(), {}, Strings({2}, {"a", "b"})};
  ExpectError((*ids)->Infer(s).status(), "input 'cat' must be INT64, got BYTES");
}

}  // namespace
}  // namespace rankd
