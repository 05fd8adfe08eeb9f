# The Debian package built from this build tree, unpacked into a scratch root, its plugin loaded by
# name through the plugin probe (tests/plugin/helpers) and its CLI run from there. Needs dpkg-dev
# (cpack's dpkg-shlibdeps, dpkg-architecture) and binutils (readelf): scripts/install-deps.sh.
add_test(NAME "package: the .deb builds, unpacks and loads its plugin by name"
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/package_test.sh ${CMAKE_BINARY_DIR}
                 $<TARGET_FILE:plugin_probe>)
set_tests_properties("package: the .deb builds, unpacks and loads its plugin by name"
                     PROPERTIES TIMEOUT 180)
