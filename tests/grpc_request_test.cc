// The KServe v2 gRPC request builder (frontend/grpc_request.h) against good and malformed messages.
#include "frontend/grpc_request.h"

#include <absl/synchronization/mutex.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "frontend/grpc_mutexes.h"
#include "frontend/infer_request_wire.h"

namespace rankd {
namespace {

// One ragged INT64 input of `values` in raw contents, its lengths given as `lengths`.
inference::ModelInferRequest RaggedRequest(const std::vector<int64_t>& values, const std::string& lengths) {
  inference::ModelInferRequest p;
  auto* in = p.add_inputs();
  in->set_name("ids");
  in->set_datatype("INT64");
  in->add_shape(static_cast<int64_t>(values.size()));
  (*in->mutable_parameters())["lengths"].set_string_param(lengths);
  p.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return p;
}

TEST(GrpcRequest, ReadsRaggedLengthsAndSumsThem) {
  auto r = InferRequestFromProto(RaggedRequest({5, 6, 7, 8, 9}, "3,0,2"), int64_t{1} << 26);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->request.inputs.size(), 1u);
  EXPECT_EQ(r->request.inputs[0].lengths, std::vector<int64_t>({3, 0, 2}));
  EXPECT_EQ(r->request.inputs[0].data.data<int64_t>()[4], 9);
  ASSERT_EQ(r->length_sums.size(), 1u);
  EXPECT_EQ(r->length_sums[0].min_length, 0);
  EXPECT_EQ(r->length_sums[0].max_length, 3);
  EXPECT_EQ(r->length_sums[0].offsets.data<int64_t>()[3], 5);

