// The test programs' main: Google Test's, except that a run in which every test was skipped (the
// CUDA suites on a machine without a GPU) exits 77, which ctest reports as a skip (SKIP_RETURN_CODE).
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  const testing::UnitTest& run = *testing::UnitTest::GetInstance();
  if (failed == 0 && run.test_to_run_count() > 0 && run.skipped_test_count() == run.test_to_run_count()) {
    return 77;
  }
  return failed;
}
