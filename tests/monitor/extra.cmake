# Monitor suite extras: the CLI for end-to-end tests, libFuzzer targets on the parsers.
if(TARGET test_monitor)
  add_dependencies(test_monitor astral)
  target_compile_definitions(test_monitor PRIVATE ASTRAL_CLI="$<TARGET_FILE:astral>")
endif()
set(_monitor_fixtures ${ASTRAL_FIXTURES_DIR}/astral/monitor)
astral_add_fuzz_target(monitor_lines SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_lines.cpp
                       DEPS astral::monitor CORPUS ${_monitor_fixtures}/verbatim)
astral_add_fuzz_target(monitor_structured SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_structured.cpp
                       DEPS astral::monitor CORPUS ${_monitor_fixtures}/fuzz-structured)
astral_add_fuzz_target(monitor_fabric SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_fabric.cpp
                       DEPS astral::monitor CORPUS ${_monitor_fixtures}/fuzz-fabric)
# The fuzz regression tests check the dmesg stamp bound on strip_prefix (monitor/src/prefix.hpp).
if(TARGET test_monitor)
  target_include_directories(test_monitor PRIVATE ${PROJECT_SOURCE_DIR}/monitor/src)
endif()
# The metric readers: Prometheus text exposition and query_range replies, then the change
# detection they feed. Seeds: the formats as node_exporter, dcgm-exporter and Prometheus write them.
astral_add_fuzz_target(monitor_metrics SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_metrics.cpp
                       DEPS astral::monitor CORPUS ${_monitor_fixtures}/fuzz-metrics)
astral_add_fuzz_target(monitor_journal SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_journal.cpp
                       DEPS astral::monitor CORPUS ${_monitor_fixtures}/fuzz-journal ITERATIONS 200)
