#!/bin/sh
# SPDX-License-Identifier: MIT
# install_exports.sh BUILD_DIR [SOURCE_DIR]: install the build into a temporary prefix and check, with nm,
# that the installed static and shared libraries define no global symbol but hugify_* (internals such as
# parse_size or os_read_file would clash with the users' own), and that what they export is exactly the
# functions the installed include/hugify.h declares, both ways (a prototype without a map entry, or an
# exported function without a prototype, fails). With SOURCE_DIR, src/lib/hugify.map must name exactly
# the header's functions too (a stale map entry is silently ignored by the linker).
set -eu
build=$1
source=${2:-}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/hugify-install-XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
status=0
# The header's functions: the preprocessed header (no comments, no macros) and every "hugify_NAME(";
# function pointer types read "(*hugify_NAME)(" and are not matched.
declared=$prefix/declared.txt
${CC:-cc} -E -P "$prefix"/include/hugify.h | grep -o '\bhugify_[A-Za-z0-9_]*[[:space:]]*(' |
  sed 's/[[:space:]]*($//' | sort -u >"$declared"
# compare NAME LIST_FILE: the exported or listed names against the declared ones, both ways
compare() {
  sort -u "$2" >"$2.sorted"
  missing=$(comm -23 "$declared" "$2.sorted")
  extra=$(comm -13 "$declared" "$2.sorted")
  if [ -n "$missing" ]; then
    echo "$1 lacks functions include/hugify.h declares (add them to src/lib/hugify.map):"; echo "$missing"; status=1
  fi
  if [ -n "$extra" ]; then
    echo "$1 has functions include/hugify.h does not declare:"; echo "$extra"; status=1
  fi
}
if [ -n "$source" ]; then
  sed -n 's/^[[:space:]]*\(hugify_[A-Za-z0-9_]*\);.*/\1/p' "$source/src/lib/hugify.map" >"$prefix/map.txt"
  compare "src/lib/hugify.map" "$prefix/map.txt"
fi
for lib in "$prefix"/lib*/libhugify.a "$prefix"/lib*/libhugify.so; do
  [ -e "$lib" ] || { echo "missing: $lib"; status=1; continue; }
  case $lib in *.so) flags="-D --defined-only" ;; *) flags="-g --defined-only" ;; esac
  # nm prints "ADDRESS TYPE NAME" (and "FILE:" headers for an archive): the global symbols, not the
  # version node (A, HUGIFY_0.3) nor undefined ones (U).
  others=$(nm $flags "$lib" | awk 'NF == 3 && $2 ~ /^[B-TV-Z]$/ { print $3 }' | grep -v '^hugify_' || true)
  count=$(nm $flags "$lib" | awk 'NF == 3 && $2 ~ /^[B-TV-Z]$/' | grep -c ' hugify_' || true)
  nm $flags "$lib" | awk 'NF == 3 && $2 ~ /^[B-TV-Z]$/ { sub(/@.*/, "", $3); print $3 }' >"$prefix/exported.txt"
  compare "$lib" "$prefix/exported.txt"
  if [ -n "$others" ]; then
    echo "$lib exports symbols without the hugify_ prefix:"; echo "$others" | head -20; status=1
  elif [ "$count" -lt 30 ]; then
    echo "$lib exports only $count hugify_* symbols: the public API is missing"; status=1
  else
    echo "$lib: $count global symbols, all hugify_*"
  fi
done
exit $status
