// ModelRepository: version policies, control modes, failed reloads, unload.
#include "serving/repository.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_util.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;

// A repository with model "m" (the tiny MMoE) in versions `versions`, and `config` as its YAML.
std::string MakeRepo(const std::string& tag, const std::vector<int>& versions, const std::string& config) {
  fs::path root = fs::temp_directory_path() / ("rankd_repo_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (int v : versions) {
    fs::create_directories(root / "m" / std::to_string(v));
    fs::copy_file(testing::SourcePath("models/zoo/mmoe/1/model.onnx"), root / "m" / std::to_string(v) / "model.onnx");
  }
  if (!config.empty()) std::ofstream(root / "m" / "config.yaml") << config;
  return root.string();
}

std::vector<int64_t> ReadyVersions(const ModelRepository& repo) {
  std::vector<int64_t> out;
  for (const RepositoryIndexEntry& e : repo.Index()) {
    if (e.state == "READY") out.push_back(e.version);
  }
  return out;
}

TEST(Repository, VersionPolicies) {
  auto latest = ModelRepository::Create({MakeRepo("latest", {1, 2, 3}, ""), ModelControlMode::kNone, {}, {}, {}});
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(ReadyVersions(**latest), std::vector<int64_t>({3}));
  EXPECT_EQ((*latest)->Get("m").value()->version(), 3);
  EXPECT_EQ((*latest)->Get("m", 1).status().code(), StatusCode::kNotFound);

  auto two = ModelRepository::Create({MakeRepo("two", {1, 2, 3}, "version_policy:\n  latest: {num_versions: 2}\n"),
                                      ModelControlMode::kNone,
                                      {},
                                      {},
                                      {}});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(ReadyVersions(**two), std::vector<int64_t>({2, 3}));

  auto specific =
      ModelRepository::Create({MakeRepo("specific", {1, 2, 3}, "version_policy:\n  specific: {versions: [1, 3]}\n"),
                               ModelControlMode::kNone,
                               {},
                               {},
                               {}});
  ASSERT_TRUE(specific.ok());
  EXPECT_EQ(ReadyVersions(**specific), std::vector<int64_t>({1, 3}));
  EXPECT_EQ((*specific)->Get("m", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*specific)->Get("m", 1).value()->version(), 1);
  EXPECT_EQ((*specific)->Get("nope").status().code(), StatusCode::kNotFound);
}

TEST(Repository, ModeNoneRefusesLoadAndUnload) {
  auto repo = ModelRepository::Create({MakeRepo("none", {1}, ""), ModelControlMode::kNone, {}, {}, {}});
  ASSERT_TRUE(repo.ok());
  EXPECT_EQ((*repo)->Load("m").code(), StatusCode::kUnavailable);
  EXPECT_EQ((*repo)->Unload("m").code(), StatusCode::kUnavailable);
  EXPECT_TRUE((*repo)->Ready());
}

TEST(Repository, FailedReloadKeepsServingAndUnloadDrains) {
  std::string root = MakeRepo("reload", {1}, "");
  auto repo = ModelRepository::Create({root, ModelControlMode::kExplicit, {"m"}, {}, {}});
  ASSERT_TRUE(repo.ok()) << repo.status().ToString();
  auto v1 = (*repo)->Get("m");
  ASSERT_TRUE(v1.ok());
  fs::create_directories(fs::path(root) / "m" / "2");
  std::ofstream(fs::path(root) / "m" / "2" / "model.onnx") << "not a model";
  Status s = (*repo)->Load("m");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ((*repo)->Get("m").value()->version(), 1);  // still serving version 1
  EXPECT_NE(s.message().find("protobuf"), std::string::npos) << s.message();
  EXPECT_EQ(ReadyVersions(**repo), std::vector<int64_t>({1}));
  ASSERT_TRUE((*repo)->Unload("m").ok());
  EXPECT_EQ((*repo)->Get("m").status().code(), StatusCode::kUnavailable);
  // A request that held version 1 before the unload can still use it.
  EXPECT_TRUE((*v1)->Infer((*v1)->ExampleRequest(2)).ok());
  // Explicit load of an unknown model fails at start.
  EXPECT_FALSE(ModelRepository::Create({root, ModelControlMode::kExplicit, {"nosuch"}, {}, {}}).ok());
}

