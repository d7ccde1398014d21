# SPDX-License-Identifier: MIT
# cmake/aarch64-linux-gnu.cmake - cross-build hugify for arm64 with Debian's gcc-aarch64-linux-gnu and
# g++-aarch64-linux-gnu, taking headers and libraries from an arm64 Debian root (the sysroot):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake [-DHUGIFY_ARM64_ROOT=DIR]
# scripts/arm64 makes the root (/var/cache/hugify/roots/trixie-arm64, the default) and builds with this.
# The arm64 programs run here under qemu-user (binfmt_misc) with QEMU_LD_PREFIX set to the root.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(HUGIFY_DEB_ARCHITECTURE arm64) # the Debian packages' (cmake/packaging.cmake)
# Debian's multiarch library directory, which GNUInstallDirs gives a native build only.
set(CMAKE_INSTALL_LIBDIR lib/aarch64-linux-gnu CACHE PATH "Object code libraries (lib/aarch64-linux-gnu)")

set(HUGIFY_ARM64_ROOT /var/cache/hugify/roots/trixie-arm64 CACHE PATH "The arm64 Debian root used as the sysroot")
if(NOT EXISTS "${HUGIFY_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/libc.so")
  message(FATAL_ERROR "no arm64 root with libc6-dev in ${HUGIFY_ARM64_ROOT}: make it with scripts/arm64 root")
endif()
set(CMAKE_SYSROOT ${HUGIFY_ARM64_ROOT})
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The cross-compiler is Debian 12's gcc 12, with Debian 12's arm64 glibc (2.36) and kernel headers of its own
# (libc6-dev-arm64-cross), searched before the sysroot's: the code compiles against those, as the x86-64
# build does against Debian 12's. It links against the root's glibc 2.41 and libstdc++ (gcc 14's), which the
# root's libraries (libjansson.a wants __isoc23_strtoll, GoogleTest newer GLIBCXX versions) need and which
# are what runs: their directories come first (-L), and the start files too (-B).
file(GLOB HUGIFY_ROOT_GCC_DIRS LIST_DIRECTORIES true "${HUGIFY_ARM64_ROOT}/usr/lib/gcc/aarch64-linux-gnu/*")
list(SORT HUGIFY_ROOT_GCC_DIRS COMPARE NATURAL ORDER DESCENDING)
list(GET HUGIFY_ROOT_GCC_DIRS 0 HUGIFY_ROOT_GCC_DIR)
set(HUGIFY_ROOT_LINK "-B${HUGIFY_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/ -L${HUGIFY_ARM64_ROOT}/usr/lib/aarch64-linux-gnu")
string(APPEND HUGIFY_ROOT_LINK " -L${HUGIFY_ARM64_ROOT}/lib/aarch64-linux-gnu -L${HUGIFY_ROOT_GCC_DIR}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${HUGIFY_ROOT_LINK}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${HUGIFY_ROOT_LINK}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${HUGIFY_ROOT_LINK}")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (the host's) reads the root's .pc files and prefixes their paths with the root.
set(ENV{PKG_CONFIG_LIBDIR} "${HUGIFY_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${HUGIFY_ARM64_ROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${HUGIFY_ARM64_ROOT}")

# arm64 programs that CMake runs (gtest_discover_tests lists a test program's tests) run under qemu-user;
# the listing happens when ctest runs, not at every build.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L ${HUGIFY_ARM64_ROOT})
set(CMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE PRE_TEST)
# The musl preload is built by musl-gcc, a wrapper of the host's gcc: none for arm64 here.
# (Empty: find_program searches again for a NOTFOUND value, not for an empty one.)
set(HUGIFY_MUSL_GCC "" CACHE FILEPATH "musl-gcc (none when cross-building)")
