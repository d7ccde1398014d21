#!/bin/sh
# install_exports.sh BUILD_DIR: install the build into a temporary prefix and check, with nm, that the
# installed static and shared libraries define no global symbol but hugify_* (internals such as
# parse_size or os_read_file would clash with the users' own).
set -eu
build=$1
prefix=$(mktemp -d "${TMPDIR:-/tmp}/hugify-install-XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
status=0
for lib in "$prefix"/lib*/libhugify.a "$prefix"/lib*/libhugify.so; do
  [ -e "$lib" ] || { echo "missing: $lib"; status=1; continue; }
  case $lib in *.so) flags="-D --defined-only" ;; *) flags="-g --defined-only" ;; esac
  # nm prints "ADDRESS TYPE NAME" (and "FILE:" headers for an archive): the global symbols, not the
  # version node (A, HUGIFY_0.3) nor undefined ones (U).
  others=$(nm $flags "$lib" | awk 'NF == 3 && $2 ~ /^[B-TV-Z]$/ { print $3 }' | grep -v '^hugify_' || true)
  count=$(nm $flags "$lib" | awk 'NF == 3 && $2 ~ /^[B-TV-Z]$/' | grep -c ' hugify_' || true)
  if [ -n "$others" ]; then
    echo "$lib exports symbols without the hugify_ prefix:"; echo "$others" | head -20; status=1
  elif [ "$count" -lt 30 ]; then
    echo "$lib exports only $count hugify_* symbols: the public API is missing"; status=1
  else
    echo "$lib: $count global symbols, all hugify_*"
  fi
done
exit $status