TEST(Repository, PollPicksUpNewVersionsAndRemovedModels) {
  std::string root = MakeRepo("poll", {1}, "");
  auto repo = ModelRepository::Create({root, ModelControlMode::kPoll, {}, {}, {}});
  ASSERT_TRUE(repo.ok());
  fs::create_directories(fs::path(root) / "m" / "2");
  fs::copy_file(testing::SourcePath("models/zoo/mmoe/1/model.onnx"), fs::path(root) / "m" / "2" / "model.onnx");
  (*repo)->Poll();
  EXPECT_EQ((*repo)->Get("m").value()->version(), 2);
  fs::remove_all(fs::path(root) / "m");
  (*repo)->Poll();
  EXPECT_EQ((*repo)->Get("m").status().code(), StatusCode::kNotFound);
}

// A new version found by polling loads while the one it replaces serves, and holds the tables it
// has byte for byte once (compile/shared_constants.h): DLRM-DCNv2's 26 tables of 31 KiB.
TEST(Repository, ANewVersionHoldsTheTablesItSharesWithTheOneItReplacesOnce) {
  const fs::path root = fs::temp_directory_path() / ("rankd_repo_shared_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path zoo = testing::SourcePath("models/zoo/dlrm_dcnv2");
  fs::create_directories(root / "dlrm_dcnv2" / "1");
  fs::copy_file(zoo / "config.yaml", root / "dlrm_dcnv2" / "config.yaml");
  fs::copy_file(zoo / "1" / "model.onnx", root / "dlrm_dcnv2" / "1" / "model.onnx");
  auto repo = ModelRepository::Create({root.string(), ModelControlMode::kPoll, {}, {}, {}});
  ASSERT_TRUE(repo.ok()) << repo.status().ToString();
  fs::create_directories(root / "dlrm_dcnv2" / "2");
  fs::copy_file(zoo / "1" / "model.onnx", root / "dlrm_dcnv2" / "2" / "model.onnx");
  (*repo)->Poll();
  std::shared_ptr<const Model> v2 = (*repo)->Get("dlrm_dcnv2").value();
  EXPECT_EQ(v2->version(), 2);
  EXPECT_GE(v2->load_report().shared_constant_bytes, size_t{26} * 1000 * 8 * 4);
  testing::ExpectZooScores(*v2, "dlrm_dcnv2", 1e-5);  // version 1 unloaded by now
  fs::remove_all(root);
}

TEST(Repository, LoadingANameNotInTheRepositoryChangesNothing) {
  std::string root = MakeRepo("absent", {1}, "");
  auto repo = ModelRepository::Create({root, ModelControlMode::kExplicit, {"m"}, {}, {}});
  ASSERT_TRUE(repo.ok());
  EXPECT_TRUE((*repo)->Ready());
  EXPECT_EQ((*repo)->Load("nosuch").code(), StatusCode::kNotFound);
  EXPECT_TRUE((*repo)->Ready());  // one bad name does not make the server unready until restart
  EXPECT_EQ((*repo)->Index().size(), 1u);
  EXPECT_EQ((*repo)->Get("nosuch").status().code(), StatusCode::kNotFound);
}

TEST(Repository, PollReportsABrokenVersionOnceWithItsReason) {
  std::string root = MakeRepo("broken", {1}, "");
  std::vector<std::pair<int64_t, std::string>> reported;
  RepositoryOptions options{root, ModelControlMode::kPoll, {}, {}, {}};
  options.on_load_failure = [&](const std::string& model, int64_t version, const Status& why) {
    EXPECT_EQ(model, "m");
    reported.push_back({version, why.message()});
  };
  auto repo = ModelRepository::Create(options);
  ASSERT_TRUE(repo.ok());
  fs::create_directories(fs::path(root) / "m" / "2");
  std::ofstream(fs::path(root) / "m" / "2" / "model.onnx") << "not a model";
  (*repo)->Poll();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].first, 2);
  EXPECT_NE(reported[0].second.find("protobuf"), std::string::npos) << reported[0].second;
  EXPECT_EQ((*repo)->Get("m").value()->version(), 1);  // version 1 serves on
  std::vector<RepositoryIndexEntry> index = (*repo)->Index();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].version, 1);
  EXPECT_EQ(index[0].state, "READY");
  EXPECT_EQ(index[1].version, 2);
  EXPECT_EQ(index[1].state, "UNAVAILABLE");
  EXPECT_NE(index[1].reason.find("protobuf"), std::string::npos) << index[1].reason;
  (*repo)->Poll();  // unchanged since it failed: not retried, not reported again
  EXPECT_EQ(reported.size(), 1u);
  EXPECT_EQ((*repo)->Index()[1].state, "UNAVAILABLE");
  // Fixed on disk, it loads at the next poll.
  fs::copy_file(testing::SourcePath("models/zoo/mmoe/1/model.onnx"), fs::path(root) / "m" / "2" / "model.onnx",
                fs::copy_options::overwrite_existing);
  (*repo)->Poll();
  EXPECT_EQ((*repo)->Get("m").value()->version(), 2);
  EXPECT_EQ(ReadyVersions(**repo), std::vector<int64_t>({2}));  // the policy serves the latest
  EXPECT_EQ(reported.size(), 1u);
}