  std::string many;  // W1's size: thousands of lengths in one string
  std::vector<int64_t> values;
  for (int i = 0; i < 7000; ++i) {
    many += (i ? "," : "") + std::to_string(i % 4);
    values.insert(values.end(), static_cast<size_t>(i % 4), i);
  }
  auto big = InferRequestFromProto(RaggedRequest(values, many), int64_t{1} << 26);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_EQ(big->request.inputs[0].lengths.size(), 7000u);
  EXPECT_EQ(big->request.inputs[0].lengths[6999], 6999 % 4);
}

// Typed contents of every datatype give the tensor raw contents of the same values give; INT8 and
// UINT8 values that do not fit are refused, naming the input.
TEST(GrpcRequest, TypedContentsOfEveryDatatypeReadAsRawOnes) {
  inference::ModelInferRequest typed, raw;
  auto add = [&](const std::string& name, const std::string& datatype, auto fill, const void* bytes, size_t size) {
    for (inference::ModelInferRequest* p : {&typed, &raw}) {
      auto* in = p->add_inputs();
      in->set_name(name);
      in->set_datatype(datatype);
      in->add_shape(1);
      in->add_shape(3);
    }
    fill(*typed.mutable_inputs(typed.inputs_size() - 1)->mutable_contents());
    raw.add_raw_input_contents(std::string(static_cast<const char*>(bytes), size));
  };
  const int64_t i64[] = {-5, 0, int64_t{1} << 40};
  const int32_t i32[] = {-7, 0, 70000};
  const int8_t i8[] = {-128, 0, 127};
  const uint8_t u8[] = {0, 1, 255};
  const uint8_t flags[] = {1, 0, 1};
  const float f32[] = {0.5f, -1.25f, 3e9f};
  const double f64[] = {0.1, -2.5, 1e300};
  add(
      "a", "INT64",
      [&](auto& c) {
        for (int64_t v : i64) c.add_int64_contents(v);
      },
      i64, sizeof(i64));
  add(
      "b", "INT32",
      [&](auto& c) {
        for (int32_t v : i32) c.add_int_contents(v);
      },
      i32, sizeof(i32));
  add(
      "c", "INT8",
      [&](auto& c) {
        for (int8_t v : i8) c.add_int_contents(v);
      },
      i8, sizeof(i8));
  add(
      "d", "UINT8",
      [&](auto& c) {
        for (uint8_t v : u8) c.add_uint_contents(v);
      },
      u8, sizeof(u8));
  add(
      "e", "BOOL",
      [&](auto& c) {
        for (uint8_t v : flags) c.add_bool_contents(v != 0);
      },
      flags, sizeof(flags));
  add(
      "f", "FP32",
      [&](auto& c) {
        for (float v : f32) c.add_fp32_contents(v);
      },
      f32, sizeof(f32));
  add(
      "g", "FP64",
      [&](auto& c) {
        for (double v : f64) c.add_fp64_contents(v);
      },
      f64, sizeof(f64));
  auto a = InferRequestFromProto(typed, int64_t{1} << 26);
  auto b = InferRequestFromProto(raw, int64_t{1} << 26);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->request.inputs.size(), 7u);
  for (size_t i = 0; i < a->request.inputs.size(); ++i) {
    const Tensor& x = a->request.inputs[i].data;
    const Tensor& y = b->request.inputs[i].data;
    EXPECT_EQ(x.dtype(), y.dtype()) << i;
    EXPECT_EQ(x.shape(), y.shape()) << i;
    ASSERT_EQ(x.bytes(), y.bytes()) << i;
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.bytes()), 0) << a->request.inputs[i].name;
  }
  for (auto [datatype, value] : {std::pair{"INT8", 128}, std::pair{"INT8", -129}, std::pair{"UINT8", 256}}) {
    inference::ModelInferRequest p;
    auto* in = p.add_inputs();
    in->set_name("small");
    in->set_datatype(datatype);
    in->add_shape(1);
    if (std::string(datatype) == "INT8") {
      in->mutable_contents()->add_int_contents(value);
    } else {
      in->mutable_contents()->add_uint_contents(static_cast<uint32_t>(value));
    }
    auto r = InferRequestFromProto(p, int64_t{1} << 26);
    ASSERT_FALSE(r.ok()) << datatype << " " << value;
    EXPECT_NE(r.status().message().find("input 'small': value " + std::to_string(value) + " is out of range"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(GrpcRequest, MalformedLengthsAreRefusedWithTheInputsName) {
  for (const char* bad : {"3,,2", "3,", ",3", "a", "3;2", "-1", "+3", "3, 2", "1234567890123"}) {
    auto r = InferRequestFromProto(RaggedRequest({1, 2, 3}, bad), int64_t{1} << 26);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("input 'ids': lengths must be"), std::string::npos) << r.status().message();
  }
}

// Whether two messages hold the same fields (a NaN equal to a NaN: random bytes make some).
bool SameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  google::protobuf::util::DefaultFieldComparator floats;
  floats.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&floats);
  return differ.Compare(a, b);
}

// `bytes` cut into pieces of `stride` bytes, as gRPC's slices would hold them.
std::vector<std::string_view> Pieces(const std::string& bytes, size_t stride) {
  std::vector<std::string_view> pieces;
  for (size_t at = 0; at < bytes.size(); at += stride)
    pieces.emplace_back(bytes.data() + at, std::min(stride, bytes.size() - at));
  return pieces;
}

