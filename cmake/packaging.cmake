# SPDX-License-Identifier: MIT
# Debian packages from the install rules, one per component (scripts/package; docs/packaging.md):
#   hugify          (component hugify) the CLI, the preload, the workload, the agent's unit and config, the
#                   man pages, the bash completion, the docs
#   libhugify0.3    (component lib)    libhugify.so.0.3: named after its soname, as Debian's policy asks
#   libhugify-dev   (component dev)    headers, libhugify.so, libhugify.a, the CMake package, hugify.pc
# Dependencies come from what the binaries link (dpkg-shlibdeps).
set(HUGIFY_LIB_PACKAGE libhugify${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(HUGIFY_DEB_REVISION 1 CACHE STRING "The Debian revision of the packages (VERSION-REVISION)")
set(HUGIFY_DEB_VERSION ${PROJECT_VERSION}-${HUGIFY_DEB_REVISION})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hugify)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "hugify maintainers <maintainers@users.noreply.a-seed-23d7fbcd.example>")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_COMPONENTS_ALL hugify lib dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # NAME_VERSION-REVISION_ARCH.deb
# A cross-build's packages are for its machine (cmake/aarch64-linux-gnu.cmake: arm64), not dpkg's (amd64).
if(HUGIFY_DEB_ARCHITECTURE)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${HUGIFY_DEB_ARCHITECTURE})
endif()
set(CPACK_DEBIAN_PACKAGE_RELEASE ${HUGIFY_DEB_REVISION})
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

set(CPACK_DEBIAN_HUGIFY_PACKAGE_NAME hugify)
set(CPACK_DEBIAN_HUGIFY_PACKAGE_SECTION utils)
# The allocators of --heap (run, check, env): preloaded when installed, named with the package when not.
# libmicrohttpd12: the agent's --listen (dlopened then, so shlibdeps cannot see it; off by default).
# Each as Debian 12 | Debian 13 names it (the 64-bit time_t renames): one package for both. Debian 13 has no
# libmimalloc2.0 (only mimalloc 3, which run does not preload: src/cli/run/run_env.c), so apt skips it there.
set(CPACK_DEBIAN_HUGIFY_PACKAGE_RECOMMENDS "libmimalloc2.0, libjemalloc2, \
libtcmalloc-minimal4 | libtcmalloc-minimal4t64, libmicrohttpd12 | libmicrohttpd12t64")
set(CPACK_DEBIAN_HUGIFY_PACKAGE_SUGGESTS "libgoogle-perftools4 | libgoogle-perftools4t64, systemd")
set(CPACK_DEBIAN_HUGIFY_DESCRIPTION "huge pages for any program, measured
hugify puts a program's heap, shared memory and code on Linux huge pages
without changing it (hugify run, hugify env), says whether that helps and by
how much (hugify check, hugify bench), shows what a process has on huge pages
(hugify inspect, hugify status) and keeps long-running services there (the
hugify-agent systemd unit, installed but not enabled).")
# The agent's settings are the administrator's: dpkg keeps their changes on upgrade.
set(CPACK_DEBIAN_HUGIFY_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/../dist/debian/conffiles)

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${HUGIFY_LIB_PACKAGE})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
# The shlibs file of libhugify.so.0.3 (the preload has no soname version: CPack leaves it out, with a
# warning); "=": every minor version may change the ABI. The ldconfig trigger is ours: CPack 3.25 only
# calls ldconfig from postinst/postrm, which lintian asks to be a trigger.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/../dist/debian/triggers)
set(CPACK_DEBIAN_LIB_DESCRIPTION "huge pages for any program, measured (shared library)
libhugify allocates on huge pages with fallbacks that say what happened,
measures how much of a process is on huge pages, and reports the kernel's
huge page settings. This package holds the shared library.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libhugify-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${HUGIFY_LIB_PACKAGE} (= ${HUGIFY_DEB_VERSION})")
set(CPACK_DEBIAN_DEV_DESCRIPTION "huge pages for any program, measured (development files)
libhugify allocates on huge pages with fallbacks that say what happened,
measures how much of a process is on huge pages, and reports the kernel's
huge page settings. This package holds the headers (C and C++), the static
library, the CMake package (find_package(hugify)) and the pkg-config file.")

# What Debian's policy asks of every package: /usr/share/doc/PACKAGE/copyright and changelog.Debian.gz.
# Only for packages (scripts/package sets HUGIFY_DEBIAN): a plain install has no use for them.
option(HUGIFY_DEBIAN "Install the Debian files (copyright, changelog) of each package" OFF)
if(HUGIFY_DEBIAN)
  string(TIMESTAMP HUGIFY_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC) # SOURCE_DATE_EPOCH when set
  foreach(component hugify lib dev)
    string(TOUPPER ${component} upper)
    set(package ${CPACK_DEBIAN_${upper}_PACKAGE_NAME})
    set(dir ${PROJECT_BINARY_DIR}/debian/${package})
    file(MAKE_DIRECTORY ${dir})
    file(WRITE ${dir}/changelog.Debian
      "${package} (${HUGIFY_DEB_VERSION}) unstable; urgency=medium\n\n"
      "  * Packaged by CPack from hugify's install rules (scripts/package).\n\n"
      " -- ${CPACK_PACKAGE_CONTACT}  ${HUGIFY_DEB_DATE}\n")
    execute_process(COMMAND gzip -9nf ${dir}/changelog.Debian)
    install(FILES ${dir}/changelog.Debian.gz dist/debian/copyright
      DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
  endforeach()
  # The musl preload is linked against musl's C library, which lintian does not count as one.
  if(HUGIFY_MUSL_GCC)
    install(FILES dist/debian/hugify.lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
      RENAME hugify COMPONENT hugify)
  endif()
endif()

include(CPack)
