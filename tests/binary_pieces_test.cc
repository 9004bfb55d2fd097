// A binary body's bytes in pieces, as the HTTP server reads them into place (binary_pieces.h): the
// announced sizes found (not inside strings, never past the text), the layout, and parses of random
// requests in pieces equal to the same requests read contiguously, inputs read in place where a
// piece holds them and copied where the announcement misled the layout.
#include "frontend/binary_pieces.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/host_copies.h"
#include "frontend/kserve_json.h"

namespace rankd {
namespace {

TEST(BinaryPieces, FindsTheAnnouncedSizesInOrderAndNotInsideStrings) {
  const std::string json =
      R"({"id":"x\"binary_data_size\":99","inputs":[{"name":"binary_data_size","parameters":{"binary_data_size" : 24}},)"
      R"({"name":"b","parameters":{"lengths":[1],"binary_data_size":8}},{"name":"\\","parameters":{"binary_data_size":0}}]})";
  EXPECT_EQ(AnnouncedBinarySizes(json, 16), std::vector<uint64_t>({24, 8, 0}));
  EXPECT_EQ(AnnouncedBinarySizes(json, 2), std::vector<uint64_t>({24, 8}));
  EXPECT_TRUE(AnnouncedBinarySizes(R"({"binary_data_size":-1,"binary_data_size":"8"})", 16).empty());
  EXPECT_TRUE(AnnouncedBinarySizes(R"("binary_data_size")", 16).empty());
  EXPECT_TRUE(AnnouncedBinarySizes(R"("binary_data_size":)", 16).empty());
  EXPECT_TRUE(AnnouncedBinarySizes("\"binary_data_size\\", 16).empty());
  // Any bytes at all: some list, never a read past them (ASan).
  std::mt19937 rng(7);
  const std::string alphabet = "\"\\:{} 0123456789binary_data_size";
  for (int round = 0; round < 2000; ++round) {
    std::string text(rng() % 64, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    std::vector<char> exact(text.begin(), text.end());  // no terminator after the bytes
    AnnouncedBinarySizes(std::string_view(exact.data(), exact.size()), 8);
  }
}

TEST(BinaryPieces, ReadsIntoPlaceOnlyAJsonPartShortOfTheBody) {
  EXPECT_EQ(JsonPartBytes("120", 500), std::optional<size_t>(120));
  for (const char* header : {"", "0", "500", "600", "-1", "+5", " 5", "5 ", "0x10", "99999999999999999999999"})
    EXPECT_EQ(JsonPartBytes(header, 500), std::nullopt) << header;
}

TEST(BinaryPieces, LaysOutAPieceFromA64ByteBoundaryForEachSizeThatFits) {
  BinaryPieces b = LayOutBinary({100, 0, 8, 5000}, 300);  // 5000 does not fit: the rest in one piece
  ASSERT_EQ(b.pieces.size(), 3u);
  EXPECT_EQ(b.pieces[0].bytes, 100u);
  EXPECT_EQ(b.pieces[1].bytes, 8u);
  EXPECT_EQ(b.pieces[2].bytes, 192u);
  EXPECT_EQ(b.size(), 300u);
  const char* base = static_cast<const char*>(b.storage.raw());
  const char* end = base + b.storage.bytes();
  for (const BinaryPieces::Piece& p : b.pieces) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data) % 64, 0u);
    EXPECT_LE(p.data + p.bytes + 64, end);  // a kernel may read 64 bytes past a tensor's end
  }
  EXPECT_TRUE(LayOutBinary({}, 0).pieces.empty());
  EXPECT_EQ(LayOutBinary({}, 10).pieces.size(), 1u);
}

// A random request of raw and BYTES inputs: its JSON part and binary part.
struct BinaryRequest {
  std::string json, binary;
};