// Two ragged INT64 inputs, a dense FP32 one, a BYTES one, parameters, outputs and an unknown
// field (a group, which protobuf keeps): raw contents of 0, 12, 40 and 8,000 bytes.
inference::ModelInferRequest MixedRequest() {
  inference::ModelInferRequest p = RaggedRequest({5, 6, 7, 8, 9}, "3,0,2");
  p.set_model_name("w1");
  p.set_id("request-7");
  (*p.mutable_parameters())["priority"].set_uint64_param(3);
  auto* dense = p.add_inputs();
  dense->set_name("dense");
  dense->set_datatype("FP32");
  dense->add_shape(1);
  dense->add_shape(2000);
  std::vector<float> values(2000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  p.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  auto* empty = p.add_inputs();
  empty->set_name("none");
  empty->set_datatype("INT64");
  empty->add_shape(0);
  p.add_raw_input_contents("");
  auto* text = p.add_inputs();
  text->set_name("city");
  text->set_datatype("BYTES");
  text->add_shape(2);
  p.add_raw_input_contents(std::string("\x07\0\0\0Beijing\x01\0\0\0x", 16));
  p.add_outputs()->set_name("score");
  p.GetReflection()->MutableUnknownFields(&p)->AddGroup(99)->AddVarint(1, 42);
  return p;
}

// Typed contents: INT64 and FP32 numbers and two BYTES inputs' strings (empty, long, and
// bytes that are not UTF-8), with unknown fields inside an input and inside its contents.
inference::ModelInferRequest TypedRequest() {
  inference::ModelInferRequest p;
  p.set_model_name("w4s");
  auto* ids = p.add_inputs();
  ids->set_name("ids");
  ids->set_datatype("INT64");
  ids->add_shape(3);
  for (int64_t v : {1, 2, 3}) ids->mutable_contents()->add_int64_contents(v);
  auto* city = p.add_inputs();
  city->set_name("city");
  city->set_datatype("BYTES");
  city->add_shape(3);
  for (const std::string& v : {std::string("Beijing"), std::string(), std::string(300, 'x')})
    city->mutable_contents()->add_bytes_contents(v);
  city->GetReflection()->MutableUnknownFields(city)->AddVarint(77, 5);
  auto* contents = city->mutable_contents();
  contents->GetReflection()->MutableUnknownFields(contents)->AddLengthDelimited(50, "zz");
  auto* dense = p.add_inputs();
  dense->set_name("dense");
  dense->set_datatype("FP32");
  dense->add_shape(1);
  dense->add_shape(2);
  for (float v : {0.5f, 1.5f}) dense->mutable_contents()->add_fp32_contents(v);
  auto* tags = p.add_inputs();
  tags->set_name("tags");
  tags->set_datatype("BYTES");
  tags->add_shape(2);
  tags->mutable_contents()->add_bytes_contents("a,b");
  tags->mutable_contents()->add_bytes_contents(std::string("\xff\0\xfe", 3));
  p.add_outputs()->set_name("score");
  return p;
}

// One BYTES input whose last string, empty, is the message's last field.
inference::ModelInferRequest EndsInAnEmptyString() {
  inference::ModelInferRequest p;
  auto* text = p.add_inputs();
  text->set_name("city");
  text->set_datatype("BYTES");
  text->add_shape(2);
  text->mutable_contents()->add_bytes_contents("a");
  text->mutable_contents()->add_bytes_contents("");
  return p;
}

TEST(InferRequestWire, ReadsTheSameMessageAndRequestFromSlicesOfAnySize) {
  for (const inference::ModelInferRequest& sent : {MixedRequest(), TypedRequest(), EndsInAnEmptyString()}) {
    const std::string wire = sent.SerializeAsString();
    auto expected = InferRequestFromProto(sent, int64_t{1} << 26);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    for (size_t stride : {size_t{1}, size_t{3}, size_t{7}, size_t{64}, size_t{4096}, wire.size()}) {
      WireContents contents;
      auto read = ReadInferRequest(Pieces(wire, stride), contents);
      ASSERT_TRUE(read.ok()) << read.status().ToString();
      EXPECT_EQ(read->raw_input_contents_size(), 0);
      ASSERT_EQ(contents.size(), sent.raw_input_contents_size());
      for (int i = 0; i < sent.inputs_size(); ++i) {
        EXPECT_EQ(read->inputs(i).contents().bytes_contents_size(), 0);  // left in the slices
        EXPECT_EQ(contents.string_count(i), sent.inputs(i).contents().bytes_contents_size());
      }
      for (int i = 0; i < contents.size(); ++i) ASSERT_EQ(contents.bytes(i), sent.raw_input_contents(i).size());
      inference::ModelInferRequest rebuilt = *read;
      contents.PutBack(rebuilt);
      EXPECT_TRUE(SameMessage(sent, rebuilt)) << "stride " << stride;

      auto built = InferRequestFromProto(*read, contents, int64_t{1} << 26);
      ASSERT_TRUE(built.ok()) << built.status().ToString();
      ASSERT_EQ(built->request.inputs.size(), expected->request.inputs.size());
      for (size_t i = 0; i < built->request.inputs.size(); ++i) {
        const InferInput& a = built->request.inputs[i];
        const InferInput& b = expected->request.inputs[i];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.lengths, b.lengths);
        EXPECT_EQ(a.strings.bytes, b.strings.bytes);
        EXPECT_EQ(a.strings.offsets, b.strings.offsets);
        ASSERT_EQ(a.data.bytes(), b.data.bytes()) << a.name;
        if (a.data.bytes()) {
          EXPECT_EQ(std::memcmp(a.data.raw(), b.data.raw(), a.data.bytes()), 0) << a.name;
        }
      }
      EXPECT_EQ(built->request.priority, sent.parameters().count("priority") ? 3 : 0);
      EXPECT_EQ(built->request.id, sent.id());
    }
  }
}

