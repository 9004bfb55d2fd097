// ModelRepository: version policies, control modes, failed reloads, unload.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "serving/repository.h"
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
  auto latest = ModelRepository::Create({MakeRepo("latest", {1, 2, 3}, ""), ModelControlMode::kNone, {}, {}});
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(ReadyVersions(**latest), std::vector<int64_t>({3}));
  EXPECT_EQ((*latest)->Get("m").value()->version(), 3);
  EXPECT_EQ((*latest)->Get("m", 1).status().code(), StatusCode::kNotFound);

  auto two = ModelRepository::Create(
      {MakeRepo("two", {1, 2, 3}, "version_policy:\n  latest: {num_versions: 2}\n"), ModelControlMode::kNone, {}, {}});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(ReadyVersions(**two), std::vector<int64_t>({2, 3}));

  auto specific = ModelRepository::Create(
      {MakeRepo("specific", {1, 2, 3}, "version_policy:\n  specific: {versions: [1, 3]}\n"), ModelControlMode::kNone, {}, {}});
  ASSERT_TRUE(specific.ok());
  EXPECT_EQ(ReadyVersions(**specific), std::vector<int64_t>({1, 3}));
  EXPECT_EQ((*specific)->Get("m", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*specific)->Get("m", 1).value()->version(), 1);
  EXPECT_EQ((*specific)->Get("nope").status().code(), StatusCode::kNotFound);
}

TEST(Repository, ModeNoneRefusesLoadAndUnload) {
  auto repo = ModelRepository::Create({MakeRepo("none", {1}, ""), ModelControlMode::kNone, {}, {}});
  ASSERT_TRUE(repo.ok());
  EXPECT_EQ((*repo)->Load("m").code(), StatusCode::kUnavailable);
  EXPECT_EQ((*repo)->Unload("m").code(), StatusCode::kUnavailable);
  EXPECT_TRUE((*repo)->Ready());
}

TEST(Repository, FailedReloadKeepsServingAndUnloadDrains) {
  std::string root = MakeRepo("reload", {1}, "");
  auto repo = ModelRepository::Create({root, ModelControlMode::kExplicit, {"m"}, {}});
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
  EXPECT_FALSE(ModelRepository::Create({root, ModelControlMode::kExplicit, {"nosuch"}, {}}).ok());
}

TEST(Repository, PollPicksUpNewVersionsAndRemovedModels) {
  std::string root = MakeRepo("poll", {1}, "");
  auto repo = ModelRepository::Create({root, ModelControlMode::kPoll, {}, {}});
  ASSERT_TRUE(repo.ok());
  fs::create_directories(fs::path(root) / "m" / "2");
  fs::copy_file(testing::SourcePath("models/zoo/mmoe/1/model.onnx"), fs::path(root) / "m" / "2" / "model.onnx");
  (*repo)->Poll();
  EXPECT_EQ((*repo)->Get("m").value()->version(), 2);
  fs::remove_all(fs::path(root) / "m");
  (*repo)->Poll();
  EXPECT_EQ((*repo)->Get("m").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace rankd
