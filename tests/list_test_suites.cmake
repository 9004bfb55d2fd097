# Run after PROGRAM is built (tests/test_suites.cmake): writes to OUTPUT, which ctest includes, one
# add_test per Google Test suite that PROGRAM lists.
execute_process(COMMAND "${PROGRAM}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE status TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --gtest_list_tests failed (${status}):\n${listing}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(script "")
foreach(line IN LISTS lines)
  # Suites start in the first column and end with a dot ("Zoo/ZooTest." or "Typed/0.  # TypeParam = ...").
  if(line MATCHES "^([^ ]+)\\.( .*)?$")
    set(suite "${CMAKE_MATCH_1}")
    string(APPEND script "add_test([==[${suite}]==] \"${PROGRAM}\" [==[--gtest_filter=${suite}.*]==])\n"
           "set_tests_properties([==[${suite}]==] PROPERTIES WORKING_DIRECTORY \"${WORKING_DIRECTORY}\" SKIP_RETURN_CODE 77)\n")
  endif()
endforeach()
file(WRITE "${OUTPUT}" "${script}")
