# rankd_add_test_suites(TARGET): one ctest test per Google Test suite of TARGET (--gtest_filter=Suite.*),
# listed after each build as gtest_discover_tests lists single tests. A test program starts in about
# 0.4 s (it maps CUDA's and oneDNN's libraries), so one process per test cost CI minutes for 600 tests.
# A suite whose every test skipped exits 77 (tests/gtest_main.cc), a skip for ctest.
function(rankd_add_test_suites target)
  set(listed "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "PROGRAM=$<TARGET_FILE:${target}>" -D "OUTPUT=${listed}"
            -D "WORKING_DIRECTORY=${CMAKE_CURRENT_BINARY_DIR}" -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/list_test_suites.cmake"
    BYPRODUCTS "${listed}"
    VERBATIM)
  file(WRITE "${include}"
       "if(EXISTS \"${listed}\")\n  include(\"${listed}\")\nelse()\n  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include}")
endfunction()
