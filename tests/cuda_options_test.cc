// `--cuda KEY=VALUE` settings (runtime/cuda_options.h): parsed strictly, applied to the process.
#include "runtime/cuda_options.h"

#include <gtest/gtest.h>

#include "runtime/op_profile.h"

namespace rankd {
namespace {

TEST(CudaOptions, ParsesEveryKeyAndKeepsDefaultsForTheRest) {
  auto o = ParseCudaOptions({"graph_lanes=2", "copy_kernels=off", "split_k=false", "gemm_log=on", "pinned_pool_mb=0",
                             "staging_helpers=1", "kernel_cache_dir=/tmp/k=v", "device_wait=block", "merged_gather=off",
                             "copy_kernel_mb=4", "poll_us=4", "attention_strips=2", "gathered_rows_mb=64"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->graph_lanes, 2);
  EXPECT_FALSE(o->copy_kernels);
  EXPECT_FALSE(o->split_k);
  EXPECT_TRUE(o->gemm_log);
  EXPECT_EQ(o->pinned_pool_mb, 0);
  EXPECT_EQ(o->staging_helpers, 1);
  EXPECT_EQ(o->kernel_cache_dir, "/tmp/k=v");  // only the first '=' splits
  EXPECT_TRUE(o->late_gather);
  EXPECT_FALSE(o->merged_gather);
  EXPECT_TRUE(CudaOptions{}.merged_gather);
  EXPECT_EQ(o->copy_kernel_mb, 4);
  EXPECT_EQ(CudaOptions{}.copy_kernel_mb, 8);
  EXPECT_TRUE(o->dependent_launches);
  EXPECT_TRUE(o->gemm_tuning);
  EXPECT_EQ(o->device_wait, "block");
  EXPECT_EQ(CudaOptions{}.device_wait, "poller");
  EXPECT_EQ(o->poll_us, 4);
  EXPECT_EQ(CudaOptions{}.poll_us, 10);
  EXPECT_EQ(o->attention_strips, 2);
  EXPECT_EQ(CudaOptions{}.attention_strips, 4);
  EXPECT_EQ(o->gathered_rows_mb, 64);
  EXPECT_EQ(CudaOptions{}.gathered_rows_mb, 0);
  EXPECT_EQ(o->staged_rows_mb, CudaOptions{}.staged_rows_mb);
  auto one = ParseCudaOptions({"attention_strips=1"});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->attention_strips, 1);
  auto nap = ParseCudaOptions({"device_wait=nap"});
  ASSERT_TRUE(nap.ok()) << nap.status().ToString();
  EXPECT_EQ(nap->device_wait, "nap");
}

TEST(CudaOptions, RefusesWhatItCannotRead) {
  struct Case {
    const char* setting;
    const char* fragment;
  };
  for (const Case& c : {Case{"graph_lanes", "KEY=VALUE"}, Case{"bogus=1", "unknown setting 'bogus'"},
                        Case{"graph_lanes=0", "from 1 to 16"}, Case{"graph_lanes=17", "from 1 to 16"},
                        Case{"graph_lanes=2x", "from 1 to 16"}, Case{"graph_lanes=", "from 1 to 16"},
                        Case{"pinned_pool_mb=-1", "from 0"}, Case{"staging_helpers=65", "from 0 to 64"},
                        Case{"copy_kernel_mb=1025", "from 0 to 1024"}, Case{"split_k=maybe", "expected on or off"},
                        Case{"device_wait=poll", "expected spin, block, nap or poller"},
                        Case{"poll_us=0", "from 1 to 1000"}, Case{"attention_strips=3", "expected 1, 2 or 4"},
                        Case{"gathered_rows_mb=-1", "from 0"}, Case{"=on", "unknown setting ''"}}) {
    auto o = ParseCudaOptions({c.setting});
    ASSERT_FALSE(o.ok()) << c.setting;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << c.setting;
    EXPECT_NE(o.status().message().find(c.fragment), std::string::npos) << c.setting << " -> " << o.status().message();
  }
}

TEST(CudaOptions, FaultsParseOnlyInAFaultInjectionBuild) {
  auto o = ParseCudaOptions({"fault_fail_allocations_over_mb=40", "fault_poison_after_runs=3", "fault_device_mb=900"});
#if RANKD_FAULT_INJECTION
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->fault_fail_allocations_over_mb, 40);
  EXPECT_EQ(o->fault_poison_after_runs, 3);
  EXPECT_EQ(o->fault_device_mb, 900);
  EXPECT_FALSE(ParseCudaOptions({"fault_bogus=1"}).ok());
  EXPECT_FALSE(ParseCudaOptions({"fault_device_mb=-1"}).ok());
#else
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("RANKD_FAULT_INJECTION"), std::string::npos) << o.status().message();
#endif
}

TEST(CudaOptions, DefaultsApplyAnywhere) { EXPECT_TRUE(ApplyCudaOptions(CudaOptions{}).ok()); }

TEST(OpProfile, ParsesItsModes) {
  for (const char* mode : {"off", "ops", "steps", "host"}) EXPECT_TRUE(OpProfile::ParseMode(mode).ok()) << mode;
  EXPECT_FALSE(OpProfile::ParseMode("1").ok());
  EXPECT_FALSE(OpProfile::ParseMode("").ok());
}

}  // namespace
}  // namespace rankd
