# make_topo_fixture: regenerates the synthetic HGX fixture from tests/topo/hgx_fixture.cpp
#   build/default/tests/make_topo_fixture tests/fixtures/astral/topo/hgx-h100-8x400g
add_executable(make_topo_fixture ${CMAKE_CURRENT_SOURCE_DIR}/topo/tools/make_topo_fixture_main.cpp
                                 ${CMAKE_CURRENT_SOURCE_DIR}/topo/hgx_fixture.cpp)
target_link_libraries(make_topo_fixture PRIVATE astral::topo fmt::fmt-header-only)