TEST(InferRequestWire, ReadsIntoAMessageOnAnArenaOneRequestAfterAnother) {
  // As the server reads calls: one message on an arena of a reused block, read into again and again;
  // nothing of a request stays in the message for the next (a shorter request after a longer one, a
  // malformed one between them), and the thread's buffer of the fields outlives each.
  std::vector<char> block(64 << 10);
  const std::vector<inference::ModelInferRequest> sent = {MixedRequest(), TypedRequest(), EndsInAnEmptyString(),
                                                          MixedRequest()};
  for (int round = 0; round < 2; ++round) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block.data();
    options.initial_block_size = block.size();
    google::protobuf::Arena arena(options);
    auto& read = *google::protobuf::Arena::CreateMessage<inference::ModelInferRequest>(&arena);
    for (const inference::ModelInferRequest& one : sent) {
      const std::string wire = one.SerializeAsString();
      WireContents contents;
      const std::string broken = wire.substr(0, wire.size() / 2);
      EXPECT_FALSE(ReadInferRequestInto(Pieces(broken, 7), contents, read).ok());
      ASSERT_TRUE(ReadInferRequestInto(Pieces(wire, 5), contents, read).ok());
      inference::ModelInferRequest rebuilt = read;
      contents.PutBack(rebuilt);
      EXPECT_TRUE(SameMessage(one, rebuilt)) << "round " << round << ", request " << one.id();
    }
    EXPECT_LE(arena.SpaceAllocated(), static_cast<uint64_t>(block.size())) << "the requests outgrew the first block";
  }
}

