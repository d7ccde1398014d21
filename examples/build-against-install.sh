#!/bin/sh
# SPDX-License-Identifier: MIT
# build-against-install.sh PREFIX - build the examples against hugify installed in PREFIX, both ways
# (CMake find_package and pkg-config), run them, and check they use PREFIX's library. Exit 0 when all pass.
#   cmake --install build --prefix /tmp/hugify-install && examples/build-against-install.sh /tmp/hugify-install
set -eu
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 PREFIX   (a directory holding an installed hugify)" >&2
  exit 2
fi
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

generator=
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"

echo "== CMake: find_package(hugify) from $prefix"
# shellcheck disable=SC2086
cmake -S "$here" -B "$work/cmake" $generator -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >/dev/null
cmake --build "$work/cmake"

echo "== pkg-config: hugify.pc from $prefix"
pc=$(find "$prefix" -name hugify.pc -path '*pkgconfig*' | head -n 1)
[ -n "$pc" ] || { echo "no hugify.pc under $prefix" >&2; exit 1; }
mkdir -p "$work/pkgconfig"
PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_LIBDIR="$(dirname "$pc")" make -s -C "$here" O="$work/pkgconfig"

status=0
for program in "$work/cmake/alloc_check_c" "$work/cmake/alloc_check_cxx" "$work/cmake/alloc_check_static" \
               "$work/pkgconfig/alloc_check_c" "$work/pkgconfig/alloc_check_cxx"; do
  name=${program#"$work"/}
  case $name in
  *static) ;;
  *)
    lib=$(ldd "$program" | awk '/libhugify\.so/ { print $3 }')
    [ -z "$lib" ] || lib=$(readlink -f "$lib") # /lib -> /usr/lib where /usr is merged; PREFIX/x/../ spelled out
    case $lib in
    "$prefix"/*) ;;
    *) echo "FAIL $name: libhugify.so resolves to '$lib', not into $prefix" >&2; status=1; continue ;;
    esac
    ;;
  esac
  if "$program"; then echo "ok   $name"; else echo "FAIL $name" >&2; status=1; fi
done
exit $status