BinaryRequest RandomRequest(std::mt19937& rng, bool misleading_id) {
  BinaryRequest r;
  r.json = misleading_id ? R"({"id":"\"binary_data_size\":12","inputs":[)" : R"({"inputs":[)";
  const int inputs = 1 + static_cast<int>(rng() % 6);
  for (int i = 0; i < inputs; ++i) {
    const int kind = static_cast<int>(rng() % 5);
    const size_t n = rng() % 40;  // 0 to 39 elements
    std::string blob;
    std::string datatype;
    if (kind == 4) {  // BYTES: each element's length, then its bytes
      datatype = "BYTES";
      for (size_t e = 0; e < n; ++e) {
        const uint32_t length = rng() % 9;
        blob.append(reinterpret_cast<const char*>(&length), 4);
        for (uint32_t k = 0; k < length; ++k) blob.push_back(static_cast<char>('a' + rng() % 26));
      }
    } else {
      const char* names[] = {"FP32", "INT64", "INT32", "BOOL"};
      const size_t sizes[] = {4, 8, 4, 1};
      datatype = names[kind];
      blob.resize(n * sizes[kind]);
      for (char& c : blob) c = static_cast<char>(kind == 3 ? rng() % 3 : rng());
      if (kind == 0) {  // finite floats
        for (size_t e = 0; e < n; ++e) {
          const float x = static_cast<float>(rng() % 1000) / 7.0f;
          std::memcpy(blob.data() + 4 * e, &x, 4);
        }
      }
    }
    r.json += std::string(i ? "," : "") + R"({"name":"in)" + std::to_string(i) + R"(","datatype":")" + datatype +
              R"(","shape":[)" + std::to_string(n) + R"(],"parameters":{"binary_data_size":)" +
              std::to_string(blob.size()) + "}}";
    r.binary += blob;
  }
  r.json += "]}";
  return r;
}

bool SameInput(const InferInput& a, const InferInput& b) {
  if (a.name != b.name || a.lengths != b.lengths) return false;
  if (a.strings.shape != b.strings.shape || a.strings.size() != b.strings.size()) return false;
  for (int64_t i = 0; i < a.strings.size(); ++i) {
    if (a.strings.at(i) != b.strings.at(i)) return false;
  }
  if (a.data.defined() != b.data.defined()) return false;
  if (!a.data.defined()) return true;
  return a.data.dtype() == b.data.dtype() && a.data.shape() == b.data.shape() &&
         std::memcmp(a.data.raw(), b.data.raw(), a.data.bytes()) == 0;
}

bool InStorage(const Tensor& t, const BinaryPieces& b) {
  const char* p = static_cast<const char*>(t.raw());
  const char* base = static_cast<const char*>(b.storage.raw());
  return p >= base && p < base + b.storage.bytes();
}

TEST(BinaryPieces, RequestsInPiecesParseAsTheSameRequestsInOneRun) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    const bool misleading = round % 3 == 0;
    BinaryRequest r = RandomRequest(rng, misleading);
    auto whole = ParseInferRequest(r.json, std::string_view(r.binary));
    ASSERT_TRUE(whole.ok()) << whole.status().ToString() << "\n" << r.json;
    const uint64_t copied_before = HostCopiedBytes(HostCopy::kRequest);
    BinaryPieces pieces = PlaceBinary(r.json, r.binary);
    auto placed = ParseInferRequest(r.json, pieces);
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    const uint64_t copied = HostCopiedBytes(HostCopy::kRequest) - copied_before;
    ASSERT_EQ(whole->request.inputs.size(), placed->request.inputs.size());
    size_t viewed_bytes = 0, raw_bytes = 0;
    for (size_t i = 0; i < whole->request.inputs.size(); ++i) {
      const InferInput& in = placed->request.inputs[i];
      EXPECT_TRUE(SameInput(whole->request.inputs[i], in)) << r.json << " input " << i;
      if (!in.data.defined() || in.data.dtype() == DType::kBool) continue;
      raw_bytes += in.data.bytes();
      if (in.data.bytes() && InStorage(in.data, pieces)) {
        viewed_bytes += in.data.bytes();
        EXPECT_EQ(reinterpret_cast<uintptr_t>(in.data.raw()) % 64, 0u);
      }
    }
    if (!misleading) {
      EXPECT_EQ(viewed_bytes, raw_bytes) << r.json;  // every raw input read where it lies
    }
    size_t bools = 0;  // BOOL inputs are copied (their bytes normalised)
    for (const InferInput& in : placed->request.inputs) {
      if (in.data.defined() && in.data.dtype() == DType::kBool) bools += in.data.bytes();
    }
    EXPECT_EQ(copied + viewed_bytes, raw_bytes + bools) << r.json;
  }
}

TEST(BinaryPieces, ViewsKeepTheBodyAliveAfterThePiecesGo) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"INT64","shape":[3],"parameters":{"binary_data_size":24}}]})";
  const int64_t values[3] = {4, 5, 6};
  std::string binary(reinterpret_cast<const char*>(values), 24);
  StatusOr<ParsedInferRequest> parsed = ParseInferRequest(json, PlaceBinary(json, binary));  // the pieces die here
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Tensor& a = parsed->request.inputs[0].data;
  EXPECT_TRUE(a.owns());
  EXPECT_EQ(a.data<int64_t>()[2], 6);  // ASan: still alive
}

// An input of no bytes with no binary part after the JSON (no Inference-Header-Content-Length):
// it once took its bytes from a null pointer and looked for them in a shared memory region that
// was not there (a crash of the server).
TEST(BinaryPieces, AnEmptyBinaryInputNeedsNoBinaryPart) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[0],"parameters":{"binary_data_size":0}}]})";
  for (auto parsed : {ParseInferRequest(json, std::string_view()), ParseInferRequest(json, BinaryPieces())}) {
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(parsed->request.inputs[0].data.shape(), Shape({0}));
  }
  const std::string strings =
      R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[0],"parameters":{"binary_data_size":0}}]})";
  EXPECT_TRUE(ParseInferRequest(strings, std::string_view()).ok());
}

TEST(BinaryPieces, ShortAndLeftOverBinaryPartsAreStillRefused) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"INT32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  auto shorter = ParseInferRequest(json, PlaceBinary(json, std::string(4, 'x')));
  EXPECT_FALSE(shorter.ok());
  EXPECT_NE(shorter.status().message().find("ends before its binary data"), std::string::npos);
  auto longer = ParseInferRequest(json, PlaceBinary(json, std::string(12, 'x')));
  EXPECT_FALSE(longer.ok());
  EXPECT_NE(longer.status().message().find("4 bytes of binary data are left over"), std::string::npos);
}

}  // namespace
}  // namespace rankd
