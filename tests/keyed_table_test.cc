// Keyed tables (tables.keyed, docs/embedding.md): the key index maps every key to its row and no
// other key to any; HugeCTR's key/emb_vector files are read and malformed ones refused; the pass
// makes lookups read keys, unknown keys the default row, on the CPU and (where there is one) the
// GPU; a zoo model scores keys exactly as it scored their rows, and counts the unknown ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "compile/passes.h"
#include "embedding/table_budget.h"
#include "frontend/kserve_json.h"
#include "model/config.h"
#include "model/key_index.h"
#include "model/keyed_table_files.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

std::string TempDir(const std::string& name) {
  const std::string dir =
      std::filesystem::path(testing::WriteTempFile(name + ".marker", "")).parent_path().string() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Distinct keys over the whole int64 range, negative ones included unless `non_negative`.
std::vector<int64_t> RandomKeys(size_t count, std::mt19937_64& rng, bool non_negative) {
  std::set<int64_t> seen;
  std::vector<int64_t> keys;
  while (keys.size() < count) {
    auto key = static_cast<int64_t>(rng());
    if (non_negative) key &= INT64_MAX;
    if (seen.insert(key).second) keys.push_back(key);
  }
  return keys;
}

TEST(KeyIndex, MapsEveryKeyToItsRowAndNoOtherKey) {
  std::mt19937_64 rng(11);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{5000}}) {
    std::vector<int64_t> keys = RandomKeys(count, rng, false);
    if (count == 7) keys = {0, -1, 1, INT64_MIN, INT64_MAX, 1LL << 40, 3LL << 40};  // low bits alike
    auto index = BuildKeyIndex(keys);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    ASSERT_EQ(index->rank(), 2);
    ASSERT_EQ(index->dim(1), 2);
    const int64_t capacity = index->dim(0);
    EXPECT_GE(capacity, 2 * static_cast<int64_t>(count));
    EXPECT_EQ(capacity & (capacity - 1), 0);
    for (size_t row = 0; row < keys.size(); ++row) ASSERT_EQ(FindKey(*index, keys[row]), static_cast<int64_t>(row));
    std::set<int64_t> known(keys.begin(), keys.end());
    for (int i = 0; i < 2000; ++i) {
      const auto other = static_cast<int64_t>(rng());
      if (!known.count(other)) {
        ASSERT_EQ(FindKey(*index, other), -1) << other;
      }
    }
  }
}

TEST(KeyIndex, RefusesAKeyGivenTwice) {
  auto index = BuildKeyIndex(std::vector<int64_t>{5, 9, -3, 9});
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.status().message().find("key 9 is given twice (rows 1 and 3)"), std::string::npos)
      << index.status().ToString();
}

