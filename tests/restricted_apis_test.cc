// Triton's restricted APIs (frontend/restricted_apis.h): a category restricted by a spec refuses
// calls without its header, or with another value; other categories stay open; bad specs are
// refused naming the mistake.
#include "frontend/restricted_apis.h"

#include <gtest/gtest.h>

#include <map>

namespace rankd {
namespace {

TEST(RestrictedApis, CategoriesNeedTheirHeaderAndOthersStayOpen) {
  RestrictedApis apis;
  ASSERT_TRUE(apis.Add("model-repository,statistics:Admin-Key=s3cret").ok());
  ASSERT_TRUE(apis.Add("inference:infer-key=x=y").ok());  // the value is all after the first '='
  std::map<std::string, std::string> headers;
  auto header = [&](const std::string& key) -> std::optional<std::string> {
    auto it = headers.find(key);
    return it == headers.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto refused = apis.Refusal(ApiCategory::kModelRepository, header);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(*refused, "This API is restricted, expecting header 'admin-key'");
  EXPECT_TRUE(apis.Refusal(ApiCategory::kStatistics, header).has_value());
  EXPECT_FALSE(apis.Refusal(ApiCategory::kHealth, header).has_value());
  EXPECT_FALSE(apis.Refusal(ApiCategory::kMetadata, header).has_value());
  headers["admin-key"] = "wrong";
  EXPECT_TRUE(apis.Refusal(ApiCategory::kModelRepository, header).has_value());
  headers["admin-key"] = "s3cret";
  EXPECT_FALSE(apis.Refusal(ApiCategory::kModelRepository, header).has_value());
  EXPECT_TRUE(apis.Refusal(ApiCategory::kInference, header).has_value());
  headers["infer-key"] = "x=y";
  EXPECT_FALSE(apis.Refusal(ApiCategory::kInference, header).has_value());
}

TEST(RestrictedApis, RefusesMalformedSpecs) {
  const std::pair<const char*, const char*> bad[] = {
      {"model-repository", "CATEGORY[,CATEGORY...]:KEY=VALUE"},
      {"model-repository:admin-key", "CATEGORY[,CATEGORY...]:KEY=VALUE"},
      {"model-repository:=v", "CATEGORY[,CATEGORY...]:KEY=VALUE"},
      {"models:k=v", "unknown API category 'models'"},
      {"health,health:k=v", "'health' is restricted twice"},
  };
  for (const auto& [spec, message] : bad) {
    RestrictedApis apis;
    Status s = apis.Add(spec);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_NE(s.message().find(message), std::string::npos) << spec << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace rankd
