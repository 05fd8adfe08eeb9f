// Writes the default synthetic HGX node (hwloc XML + sys/ + proc/) into the given directory.
#include <cstdio>

#include "../hgx_fixture.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_topo_fixture DIR\n");
    return 2;
  }
  astral::test::write_hgx_fixture({}, argv[1]);
  return 0;
}
