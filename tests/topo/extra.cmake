# make_topo_fixture: regenerates the synthetic HGX fixture from tests/topo/hgx_fixture.cpp
#   build/default/tests/make_topo_fixture tests/fixtures/astral/topo/hgx-h100-8x400g
add_executable(make_topo_fixture ${CMAKE_CURRENT_SOURCE_DIR}/topo/tools/make_topo_fixture_main.cpp
                                 ${CMAKE_CURRENT_SOURCE_DIR}/topo/hgx_fixture.cpp)
target_link_libraries(make_topo_fixture PRIVATE astral::topo fmt::fmt-header-only)

# libFuzzer targets on topo's inputs from outside: NCCL topology XML, hwloc XML, fabric JSON.
# Their inputs are slow (whole topologies and fabrics): fewer replay mutations keep the suite short.
astral_add_fuzz_target(topo_nccl_xml SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_nccl_xml.cpp
                       DEPS astral::topo CORPUS ${PROJECT_SOURCE_DIR}/tests/fixtures/nccl-topo
                       ITERATIONS 300)
astral_add_fuzz_target(topo_hwloc_xml SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_hwloc_xml.cpp
                       DEPS astral::topo CORPUS ${PROJECT_SOURCE_DIR}/tests/fixtures/hwloc
                       ITERATIONS 40)
astral_add_fuzz_target(topo_fabric_json SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_fabric_json.cpp
                       DEPS astral::topo nlohmann_json::nlohmann_json
                       CORPUS ${ASTRAL_FIXTURES_DIR}/astral/topo/fabrics ITERATIONS 100)
foreach(t topo_nccl_xml topo_hwloc_xml)
  foreach(suffix "" _replay)
    if(TARGET fuzz_${t}${suffix})
      target_compile_definitions(fuzz_${t}${suffix} PRIVATE ASTRAL_FIXTURES_DIR="${ASTRAL_FIXTURES_DIR}")
    endif()
  endforeach()
endforeach()