TEST(KeyedTableFiles, ReadsWhatWasWrittenAndRefusesMalformedFiles) {
  const std::string dir = TempDir("keyed_files");
  Tensor vectors = testing::MakeF32({3, 2}, {1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(WriteKeyedTableFiles(dir, {10, -20, 30}, vectors).ok());
  auto files = ReadKeyedTableFiles(dir, 2);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->keys, (std::vector<int64_t>{10, -20, 30}));
  ASSERT_EQ(files->vectors.shape(), (Shape{3, 2}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(files->vectors.data<float>()[i], vectors.data<float>()[i]);

  auto wrong_width = ReadKeyedTableFiles(dir, 3);  // 24 bytes of vectors; 3 keys of 3 need 36
  ASSERT_FALSE(wrong_width.ok());
  EXPECT_NE(wrong_width.status().message().find("emb_vector holds 24 bytes; 3 keys of 3 FP32 values need 36"),
            std::string::npos)
      << wrong_width.status().ToString();
  std::ofstream(dir + "/key", std::ios::binary | std::ios::app) << "abc";  // 27 bytes: not whole keys
  auto torn = ReadKeyedTableFiles(dir, 2);
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find("key holds 27 bytes, not a whole number of 8-byte keys"), std::string::npos)
      << torn.status().ToString();
  auto missing = ReadKeyedTableFiles(dir + "/absent", 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent/key"), std::string::npos);
}

// Files numpy.save wrote (tests/data/keyed_npy, NumPy 1.24): keys [10, -20, 30, 2^40] as '<i8'
// ([10, -20, 30, 7] as '<i4'), vectors arange(12).reshape(4, 3) * 0.5 - 1 as '<f4' and '<f8', and
// one in Fortran order; read where a folder has no `key`, every mistake named.
TEST(KeyedTableFiles, ReadsNumPyFilesAndRefusesMalformedOnes) {
  const std::string data = testing::SourcePath("tests/data/keyed_npy/");
  auto folder = [&](const std::string& name, const std::string& keys, const std::string& vectors) {
    const std::string dir = TempDir(name);
    std::filesystem::copy_file(data + keys, dir + "/keys.npy", std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(data + vectors, dir + "/vectors.npy", std::filesystem::copy_options::overwrite_existing);
    return dir;
  };
  for (const char* vectors : {"vectors.npy", "vectors64.npy"}) {
    auto files = ReadKeyedTableFiles(folder(std::string("npy_") + vectors, "keys.npy", vectors), 3);
    ASSERT_TRUE(files.ok()) << vectors << ": " << files.status().ToString();
    EXPECT_EQ(files->keys, (std::vector<int64_t>{10, -20, 30, int64_t{1} << 40}));
    ASSERT_EQ(files->vectors.shape(), (Shape{4, 3}));
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(files->vectors.data<float>()[i], 0.5f * static_cast<float>(i) - 1);
  }
  auto narrow = ReadKeyedTableFiles(folder("npy_i4", "keys32.npy", "vectors.npy"), 3);
  ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
  EXPECT_EQ(narrow->keys, (std::vector<int64_t>{10, -20, 30, 7}));

  auto expect_refused = [](const StatusOr<KeyedTableFiles>& got, const std::string& says) {
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find(says), std::string::npos) << got.status().ToString();
  };
  expect_refused(ReadKeyedTableFiles(folder("npy_width", "keys.npy", "vectors.npy"), 4),
                 "vectors.npy holds vectors of shape (4, 3); 4 keys of width 4 need (4, 4)");
  expect_refused(ReadKeyedTableFiles(folder("npy_fortran", "keys.npy", "fortran.npy"), 3), "Fortran order");
  expect_refused(ReadKeyedTableFiles(folder("npy_keys_as_floats", "vectors.npy", "vectors.npy"), 3),
                 "keys.npy must hold one dimension of keys");
  const std::string dir = folder("npy_cut", "keys.npy", "vectors.npy");
  std::filesystem::resize_file(dir + "/vectors.npy", std::filesystem::file_size(dir + "/vectors.npy") - 4);
  expect_refused(ReadKeyedTableFiles(dir, 3), "vectors.npy holds 44 bytes of elements");
  std::ofstream(dir + "/vectors.npy", std::ios::binary | std::ios::trunc) << "not numpy at all";
  expect_refused(ReadKeyedTableFiles(dir, 3), "is not a NumPy .npy file");
  // A version 1 file: magic, version, the header's length, the header, the elements.
  auto npy = [](const std::string& header, size_t length, const std::string& elements) {
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(length & 0xff);
    bytes += static_cast<char>(length >> 8);
    return bytes + header + elements;
  };
  const std::string no_descr = "{'shape': (1,)}";
  std::ofstream(dir + "/vectors.npy", std::ios::binary | std::ios::trunc) << npy(no_descr, no_descr.size(), "");
  expect_refused(ReadKeyedTableFiles(dir, 3), "names no 'descr'");
  std::ofstream(dir + "/vectors.npy", std::ios::binary | std::ios::trunc) << npy("{'descr': '<f4'}", 255, "");
  expect_refused(ReadKeyedTableFiles(dir, 3), "header longer than the file");
  const std::string strings = "{'descr': '<U3', 'fortran_order': False, 'shape': (4, 3), }";
  std::ofstream(dir + "/vectors.npy", std::ios::binary | std::ios::trunc)
      << npy(strings, strings.size(), std::string(4 * 3 * 3, 'x'));
  expect_refused(ReadKeyedTableFiles(dir, 3), "holds '<U3' values");
}

TEST(KeyedTables, ConfigNamesEachMistake) {
  auto good = ParseModelConfig("tables: {keyed: {t0: {path: sparse/t0, default_value: 0.5}, t1: {path: /abs}}}", true);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_EQ(good->keyed_tables.size(), 2u);
  EXPECT_EQ(good->keyed_tables.at("t0").path, "sparse/t0");
  EXPECT_EQ(good->keyed_tables.at("t0").default_value, 0.5f);
  EXPECT_EQ(good->keyed_tables.at("t1").default_value, 0.0f);
  const std::pair<const char*, const char*> bad[] = {
      {"tables: {keyed: [t0]}", "tables.keyed must map"},
      {"tables: {keyed: {t0: sparse}}", "tables.keyed.t0 must be a mapping"},
      {"tables: {keyed: {t0: {default_value: 1}}}", "tables.keyed.t0.path"},
      {"tables: {keyed: {t0: {path: x, default_value: high}}}", "tables.keyed.t0.default_value"},
      {"tables: {keyed: {t0: {path: x, cache: 3}}}", "cache"},
  };
  for (const auto& [text, message] : bad) {
    auto c = ParseModelConfig(text, true);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(message), std::string::npos) << text << ": " << c.status().ToString();
  }
}

// bag(table, ids) + Gather(table, row) over a [20, 4] table keyed by 15 of its rows' keys.
struct KeyedGraph {
  Graph graph;
  int table = -1;
};

KeyedGraph BagAndGather(const Tensor& table) {
  GraphBuilder g;
  KeyedGraph k;
  k.table = g.Const("t", table);
  int bag = g.Op("EmbeddingBag", {k.table, g.Input("ids", DType::kI64, {-1, 3})});
  int row = g.Op("Gather", {k.table, g.Input("row", DType::kI64, {-1})});
  g.Output(g.Op("Add", {bag, row}));
  k.graph = g.graph();
  return k;
}

TEST(KeyedTables, LookupsReadTheRowsOfTheirKeysAndUnknownKeysTheDefaultRow) {
  std::mt19937_64 rng(5);
  const Tensor table = testing::RandomTable(DType::kF32, 20, 4, rng);
  // The files hold rows 0..14 of `table` in a shuffled order, each under a random key.
  std::vector<int64_t> order(15);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const std::vector<int64_t> keys = RandomKeys(15, rng, true);  // keys[j]: the key of file row j
  Tensor vectors = Tensor::Empty(DType::kF32, {15, 4});
  for (int64_t j = 0; j < 15; ++j) {
    std::copy_n(table.data<float>() + order[static_cast<size_t>(j)] * 4, 4, vectors.data<float>() + j * 4);
  }
  const std::string dir = TempDir("keyed_pass");
  ASSERT_TRUE(WriteKeyedTableFiles(dir, keys, vectors).ok());
  KeyedGraph k = BagAndGather(table);
  auto keyed = KeyTables(k.graph, {{"t", KeyedTableConfig{dir, 0.25f}}});
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_EQ(*keyed, 1);
  EXPECT_EQ(testing::CountOps(k.graph, "KeyedRows"), 2);  // the bag's ids and the Gather's
  EXPECT_EQ(k.graph.constants.at(k.table).shape(), (Shape{16, 4}));
  Graph merged = k.graph;  // and the two as one node, one launch
  EXPECT_EQ(MergeKeyedRows(merged), 2);
  EXPECT_EQ(testing::CountOps(merged, "KeyedRows"), 1);
  EXPECT_EQ(merged.nodes.front().op, "KeyedRows");
  EXPECT_EQ(merged.nodes.front().outputs.size(), 2u);

  // Requests: the bags read keys, an unknown key and empty slots (-1); the Gather a known and an
  // unknown key.
  const int64_t unknown = keys[0] ^ 1;
  ASSERT_EQ(std::count(keys.begin(), keys.end(), unknown), 0);
  const std::vector<int64_t> ids = {keys[3], keys[7], -1, unknown, keys[3], keys[14], -1, -1, -1};
  const std::vector<int64_t> rows = {keys[9], unknown, keys[0]};
  auto vector_of = [&](int64_t key, int64_t d) -> float {
    auto at = std::find(keys.begin(), keys.end(), key);
    return at == keys.end() ? 0.25f : vectors.data<float>()[(at - keys.begin()) * 4 + d];
  };
  std::vector<Tensor> inputs = {testing::MakeI64({3, 3}, ids), testing::MakeI64({3}, rows)};
  std::vector<const Backend*> backends = {&CpuBackend()};
  if (const Backend* cuda = testing::CudaOrNull()) backends.push_back(cuda);
  for (const Backend* backend : backends) {
    for (const Graph* graph : {&k.graph, &merged}) {
      auto got = testing::RunGraph(*graph, inputs, {}, *backend);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (int64_t b = 0; b < 3; ++b) {
        for (int64_t d = 0; d < 4; ++d) {
          float want = 0;
          for (int64_t j = 0; j < 3; ++j) {
            const int64_t id = ids[static_cast<size_t>(b * 3 + j)];
            if (id >= 0) want += vector_of(id, d);
          }
          want += vector_of(rows[static_cast<size_t>(b)], d);
          EXPECT_FLOAT_EQ((*got)[0].data<float>()[b * 4 + d], want) << backend->name() << " row " << b << " col " << d;
        }
      }
    }
  }
}

TEST(KeyedTables, TheirIndexesCountAgainstTheGpuBudget) {
  std::mt19937_64 rng(9);
  const Tensor table = testing::RandomTable(DType::kF32, 20, 4, rng);
  const std::string dir = TempDir("keyed_budget");
  ASSERT_TRUE(WriteKeyedTableFiles(dir, RandomKeys(15, rng, true), testing::RandomTable(DType::kF32, 15, 4, rng)).ok());
  KeyedGraph k = BagAndGather(table);
  ASSERT_TRUE(KeyTables(k.graph, {{"t", KeyedTableConfig{dir, 0}}}).ok());
  const int64_t index = KeyIndexBytes(k.graph);
  EXPECT_EQ(index, 32 * 16);        // 15 keys: 32 slots of a key and a row
  const int64_t rows = 16 * 4 * 4;  // the 15 rows and the default row
  TableBudget budget;
  budget.gpu_bytes = index - 1;
  auto refused = PlaceTables(k.graph, budget);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("key indexes"), std::string::npos) << refused.status().ToString();
  budget.gpu_bytes = index + 2 * rows;  // room for the table on the device after the index
  auto fits = PlaceTables(k.graph, budget);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 1u);
  EXPECT_EQ((*fits)[0].tier, TableTier::kDevice);
  budget.gpu_bytes = index + rows;  // the budget alone would keep it there; what the index leaves does not
  auto cached = PlaceTables(k.graph, budget);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_NE((*cached)[0].tier, TableTier::kDevice);
}