TEST(InferRequestWire, RefusesExactlyWhatProtobufRefuses) {
  for (const std::string& wire : {MixedRequest().SerializeAsString(), TypedRequest().SerializeAsString()}) {
    // Every truncation, and every byte overwritten by a value that breaks a tag or a length.
    std::vector<std::string> cases;
    for (size_t n = 0; n < wire.size(); ++n) cases.push_back(wire.substr(0, n));
    for (size_t i = 0; i < wire.size(); i += 5) {
      for (char c : {'\xff', '\x00', '\x07', '\x3c'}) {
        std::string broken = wire;
        broken[i] = c;
        cases.push_back(broken);
      }
    }
    cases.push_back("\x3a\xff\xff\xff\xff\x0f");                      // raw contents of 4 GB in a message of 6 bytes
    cases.push_back(std::string("\x3a\x05") + "ab");                  // raw contents of 5 bytes, 2 present
    cases.push_back("\x0c");                                          // an end-group tag with no group open
    cases.push_back("\x8a\x80\x80\x80\x10\x00");                      // a 5-byte tag past 32 bits (field 1, length 0)
    cases.push_back("\x3a\x80\x80\x80\x80\x80\x00");                  // a length in 6 bytes
    cases.push_back("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01");  // a 10-byte varint (unknown field 1)
    for (const std::string& bytes : cases) {
      inference::ModelInferRequest proto;
      const bool accepted = proto.ParseFromString(bytes);
      WireContents contents;
      auto read = ReadInferRequest(Pieces(bytes, 5), contents);
      ASSERT_EQ(read.ok(), accepted) << read.status().ToString();
      if (!accepted) {
        EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(read.status().message().find("not a ModelInferRequest"), std::string::npos);
      }
    }
    // And random mutations: the same verdict, and the same message when both accept.
    std::mt19937_64 rng(5);
    for (int round = 0; round < 20000; ++round) {
      std::string bytes = wire;
      for (int m = static_cast<int>(rng() % 4); m >= 0 && !bytes.empty(); --m) {
        const size_t at = rng() % bytes.size();
        switch (rng() % 4) {
          case 0:
            bytes[at] = static_cast<char>(rng());
            break;
          case 1:
            bytes.insert(at, 1, static_cast<char>(rng()));
            break;
          case 2:
            bytes.erase(at, 1);
            break;
          default:
            bytes.resize(at);
            break;
        }
      }
      inference::ModelInferRequest proto;
      const bool accepted = proto.ParseFromString(bytes);
      WireContents contents;
      auto read = ReadInferRequest(Pieces(bytes, 1 + rng() % 50), contents);
      ASSERT_EQ(read.ok(), accepted) << "round " << round << ": " << read.status().ToString();
      if (!accepted) continue;
      inference::ModelInferRequest rebuilt = *read;
      contents.PutBack(rebuilt);
      ASSERT_TRUE(SameMessage(proto, rebuilt)) << "round " << round;
    }
  }
  WireContents contents;
  auto past = ReadInferRequest({std::string_view("\x3a\x05"
                                                 "ab",
                                                 4)},
                               contents);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("raw_input_contents entry 0 runs past the end"), std::string::npos)
      << past.status().message();
}

// An empty input, output or parameter is a few bytes on the wire and a parsed message of a few
// hundred: a request of 16 M empty inputs (32 MB) took a server to 5.5 GB and 30 s of CPU. Past
// 65,536 of them in all (nested parameters included) the reader refuses it before protobuf parses.
TEST(InferRequestWire, RefusesRequestsOfMoreThan65536InputsOutputsAndParameters) {
  auto read = [](const std::string& bytes) {
    WireContents contents;
    return ReadInferRequest(Pieces(bytes, 4096), contents).status();
  };
  const std::string name = std::string("\x0a\x03") + "din";
  auto repeated = [&](const std::string& entry, size_t n) {
    std::string bytes = name;
    for (size_t i = 0; i < n; ++i) bytes += entry;
    return bytes;
  };
  const std::string empty_input("\x2a\x00", 2), empty_output("\x32\x00", 2), raw_entry("\x3a\x00", 2);
  const std::string parameter = std::string("\x22\x03\x0a\x01") + "p";  // {"p": unset}
  for (const std::string& entry : {empty_input, empty_output, raw_entry, parameter}) {
    EXPECT_TRUE(read(repeated(entry, 65536)).ok()) << read(repeated(entry, 65536)).ToString();
    const Status refused = read(repeated(entry, 65537));
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find("more than 65536 inputs, outputs, raw contents and parameters"), std::string::npos)
        << refused.ToString();
  }
  // Nested: one input (its parameters are field 4) and one output (field 2), each with 65,536.
  auto nested = [&](char tag, char parameter_tag) {
    std::string inner;
    for (int i = 0; i < 65536; ++i) inner += std::string(1, parameter_tag) + parameter.substr(1);
    std::string bytes = name + std::string(1, tag);
    for (size_t n = inner.size();; n >>= 7) {  // the length, a varint
      bytes.push_back(static_cast<char>(n < 0x80 ? n : (n & 0x7f) | 0x80));
      if (n < 0x80) break;
    }
    return bytes + inner;
  };
  for (const std::string& bytes : {nested('\x2a', '\x22'), nested('\x32', '\x12')}) {
    inference::ModelInferRequest proto;
    ASSERT_TRUE(proto.ParseFromString(bytes));  // well formed: refused for its size alone
    EXPECT_NE(read(bytes).message().find("more than 65536"), std::string::npos) << read(bytes).ToString();
  }
}

