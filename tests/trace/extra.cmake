# Extras for the trace suite: JSON parsing in tests, child processes (SIGKILL, a ring of ranks),
# the astral CLI (netbench with tracing, trace export), the profiler driver (the plugin's profiler
# entry points driven as NCCL drives them), and the reader fuzz target.
add_executable(trace_test_helper ${CMAKE_CURRENT_SOURCE_DIR}/trace/helper/trace_test_helper.cpp)
target_link_libraries(trace_test_helper PRIVATE astral::trace Threads::Threads)

# Plain C++ over the plugin's ABI headers: it knows the library only through dlopen, as NCCL does.
add_executable(trace_profiler_driver ${CMAKE_CURRENT_SOURCE_DIR}/trace/helper/profiler_driver.cpp)
target_include_directories(trace_profiler_driver PRIVATE ${PROJECT_SOURCE_DIR}/plugin)
target_link_libraries(trace_profiler_driver PRIVATE ${CMAKE_DL_LIBS})

if(TARGET test_trace)
  target_link_libraries(test_trace PRIVATE nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
  # trace/src: the path tests edit an entry of the on-disk format (format.hpp) directly.
  target_include_directories(test_trace PRIVATE ${PROJECT_SOURCE_DIR}/plugin ${PROJECT_SOURCE_DIR}/trace/src)
  add_dependencies(test_trace trace_test_helper trace_profiler_driver astral nccl-net-astral)
  target_compile_definitions(test_trace PRIVATE TRACE_TEST_HELPER="$<TARGET_FILE:trace_test_helper>"
                                                ASTRAL_CLI="$<TARGET_FILE:astral>"
                                                PROFILER_DRIVER="$<TARGET_FILE:trace_profiler_driver>"
                                                ASTRAL_NET_PLUGIN_SO="$<TARGET_FILE:nccl-net-astral>")
endif()

astral_add_fuzz_target(trace_reader
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/trace/fuzz/fuzz_trace_reader.cpp
  DEPS astral::trace
  CORPUS ${ASTRAL_FIXTURES_DIR}/astral/trace/corpus)
