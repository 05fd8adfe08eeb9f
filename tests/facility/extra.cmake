# Facility suite extras: a fake libnvidia-ml for the NVML dlopen tests, and the Redfish fuzz target.
enable_language(C)
add_library(fake_nvml SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_nvml.c)
set_target_properties(fake_nvml PROPERTIES C_VISIBILITY_PRESET default)
if(TARGET test_facility)
  add_dependencies(test_facility fake_nvml)
  target_compile_definitions(test_facility PRIVATE FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>")
endif()
astral_add_fuzz_target(facility_parsers
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_parsers.cpp
  DEPS astral::facility
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus)
# Event streams and payloads a service sends (SSE, push POST bodies, Authorization headers); the
# site layout (site.json and Redfish rack chassis). Seeds: DMTF mockup resources and test inputs.
astral_add_fuzz_target(facility_events SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_events.cpp
  DEPS astral::facility CORPUS ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus-events)
astral_add_fuzz_target(facility_site SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_site.cpp
  DEPS astral::facility CORPUS ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus-site)
# CLI tests of `astral facility` live with the suite.
if(TARGET test_facility AND TARGET astral)
  add_dependencies(test_facility astral)
  target_compile_definitions(test_facility PRIVATE ASTRAL_CLI="$<TARGET_FILE:astral>")
endif()
# json_parse_test.cpp checks an internal of the poller (facility/src/json_parse.hpp) directly.
if(TARGET test_facility)
  target_include_directories(test_facility PRIVATE ${PROJECT_SOURCE_DIR}/facility/src)
endif()
