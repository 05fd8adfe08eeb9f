# softhca: a software HCA with the ABI of rdma-core's libibverbs.so.1 (README.md here), its
# fidelity tests with Debian's unmodified ibv_devinfo / ibv_rc_pingpong, and its own Catch2 suite.
file(GLOB _softhca_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/lib/*.cpp)
add_library(softhca SHARED ${_softhca_sources})
# The file name and SONAME are libibverbs.so.1, so LD_LIBRARY_PATH=<this dir> (or
# ASTRAL_IBVERBS_LIB=<dir>/libibverbs.so.1) makes any verbs program load it instead of rdma-core.
set_target_properties(softhca PROPERTIES
  OUTPUT_NAME ibverbs
  SOVERSION 1
  VERSION 1.14.44
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/softhca/lib
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/lib/softhca.map)
target_link_libraries(softhca PRIVATE nlohmann_json::nlohmann_json Threads::Threads)
target_link_options(softhca PRIVATE -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/lib/softhca.map
                                    ${ASTRAL_SHARED_NO_UNDEFINED})
# Unity batches would merge the files' anonymous namespaces; the library is small, build it as is.
set_target_properties(softhca PROPERTIES UNITY_BUILD OFF)

# Under ASan the library is instrumented like the rest of the suite (its bugs should show), and the
# uninstrumented Debian programs get the ASan runtime by LD_PRELOAD, which it must come first for.
set(_softhca_preload "")
if(ASTRAL_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE _softhca_preload OUTPUT_STRIP_TRAILING_WHITESPACE)
elseif(ASTRAL_SANITIZE)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libclang_rt.asan-x86_64.so
                  OUTPUT_VARIABLE _softhca_preload OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

find_program(IBV_DEVINFO ibv_devinfo)
find_program(IBV_RC_PINGPONG ibv_rc_pingpong)

add_executable(softhca_peer ${CMAKE_CURRENT_LIST_DIR}/peer/peer.cpp)
target_link_libraries(softhca_peer PRIVATE softhca)

file(GLOB _softhca_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test/*.cpp)
add_executable(test_softhca ${_softhca_tests})
target_link_libraries(test_softhca PRIVATE astral_test_main softhca nlohmann_json::nlohmann_json)
target_include_directories(test_softhca PRIVATE ${CMAKE_CURRENT_LIST_DIR}/test)
set_target_properties(test_softhca PROPERTIES UNITY_BUILD OFF)
add_dependencies(test_softhca softhca_peer)
target_compile_definitions(test_softhca PRIVATE
  SOFTHCA_LIB_DIR="$<TARGET_FILE_DIR:softhca>"
  SOFTHCA_PEER="$<TARGET_FILE:softhca_peer>"
  SOFTHCA_FABRICS="${CMAKE_CURRENT_LIST_DIR}/fabric"
  SOFTHCA_ASAN_PRELOAD="${_softhca_preload}"
  IBV_DEVINFO="${IBV_DEVINFO}"
  IBV_RC_PINGPONG="${IBV_RC_PINGPONG}")
# --warn NoTests: a name CTest mangles (a ';' splits it) must fail, not pass having run nothing.
catch_discover_tests(test_softhca TEST_PREFIX "softhca: " EXTRA_ARGS --warn NoTests
                     PROPERTIES TIMEOUT 120 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

astral_add_fuzz_target(softhca_control
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_control.cpp ${CMAKE_CURRENT_LIST_DIR}/lib/fabric.cpp
          ${CMAKE_CURRENT_LIST_DIR}/lib/control.cpp
  DEPS nlohmann_json::nlohmann_json
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus)