// The model a message names, read from its first bytes (the gRPC server chooses the thread that
// handles a call by it): as protobuf serialises a request, from any field order clients write the
// name and version in first, and nothing for a head that does not begin with the name or breaks off.
TEST(InferRequestWire, PeeksTheModelAMessageBeginsWith) {
  inference::ModelInferRequest q;
  q.set_model_name("din_batched");
  q.set_model_version("3");
  q.set_id("r1");
  q.add_inputs()->set_name("item");
  q.add_raw_input_contents(std::string(64, 'x'));
  const std::string wire = q.SerializeAsString();
  std::optional<NamedModel> named = PeekNamedModel(wire);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->name, "din_batched");
  EXPECT_EQ(named->version, "3");
  q.clear_model_version();
  const std::string unversioned = q.SerializeAsString();  // the views are into it
  named = PeekNamedModel(unversioned);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->name, "din_batched");
  EXPECT_EQ(named->version, "");
  // The version first, then the name; a long name (a two-byte length).
  const std::string long_name(300, 'm');
  const std::string reordered = std::string("\x12\x01") + "7" + "\x0a\xac\x02" + long_name + "\x1a\x02" + "id";
  named = PeekNamedModel(reordered);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->name, long_name);
  EXPECT_EQ(named->version, "7");
  // Not found: the name after another field, absent, cut off, a malformed tag, empty.
  EXPECT_FALSE(PeekNamedModel(std::string("\x1a\x02") + "id" + "\x0a\x03" + "din").has_value());
  EXPECT_FALSE(PeekNamedModel(std::string("\x12\x01") + "7").has_value());
  for (size_t cut = 0; cut < 13; ++cut) {  // "din_batched" ends at byte 13
    EXPECT_FALSE(PeekNamedModel(std::string_view(wire).substr(0, cut)).has_value()) << cut;
  }
  EXPECT_TRUE(PeekNamedModel(std::string_view(wire).substr(0, 13)).has_value());
  EXPECT_FALSE(PeekNamedModel(std::string(6, '\xff')).has_value());
  EXPECT_FALSE(PeekNamedModel("").has_value());
}

// gRPC's locks are Abseil's, and Debian's Abseil (built without NDEBUG) checks every lock's order
// against a process-wide graph: locks taken in two orders abort the process (first test, in a
// process of its own). rankd turns that off before it starts gRPC (frontend/grpc_mutexes.h): then
// the same locks leave the process running.
void TakeTwoLocksInBothOrders() {
  absl::Mutex a, b;
  {
    absl::MutexLock first(&a);
    absl::MutexLock second(&b);
  }
  {
    absl::MutexLock first(&b);
    absl::MutexLock second(&a);
  }
}

TEST(GrpcMutexes, DebiansAbseilAbortsOnLocksTakenInTwoOrders) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the detection as Abseil leaves it
  EXPECT_DEATH(TakeTwoLocksInBothOrders(), "deadlock");
}

TEST(GrpcMutexes, NoDeadlockDetectionOnceTurnedOff) {
  TurnOffMutexDeadlockDetection();
  TakeTwoLocksInBothOrders();
  TurnOffMutexDeadlockDetection();  // again: nothing changes
  TakeTwoLocksInBothOrders();
}

}  // namespace
}  // namespace rankd