TEST(Repository, UnreadableOrTruncatedVersionsFailAloneWithTheirReason) {
  std::string root = MakeRepo("unreadable", {1}, "version_policy:\n  all: {}\n");
  int reports = 0;
  RepositoryOptions options{root, ModelControlMode::kPoll, {}, {}, {}};
  options.on_load_failure = [&](const std::string&, int64_t, const Status&) { ++reports; };
  auto repo = ModelRepository::Create(options);
  ASSERT_TRUE(repo.ok());
  // Version 2's model.onnx cannot be read as a file; version 3's is cut short.
  fs::create_directories(fs::path(root) / "m" / "2" / "model.onnx");
  fs::create_directories(fs::path(root) / "m" / "3");
  std::string bytes;
  {
    std::ifstream in(testing::SourcePath("models/zoo/mmoe/1/model.onnx"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(fs::path(root) / "m" / "3" / "model.onnx", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  (*repo)->Poll();
  EXPECT_EQ(reports, 2);
  std::vector<RepositoryIndexEntry> index = (*repo)->Index();
  ASSERT_EQ(index.size(), 3u);
  EXPECT_EQ(index[0].state, "READY");
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(index[i].state, "UNAVAILABLE") << index[i].version;
    EXPECT_FALSE(index[i].reason.empty()) << index[i].version;
  }
  EXPECT_EQ((*repo)->Get("m").value()->version(), 1);
  EXPECT_TRUE((*repo)->Get("m", 1).value()->Infer((*repo)->Get("m", 1).value()->ExampleRequest(2)).ok());
}

TEST(Repository, PollReportsABrokenConfigAndKeepsServing) {
  std::string root = MakeRepo("badconfig", {1}, "");
  int reports = 0;
  RepositoryOptions options{root, ModelControlMode::kPoll, {}, {}, {}};
  options.on_load_failure = [&](const std::string&, int64_t version, const Status&) {
    EXPECT_EQ(version, -1);
    ++reports;
  };
  auto repo = ModelRepository::Create(options);
  ASSERT_TRUE(repo.ok());
  std::ofstream(fs::path(root) / "m" / "config.yaml") << "inputs: [";
  (*repo)->Poll();
  EXPECT_EQ(reports, 1);
  EXPECT_EQ((*repo)->Get("m").value()->version(), 1);
  std::vector<RepositoryIndexEntry> index = (*repo)->Index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0].state, "READY");
  EXPECT_NE(index[0].reason.find("YAML"), std::string::npos) << index[0].reason;
}

}  // namespace
}  // namespace rankd