TEST(KeyedTables, RefusesWhatCannotBeKeyed) {
  std::mt19937_64 rng(6);
  const Tensor table = testing::RandomTable(DType::kF32, 8, 4, rng);
  const std::string dir = TempDir("keyed_refused");
  ASSERT_TRUE(WriteKeyedTableFiles(dir, {4, -2}, testing::RandomTable(DType::kF32, 2, 4, rng)).ok());
  auto message = [&](Graph graph, const std::string& name, const std::string& path) {
    auto r = KeyTables(graph, {{name, KeyedTableConfig{path, 0}}});
    return r.ok() ? std::string("ok") : r.status().message();
  };
  // A bag reads the table, and its empty slots are negative ids: key -2 cannot be told from one.
  EXPECT_NE(message(BagAndGather(table).graph, "t", dir).find("key -2 is negative"), std::string::npos);
  EXPECT_NE(message(BagAndGather(table).graph, "u", dir).find("tables.keyed.u: the model has no constant table"),
            std::string::npos);
  EXPECT_NE(message(BagAndGather(table).graph, "t", dir + "/absent").find("tables.keyed.t: cannot open"),
            std::string::npos);
  GraphBuilder g;  // a table a product also reads
  int t = g.Const("t", table);
  g.Output(g.Op("MatMul", {g.Input("x", DType::kF32, {-1, 8}), t}));
  EXPECT_NE(message(g.graph(), "t", dir).find("reads the table other than as a lookup"), std::string::npos);
  // Only Gathers read it: negative keys are keys like any other.
  GraphBuilder gather;
  gather.Output(gather.Op("Gather", {gather.Const("t", table), gather.Input("row", DType::kI64, {-1})}));
  EXPECT_EQ(message(gather.graph(), "t", dir), "ok");
}

