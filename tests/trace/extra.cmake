# Extras for the trace suite: JSON parsing in tests, child processes (SIGKILL, a ring of ranks),
# the astral CLI, and the reader fuzz target.
add_executable(trace_test_helper ${CMAKE_CURRENT_SOURCE_DIR}/trace/helper/trace_test_helper.cpp)
target_link_libraries(trace_test_helper PRIVATE astral::trace Threads::Threads)

if(TARGET test_trace)
  target_link_libraries(test_trace PRIVATE nlohmann_json::nlohmann_json)
  add_dependencies(test_trace trace_test_helper astral)
  target_compile_definitions(test_trace PRIVATE TRACE_TEST_HELPER="$<TARGET_FILE:trace_test_helper>"
                                                ASTRAL_CLI="$<TARGET_FILE:astral>")
endif()

astral_add_fuzz_target(trace_reader
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/trace/fuzz/fuzz_trace_reader.cpp
  DEPS astral::trace
  CORPUS ${ASTRAL_FIXTURES_DIR}/astral/trace/corpus)
