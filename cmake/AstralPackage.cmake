# Install rules and the Debian package `astral` (CPack), from any build directory:
#
#   cmake --install build/release --prefix /opt/astral      # a tree to copy or bind-mount
#   cpack --config build/release/CPackConfig.cmake -B out    # out/astral_<version>_<arch>.deb
#
# Layout (relative to the prefix; the package's prefix is /usr):
#   lib/<multiarch>/libnccl-net-astral.so   NCCL dlopens "libnccl-net-<NCCL_NET_PLUGIN>.so" by name,
#                                           so NCCL_NET_PLUGIN=astral finds it on the loader path
#   bin/astral                              the CLI (topo profiles and Seer data are compiled in)
#   lib/systemd/system/astral-facility.service, lib/sysusers.d/astral.conf
#   share/doc/astral/                       README, docs/*.md, copyright, changelog
#   share/man/man1/astral.1.gz
# Nothing goes to /etc: the site writes /etc/astral/sources.json for the service.
include(GNUInstallDirs)

# Debian's multiarch directory (lib/x86_64-linux-gnu) is on the loader path of every Debian and
# Ubuntu system, for /usr and /usr/local alike; other systems get the GNU default.
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(astral_default_plugin_dir lib/${CMAKE_LIBRARY_ARCHITECTURE})
else()
  set(astral_default_plugin_dir ${CMAKE_INSTALL_LIBDIR})
endif()
set(ASTRAL_INSTALL_PLUGIN_DIR ${astral_default_plugin_dir} CACHE STRING
    "where libnccl-net-astral.so is installed, relative to the prefix")
set(ASTRAL_PACKAGE_MAINTAINER "Astral maintainers <maintainers@users.noreply.a-seed-5b18ffa8.example>"
    CACHE STRING "Maintainer field of the Debian package (a site rebuilding it puts its own)")

# Installed files get INSTALL_RPATH, which stays empty: every library they need is a system
# library, so no build-tree RPATH reaches a node (tests/package checks the unpacked ELF files).
install(TARGETS nccl-net-astral LIBRARY DESTINATION ${ASTRAL_INSTALL_PLUGIN_DIR} NAMELINK_SKIP)
install(TARGETS astral RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# A stripped install (cpack, `cmake --install --strip`) also drops the compiler's .comment and .note
# sections, as Debian's dh_strip does.
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    foreach(f ${ASTRAL_INSTALL_PLUGIN_DIR}/$<TARGET_FILE_NAME:nccl-net-astral> ${CMAKE_INSTALL_BINDIR}/astral)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --remove-section=.comment --remove-section=.note
                              \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${f}\" COMMAND_ERROR_IS_FATAL ANY)
    endforeach()
  endif()")

set(astral_doc_dir ${CMAKE_INSTALL_DATAROOTDIR}/doc/astral)
install(FILES README.md DESTINATION ${astral_doc_dir})
install(DIRECTORY docs/ DESTINATION ${astral_doc_dir} FILES_MATCHING PATTERN "*.md")
install(FILES packaging/copyright DESTINATION ${astral_doc_dir})
# packaging/<name> with @PROJECT_VERSION@ filled in, compressed as Debian wants it: gzip -9n (no
# time stamp, so every build makes the same bytes). Sets <out_var> to the .gz file.
function(astral_configure_gzipped name out_var)
  set(plain ${CMAKE_BINARY_DIR}/packaging/${name})
  configure_file(${PROJECT_SOURCE_DIR}/packaging/${name}.in ${plain} @ONLY)
  execute_process(COMMAND gzip -9 -n -c ${plain} OUTPUT_FILE ${plain}.gz RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "gzip of ${plain} failed")
  endif()
  set(${out_var} ${plain}.gz PARENT_SCOPE)
endfunction()
astral_configure_gzipped(changelog astral_changelog)
install(FILES ${astral_changelog} DESTINATION ${astral_doc_dir})
astral_configure_gzipped(astral.1 astral_manpage)
install(FILES ${astral_manpage} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES packaging/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
        RENAME astral)

# The unit names the installed binary, so it is written at install time, when the prefix is known
# (`cmake --install --prefix` and CPack's DESTDIR install both set it then).
set(astral_unit ${CMAKE_BINARY_DIR}/packaging/astral-facility.service)
install(CODE "
  set(ASTRAL_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  set(ASTRAL_DOCDIR \"\${CMAKE_INSTALL_PREFIX}/${astral_doc_dir}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/packaging/astral-facility.service.in\" \"${astral_unit}\" @ONLY)")
install(FILES ${astral_unit} DESTINATION lib/systemd/system)
install(FILES packaging/astral.sysusers DESTINATION lib/sysusers.d RENAME astral.conf)

# The Debian package. CPack installs with DESTDIR and prefix /usr (CPACK_SET_DESTDIR), so the
# install-time prefix above is the package's, not the build tree's CMAKE_INSTALL_PREFIX.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME astral)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CONTACT ${ASTRAL_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${ASTRAL_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "rail-aware NCCL network plugin and GPU cluster tooling")
# CPack writes the summary as the first line and indents each line of this body by one space.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "Astral keeps each GPU's NCCL traffic on its own rail. The package carries:
.
 * libnccl-net-astral.so, NCCL's net, tuner and profiler plugin, on the
   loader path: NCCL_NET_PLUGIN=astral selects it;
 * the astral command: node audit and NCCL topology files, fabric model and
   simulator, the Seer step-time model, netbench, trace merging, the monitor
   that names a job's root cause from every layer's logs, and power and
   cooling readers;
 * astral-facility.service, which serves the facility readings to
   Prometheus (disabled until /etc/astral/sources.json exists).
.
The user's guide is /usr/share/doc/astral/README.md.")
# dpkg-shlibdeps turns the ELF files' needs (glibc, libstdc++, hwloc, libcurl, OpenSSL) into Depends.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libibverbs is never linked: the RDMA transport (the next issue) dlopens it where RDMA NICs exist,
# and nodes without them run the TCP transport. So it is recommended, not a dependency.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libibverbs1")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "ipmitool, prometheus")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/postinst ${PROJECT_SOURCE_DIR}/packaging/prerm
    ${PROJECT_SOURCE_DIR}/packaging/postrm ${PROJECT_SOURCE_DIR}/packaging/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