// DLRM-DCNv2 from the zoo with its first table keyed: the files hold that table's rows shuffled,
// each under a random 63-bit key; requests whose ids for that table are replaced by the rows' keys
// score exactly as the original requests score on the original model. Unknown keys are counted.
TEST(KeyedTables, ZooModelScoresKeysExactlyAsItScoredTheirRows) {
  const std::string zoo = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto original = Model::Load(zoo, -1);
  ASSERT_TRUE(original.ok()) << original.status().ToString();
  ASSERT_FALSE((*original)->tables().empty());
  const TableInfo& info = (*original)->tables().front();
  const Tensor* rows = (*original)->graph().FindConstant(info.value);
  ASSERT_TRUE(rows && rows->dtype() == DType::kF32) << info.name;
  std::mt19937_64 rng(8);
  const int64_t count = rows->dim(0), dim = rows->dim(1);
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const std::vector<int64_t> file_keys = RandomKeys(static_cast<size_t>(count), rng, true);
  std::vector<int64_t> key_of_row(static_cast<size_t>(count));
  Tensor vectors = Tensor::Empty(DType::kF32, {count, dim});
  for (int64_t j = 0; j < count; ++j) {
    const int64_t row = order[static_cast<size_t>(j)];
    key_of_row[static_cast<size_t>(row)] = file_keys[static_cast<size_t>(j)];
    std::copy_n(rows->data<float>() + row * dim, dim, vectors.data<float>() + j * dim);
  }
  const std::string dir = TempDir("keyed_zoo");
  ASSERT_TRUE(WriteKeyedTableFiles(dir, file_keys, vectors).ok());
  auto config = LoadModelConfig(zoo);
  ASSERT_TRUE(config.ok());
  config->keyed_tables[info.name] = KeyedTableConfig{dir, 0.0f};
  auto keyed = Model::LoadFile(zoo + "/1/model.onnx", *config);
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_EQ((*keyed)->load_report().keyed_tables, 1);
  // The request input the table's keys arrive in: what its KeyedRows node reads.
  std::string input;
  for (const Node& n : (*keyed)->graph().nodes) {
    if (n.op == "KeyedRows") input = (*keyed)->graph().values[static_cast<size_t>(n.inputs[0])].name;
  }
  input = input.substr(0, input.find(".values"));
  ASSERT_NE((*keyed)->config().FindInput(input), nullptr) << input;

  std::ifstream requests(testing::SourcePath("tests/data/zoo/dlrm_dcnv2.requests.jsonl"));
  std::string line;
  int scored = 0;
  while (std::getline(requests, line) && scored < 5) {
    auto request = ParseInferRequestJson(line);
    ASSERT_TRUE(request.ok()) << request.status().ToString();
    auto want = (*original)->Infer(*request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (InferInput& in : request->inputs) {
      if (in.name != input) continue;
      ASSERT_EQ(in.data.dtype(), DType::kI64);
      for (int64_t i = 0; i < in.data.size(); ++i) {
        int64_t& id = in.data.data<int64_t>()[i];
        if (id >= 0) id = key_of_row[static_cast<size_t>(id)];
      }
    }
    auto got = (*keyed)->Infer(*request);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      for (int64_t e = 0; e < (*want)[o].data.size(); ++e) {
        ASSERT_EQ((*got)[o].data.data<float>()[e], (*want)[o].data.data<float>()[e]) << "request " << scored;
      }
    }
    ++scored;
  }
  EXPECT_EQ(scored, 5);
  auto counts = (*keyed)->UnknownKeys();
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0], std::make_pair(info.name, int64_t{0}));

  // Two keys the files lack, in the first request with two ids for the table: both read the
  // default row and are counted.
  requests.clear();
  requests.seekg(0);
  std::optional<InferRequest> request;
  while (!request && std::getline(requests, line)) {
    auto parsed = ParseInferRequestJson(line);
    ASSERT_TRUE(parsed.ok());
    int64_t replaced = 0;
    for (InferInput& in : parsed->inputs) {
      if (in.name != input) continue;
      for (int64_t i = 0; i < in.data.size(); ++i) {
        int64_t& id = in.data.data<int64_t>()[i];
        if (id < 0) continue;
        id = key_of_row[static_cast<size_t>(id)];
        if (replaced < 2) id = (id ^ 1) & INT64_MAX, ++replaced;
      }
    }
    if (replaced == 2) request = std::move(*parsed);
  }
  ASSERT_TRUE(request.has_value());
  ASSERT_TRUE((*keyed)->Infer(*request).ok());
  EXPECT_EQ((*keyed)->UnknownKeys()[0].second, 2);
  ASSERT_TRUE((*keyed)->Infer(*request).ok());
  EXPECT_EQ((*keyed)->UnknownKeys()[0].second, 4);
}

}  // namespace
}  // namespace rankd
