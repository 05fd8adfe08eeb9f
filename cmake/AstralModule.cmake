# astral_add_module(<name> [DEPS <targets>...])
#
# Declares the static library astral_<name> from <module>/src/*.cpp with public headers in
# <module>/include (included as <astral/<name>/...>). Sources are globbed so that adding a file to a
# module never touches a shared build file. Alias: astral::<name>. Every module except common
# itself depends on astral::common (header-only: <astral/common/checked.hpp>).
function(astral_add_module name)
  cmake_parse_arguments(ARG "" "" "DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT name STREQUAL "common")
    list(APPEND ARG_DEPS astral::common)
  endif()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  if(NOT sources)  # a module that has only headers so far
    add_library(astral_${name} INTERFACE)
    target_include_directories(astral_${name} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(astral_${name} INTERFACE ${ARG_DEPS})
    add_library(astral::${name} ALIAS astral_${name})
    return()
  endif()
  add_library(astral_${name} STATIC ${sources})
  target_include_directories(astral_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                            PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(astral_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  # The NCCL plugin exports only NCCL's entry points; module code is hidden by default.
  set_target_properties(astral_${name} PROPERTIES CXX_VISIBILITY_PRESET hidden
                                                  VISIBILITY_INLINES_HIDDEN ON)
  add_library(astral::${name} ALIAS astral_${name})
endfunction()

# astral_add_test_suite(<name> DEPS <targets>...)
#
# One Catch2 executable per module from tests/<name>/*.cpp, each TEST_CASE registered with CTest.
function(astral_add_test_suite name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp)
  if(NOT sources)
    return()
  endif()
  # CTest splits a discovered test name at ';', and the halves match no test, so such a test would
  # never run (--warn NoTests below fails it at run time; this says why at configure time).
  foreach(src ${sources})
    file(STRINGS ${src} semicolon_names REGEX "TEST_CASE\\(\"[^\"]*;[^\"]*\"")
    if(semicolon_names)
      message(FATAL_ERROR "${src}: a TEST_CASE name contains ';', which CTest splits at: ${semicolon_names}")
    endif()
  endforeach()
  add_executable(test_${name} ${sources})
  # Tests format with fmt themselves (modules link it privately), header-only like the modules.
  target_link_libraries(test_${name} PRIVATE astral_test_main nlohmann_json::nlohmann_json fmt::fmt-header-only
                                             ${ARG_DEPS})
  # Catch2 v2 and nlohmann/json are single big headers parsed by every test file: precompile them.
  target_precompile_headers(test_${name} PRIVATE <catch2/catch.hpp> <nlohmann/json.hpp> <string> <vector>)
  target_compile_definitions(test_${name} PRIVATE
    ASTRAL_FIXTURES_DIR="${ASTRAL_FIXTURES_DIR}"
    ASTRAL_BINARY_DIR="${CMAKE_BINARY_DIR}")
  # --warn NoTests: a name CTest's discovery splits (it splits at ';') matches nothing; fail, not pass.
  catch_discover_tests(test_${name} TEST_PREFIX "${name}: " EXTRA_ARGS --warn NoTests PROPERTIES TIMEOUT 300
                       WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
endfunction()

# astral_add_fuzz_target(<name> SOURCES <files>... DEPS <targets>... [CORPUS <dirs>...]
#                        [ITERATIONS <mutations per seed in the replay test, default 2000>])
#
# A fuzz target defines `extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t)`.
# Its corpus: the CORPUS folders (seeds: real inputs from the fixtures) plus, when it exists,
# tests/fixtures/astral/fuzz-regressions/<name>/ (inputs that once failed, kept as regressions).
# - Always builds fuzz_<name>_replay: a driver that feeds the corpus files and a bounded number of
#   deterministic mutations of them (regressions are replayed as they are), registered with CTest
#   (so it runs under g++ and under ASan).
# - With clang, also builds fuzz_<name> linked with libFuzzer for real coverage-guided runs:
#   ./fuzz_<name> -max_total_time=60 <scratch-dir> <corpus-dirs>...
#   Under the fuzz preset (ASTRAL_FUZZ) the libraries it links are instrumented too.
# Every fuzz_<name> is part of the `fuzz_targets` target and listed in <build>/fuzz-targets.tsv
# (name, binary, corpus folders separated by '|'), which .ci/fuzz and tools/fuzz-campaign read.
function(astral_add_fuzz_target name)
  cmake_parse_arguments(ARG "" "ITERATIONS" "SOURCES;DEPS;CORPUS" ${ARGN})
  set(regressions ${ASTRAL_FIXTURES_DIR}/astral/fuzz-regressions/${name})
  set(replay_regressions "")
  if(IS_DIRECTORY ${regressions})
    set(replay_regressions --no-mutate ${regressions})
  endif()
  add_executable(fuzz_${name}_replay ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/support/fuzz_replay_main.cpp)
  target_link_libraries(fuzz_${name}_replay PRIVATE ${ARG_DEPS})
  target_include_directories(fuzz_${name}_replay PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  add_test(NAME "fuzz: ${name} (replay + mutations)"
           COMMAND fuzz_${name}_replay ${ARG_CORPUS} ${replay_regressions})
  set_tests_properties("fuzz: ${name} (replay + mutations)" PROPERTIES TIMEOUT 300)
  if(ARG_ITERATIONS)  # mutations per seed in the replay test, for targets with slow inputs
    set_tests_properties("fuzz: ${name} (replay + mutations)" PROPERTIES
                         ENVIRONMENT ASTRAL_FUZZ_ITERATIONS=${ARG_ITERATIONS})
  endif()
  if(IS_DIRECTORY ${regressions})
    list(APPEND ARG_CORPUS ${regressions})
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_executable(fuzz_${name} ${ARG_SOURCES})
    target_link_libraries(fuzz_${name} PRIVATE ${ARG_DEPS})
    target_compile_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    if(NOT TARGET fuzz_targets)
      add_custom_target(fuzz_targets)
      cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL astral_write_fuzz_manifest)
    endif()
    add_dependencies(fuzz_targets fuzz_${name})
    list(JOIN ARG_CORPUS "|" corpus_field)
    set_property(GLOBAL APPEND PROPERTY ASTRAL_FUZZ_MANIFEST
                 "${name}\t$<TARGET_FILE:fuzz_${name}>\t${corpus_field}\n")
  endif()
endfunction()

function(astral_write_fuzz_manifest)
  get_property(rows GLOBAL PROPERTY ASTRAL_FUZZ_MANIFEST)
  list(JOIN rows "" content)
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/fuzz-targets.tsv CONTENT "${content}")
endfunction()
