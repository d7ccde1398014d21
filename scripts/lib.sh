# SPDX-License-Identifier: MIT
# lib.sh - shared by scripts/demo, scripts/test, scripts/kernels, scripts/kernel-guest, scripts/suite-source, scripts/glibc-root and
# .ci/run: dependencies, build, hugetlb pool, THP settings, the kernel matrix's subset, Debian's packages and
# sources through an apt state of our own.
# Sourced, not run.

HUGIFY_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# debian_release: the Debian release whose package names the lists below use: HUGIFY_RELEASE when set (a
# script preparing another release's root sets it), else this machine's VERSION_CODENAME (/etc/os-release).
# release_versions RELEASE: "LLVM POSTGRESQL PYTHON TCMALLOC", what the packages that carry a version in
# their name are called there: bookworm (Debian 12) 14 15 3.11 libtcmalloc-minimal4, trixie (Debian 13) 19
# 17 3.13 libtcmalloc-minimal4t64 (its 64-bit time_t rename); another release's are read from this
# machine's apt (clang's, postgresql's and python3's dependencies), "" when apt cannot say.
debian_release() {
  if [ -n "${HUGIFY_RELEASE:-}" ]; then echo "$HUGIFY_RELEASE"; return; fi
  (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
}
release_versions() {
  case $1 in
    bookworm) echo "14 15 3.11 libtcmalloc-minimal4" ;;
    trixie) echo "19 17 3.13 libtcmalloc-minimal4t64" ;;
    *)
      local llvm pg py tcmalloc=libtcmalloc-minimal4t64
      llvm=$(apt-cache depends clang 2>/dev/null | sed -n 's/.*Depends: clang-\([0-9]*\)$/\1/p' | head -1)
      pg=$(apt-cache depends postgresql 2>/dev/null | sed -n 's/.*Depends: postgresql-\([0-9]*\)$/\1/p' | head -1)
      py=$(apt-cache depends python3 2>/dev/null | sed -n 's/.*Depends: python\(3\.[0-9]*\)$/\1/p' | head -1)
      apt-cache show "$tcmalloc" >/dev/null 2>&1 || tcmalloc=libtcmalloc-minimal4
      [ -n "$llvm" ] && [ -n "$pg" ] && [ -n "$py" ] && echo "$llvm $pg $py $tcmalloc"
      ;;
  esac
}
read -r HUGIFY_LLVM HUGIFY_POSTGRESQL HUGIFY_PYTHON HUGIFY_TCMALLOC <<<"$(release_versions "$(debian_release)")" || true
: "${HUGIFY_LLVM:=14}" "${HUGIFY_POSTGRESQL:=15}" "${HUGIFY_PYTHON:=3.11}" "${HUGIFY_TCMALLOC:=libtcmalloc-minimal4}"

HUGIFY_PACKAGES="build-essential cmake ninja-build pkg-config libgtest-dev libabsl-dev libmimalloc-dev
  libjemalloc-dev $HUGIFY_TCMALLOC libhugetlbfs-bin python3 python3-prometheus-client util-linux libjansson-dev libinih-dev
  libmicrohttpd-dev clang libfuzzer-$HUGIFY_LLVM-dev libclang-rt-$HUGIFY_LLVM-dev valgrind strace prometheus tmux
  podman runc musl-tools"
# The servers the server tests and recipes use (tests/integration/servers.cpp, docs/servers.md), with their
# load tools: redis-benchmark (redis-tools), pgbench (postgresql-$HUGIFY_POSTGRESQL), memcaslap (libmemcached-tools).
HUGIFY_SERVER_PACKAGES="redis-server redis-tools postgresql memcached libmemcached-tools python3-yaml"
# The servers' own test suites (tests/integration/server_suites.cpp, docs/reliability.md): Redis's runtest
# needs tcl; PostgreSQL's regression suite its regress.c built against the server's headers
# (postgresql-server-dev-N); CPython's is Debian's libpythonX.Y-testsuite. Their sources come from
# scripts/suite-source (dpkg-source).
HUGIFY_SUITE_PACKAGES="tcl postgresql-server-dev-$HUGIFY_POSTGRESQL libpython$HUGIFY_PYTHON-testsuite dpkg-dev"
# What scripts/demo needs, and no more: the compiler and build tools, and the hugify command's libraries
# (jansson, inih, libmicrohttpd). It builds without the tests (scripts/test configures them in).
HUGIFY_DEMO_PACKAGES="build-essential cmake ninja-build pkg-config libjansson-dev libinih-dev libmicrohttpd-dev"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# install_dependencies [PACKAGES]: install the Debian packages hugify needs (default: all of
# HUGIFY_PACKAGES, HUGIFY_SERVER_PACKAGES and HUGIFY_SUITE_PACKAGES), when something is missing and we may.
install_dependencies() {
  local missing=() package
  for package in ${1:-$HUGIFY_PACKAGES $HUGIFY_SERVER_PACKAGES $HUGIFY_SUITE_PACKAGES}; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    say "missing packages: ${missing[*]} (install them as root: apt-get install ${missing[*]})"
    return 0
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Where systemd runs, Debian starts a server's service when it is installed (redis on 6379, postgres on
  # 5432, memcached on 11211, prometheus on 9090): a policy-rc.d that says no (101) keeps them stopped; the tests start their
  # own instances on 127.0.0.1 with temporary directories. Ours is removed afterwards, a present one kept.
  local policy=/usr/sbin/policy-rc.d ours=0 status=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# hugify: no service starts while packages install\nexit 101\n' > "$policy" && chmod 755 "$policy" && ours=1
  fi
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
  [ "$ours" = 1 ] && rm -f "$policy"
  return $status
}

# need_tools TOOL=PACKAGE...: every TOOL (a command on PATH, or an absolute path) present; what is missing
# is installed with apt-get when we are root, else named with its package, and the script exits 3.
# HUGIFY=... names the hugify command: need_hugify finds it (on PATH, or this tree's build/bin) or says
# how to build it, and exits 3.
need_tools() {
  local spec packages=() still=()
  for spec in "$@"; do   # PACKAGE may be a hint instead ("the bench programs (cmake --build build)"): only names install
    command -v "${spec%%=*}" >/dev/null 2>&1 || [[ ! "${spec#*=}" =~ ^[a-z0-9][a-z0-9.+-]+$ ]] || packages+=("${spec#*=}")
  done
  [ ${#packages[@]} -gt 0 ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null &&
    { install_dependencies "${packages[*]}" || true; }
  for spec in "$@"; do command -v "${spec%%=*}" >/dev/null 2>&1 || still+=("${spec%%=*} (${spec#*=})"); done
  [ ${#still[@]} -eq 0 ] && return 0
  say "missing: ${still[*]}: install as root with apt-get install, or run this as root to have it installed"
  exit 3
}
need_hugify() {
  command -v "${HUGIFY:-hugify}" >/dev/null 2>&1 && return 0
  if [ -x "$HUGIFY_ROOT/build/bin/hugify" ]; then HUGIFY=$HUGIFY_ROOT/build/bin/hugify; return 0; fi
  say "missing: the hugify command (${HUGIFY:-hugify}): build it with scripts/demo or cmake, or set HUGIFY=path"
  exit 3
}

# build DIR [cmake args...]: configure (once) and build.
build() {
  local dir=$1; shift
  [ -f "$dir/build.ninja" ] || cmake -S "$HUGIFY_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir"
}

POOL_DIR=/sys/kernel/mm/hugepages
declare -A SAVED_POOL=()

# pool_available DIR: free minus reserved pages of a hugetlb size directory (as the library's `available`).
pool_available() {
  local available=$(( $(cat "$1/free_hugepages") - $(cat "$1/resv_hugepages") ))
  echo $(( available > 0 ? available : 0 ))
}

# reserve_pool SIZE_KB COUNT [optional]: make sure COUNT free pages of that size exist, remembering the
# previous size so restore_pools can put it back. Optional pools (1 GiB) may come up short.
reserve_pool() {
  local kb=$1 want=$2 optional=${3:-}
  local dir=$POOL_DIR/hugepages-${kb}kB
  [ -w "$dir/nr_hugepages" ] || { say "cannot change the ${kb} kB pool (not root?)"; return 0; }
  local total free
  total=$(cat "$dir/nr_hugepages"); free=$(pool_available "$dir")
  [ -n "${SAVED_POOL[$kb]:-}" ] || SAVED_POOL[$kb]=$total
  if [ "$free" -lt "$want" ]; then
    echo 1 > /proc/sys/vm/compact_memory 2>/dev/null || true
    echo $(( total + want - free )) > "$dir/nr_hugepages" 2>/dev/null || true
  fi
  free=$(pool_available "$dir")
  say "hugetlb ${kb} kB pool: $free free (wanted $want${optional:+, optional})"
  [ "$free" -ge "$want" ] || [ -n "$optional" ]
}

restore_pools() {
  for kb in "${!SAVED_POOL[@]}"; do
    echo "${SAVED_POOL[$kb]}" > "$POOL_DIR/hugepages-${kb}kB/nr_hugepages" 2>/dev/null || true
    say "hugetlb ${kb} kB pool restored to ${SAVED_POOL[$kb]}"
  done
}

# The THP settings some tests change (and restore themselves, also on failure): remembered here too, so
# that even a test killed midway cannot leave the machine changed.
THP_SETTINGS="/sys/kernel/mm/transparent_hugepage/shmem_enabled /sys/kernel/mm/transparent_hugepage/enabled"
for _size in /sys/kernel/mm/transparent_hugepage/hugepages-*kB/enabled; do # mTHP sizes (tests/integration/mthp_folios)
  if [ -e "$_size" ]; then THP_SETTINGS+=" $_size"; fi
done
unset _size
declare -A SAVED_THP=()
save_thp_settings() {
  for file in $THP_SETTINGS; do
    [ -r "$file" ] && SAVED_THP[$file]=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$file")
  done
  return 0
}
restore_thp_settings() {
  for file in "${!SAVED_THP[@]}"; do
    local now
    now=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$file")
    if [ "$now" != "${SAVED_THP[$file]}" ]; then
      echo "${SAVED_THP[$file]}" > "$file" 2>/dev/null || true
      say "$file restored to ${SAVED_THP[$file]} (it was $now)"
    fi
  done
}

# matrix_tests KERNEL MODE: the kernel matrix's tests for KERNEL under THP MODE (tests/kernel_matrix.txt),
# one line per test program: "test_X FILTER", FILTER the program's patterns joined for --gtest_filter, in
# the file's order. Fields after the pattern limit a line: "only:K1,K2" or "not:K1,K2" (kernels),
# "mode:M1,M2" (THP modes; a kernel without THP, MODE none, runs every line once).
# HUGIFY_KERNEL_MATRIX names another file of that form (a subset of your own).
KERNEL_MATRIX=${HUGIFY_KERNEL_MATRIX:-$HUGIFY_ROOT/tests/kernel_matrix.txt}
matrix_tests() {
  awk -v kernel="$1" -v mode="$2" '
    function listed(list, name,   names, i) {
      split(list, names, ",")
      for (i in names) if (names[i] == name) return 1
      return 0
    }
    { sub(/#.*/, "") }
    NF < 2 { next }
    {
      for (f = 3; f <= NF; f++) {
        split($f, rule, ":")
        if ((rule[1] == "only" && !listed(rule[2], kernel)) || (rule[1] == "not" && listed(rule[2], kernel)) ||
            (rule[1] == "mode" && mode != "none" && !listed(rule[2], mode))) next
      }
    }
    !($1 in filter) { order[++count] = $1; filter[$1] = $2; next }
    { filter[$1] = filter[$1] ":" $2 }
    END { for (i = 1; i <= count; i++) print order[i], filter[order[i]] }
  ' "$KERNEL_MATRIX"
}

# apt_options DIR [ARCH]: apt-get/apt-cache options for an apt state of our own under DIR (its sources list,
# lists, status and package cache); the machine's apt configuration and state are never read or written.
# ARCH (arm64): that state's packages are ARCH's, not this machine's (dpkg's architectures are untouched).
apt_options() {
  local dir=$1 arch=${2:-}
  [ -z "$arch" ] || echo "-o APT::Architecture=$arch -o APT::Architectures=$arch"
  echo "-o Dir::Etc::sourcelist=$dir/sources.list -o Dir::Etc::sourceparts=$dir/empty
    -o Dir::Etc::preferencesparts=$dir/empty -o Dir::State::Lists=$dir/lists -o Dir::State::status=$dir/status
    -o Dir::Cache=$dir/cache -o Dir::Cache::archives=$dir/cache/archives -o APT::Sandbox::User=root
    -o Acquire::Languages=none -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
    -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
}
# apt_setup DIR TYPE SUITE [ARCH]: that state's sources list (TYPE deb: packages, deb-src: sources) for
# Debian SUITE and its security updates, and its lists (ARCH's packages: apt_options), updated.
apt_setup() {
  local dir=$1 type=$2 suite=$3 arch=${4:-}
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/empty"
  : > "$dir/status"
  cat > "$dir/sources.list" <<EOF
$type [signed-by=$keyring] http://deb.debian.org/debian $suite main
$type [signed-by=$keyring] http://deb.debian.org/debian-security $suite-security main
EOF
  # shellcheck disable=SC2046
  apt-get $(apt_options "$dir" "$arch") -qq update
}

# fetch_once CACHE DIR FETCHER ARG...: DIR, a tree fetched from the network once for every caller.
# Unless DIR/.complete is there, take CACHE's lock and, still missing, run FETCHER WORK ARG... in a fresh
# directory WORK under CACHE (what a fetch cut off before left there is removed first): FETCHER fills
# WORK/root and marks it WORK/root/.complete (a line saying what it holds), and only then does WORK/root
# land as DIR, so that no caller ever sees half a tree. Concurrent callers wait on the lock. Returns 0, or
# FETCHER's status (3 when CACHE cannot be made, 1 when FETCHER did not mark its tree), having said why.
# FETCHER checks each of its steps itself: it runs where `set -e` does not reach.
fetch_once() {
  local cache=$1 dir=$2 fetcher=$3 lock work status=0
  shift 3
  [ -f "$dir/.complete" ] && return 0
  mkdir -p "$cache" 2>/dev/null || { say "cannot create $cache (run as root, or choose another cache)"; return 3; }
  exec {lock}> "$cache/.fetch.lock"
  flock "$lock"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$cache"/.fetch.*/ # a fetch that was cut off (we hold the lock)
    work=$(mktemp -d "$cache/.fetch.XXXXXX")
    "$fetcher" "$work" "$@" || status=$?
    if [ "$status" = 0 ] && [ ! -f "$work/root/.complete" ]; then
      say "$fetcher left no complete tree in $work/root"
      status=1
    fi
    if [ "$status" = 0 ]; then
      rm -rf "$dir"
      mv "$work/root" "$dir"
    fi
    rm -rf "$work"
  fi
  exec {lock}>&-
  return "$status"
}

# fetch_source SOURCE PACKAGE: Debian's source package SOURCE at the version of the installed binary
# PACKAGE (so a suite tests the very build that runs), unpacked once under SOURCES_CACHE; prints its
# directory. Its .complete line says which version it holds: when the archive no longer has the installed
# one (a point release or a security update replaced it), the newest of this release's SOURCE with the
# same upstream major stands in, else the installed version's upstream tarball, and the line and stderr
# say so (the suites compare plain with hugify on the same server, so the tests' version need not be the
# server's to the last digit).
SOURCES_CACHE=${HUGIFY_SOURCES_CACHE:-/var/cache/hugify/src}
fetch_source() {
  local source=$1 package=$2 version dir
  version=$(dpkg-query -W -f='${Version}' "$package" 2>/dev/null) || { say "$package is not installed"; return 3; }
  dir=$SOURCES_CACHE/$source-${version//:/_}
  fetch_once "$SOURCES_CACHE" "$dir" fetch_source_into "$source" "$version" || return
  echo "$dir"
}
# upstream_major VERSION: a Debian version's upstream major (5:7.0.15-1~deb12u10 -> 7, 15.20-0+deb12u1 -> 15).
upstream_major() { local v=${1#*:}; echo "${v%%[.~+-]*}"; }
# sources_of_major SOURCE MAJOR: the versions of SOURCE in our apt state's deb-src lists whose upstream
# major is MAJOR, newest first.
sources_of_major() {
  local version
  # shellcheck disable=SC2046
  for version in $(apt-cache $(apt_options "$SOURCES_CACHE/apt") showsrc "$1" 2>/dev/null | sed -n 's/^Version: //p'); do
    [ "$(upstream_major "$version")" = "$2" ] && echo "$version"
  done | sort -u | sort -r -V
}
# source_into DIR SOURCE VERSION: apt-get source SOURCE=VERSION, unpacked in the empty directory DIR.
source_into() {
  rm -rf "$1" && mkdir "$1" || return
  # shellcheck disable=SC2046
  (cd "$1" && apt-get $(apt_options "$SOURCES_CACHE/apt") -qq source "$2=$3" >&2)
}
# orig_into DIR SOURCE VERSION: the upstream tarball of SOURCE=VERSION alone, unpacked in the empty
# directory DIR (apt-get source fetches it before it finds the .dsc or Debian's part missing, and leaves it):
# upstream's tests, without Debian's patches.
orig_into() {
  local tarball
  rm -rf "$1" && mkdir "$1" || return
  # shellcheck disable=SC2046
  (cd "$1" && apt-get $(apt_options "$SOURCES_CACHE/apt") -qq source --download-only "$2=$3" >&2)
  tarball=$(find "$1" -maxdepth 1 -name "$2_*.orig.tar.*" ! -name '*.asc' | head -1)
  [ -n "$tarball" ] && tar -xf "$tarball" -C "$1" && rm -f "$1/$2"_*
}
# fetch_source_into WORK SOURCE VERSION: fetch_source's FETCHER (fetch_once). The installed VERSION, else
# the newest of the same major that the archive still serves (its index may name a version whose files
# are gone), else the installed version's upstream tarball alone (a mirror may keep it and lose the rest).
fetch_source_into() {
  local work=$1 source=$2 version=$3 suite fetched="" candidate note=""
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$suite" ] || { say "no Debian release named in /etc/os-release"; return 3; }
  command -v dpkg-source >/dev/null || { say "dpkg-source is missing (apt-get install dpkg-dev)"; return 3; }
  apt_setup "$SOURCES_CACHE/apt" deb-src "$suite" >&2 || { say "apt-get update failed for $suite's sources"; return 3; }
  if source_into "$work/source" "$source" "$version"; then
    fetched=$version
  else
    for candidate in $(sources_of_major "$source" "$(upstream_major "$version")"); do
      [ "$candidate" = "$version" ] && continue
      say "$source $version cannot be fetched from Debian $suite's archive; trying $candidate"
      source_into "$work/source" "$source" "$candidate" && { fetched=$candidate; break; }
    done
    note=" (the installed $version cannot be fetched from Debian $suite's archive: $fetched, the newest of the same major it serves, stands in)"
    if [ -z "$fetched" ] && orig_into "$work/source" "$source" "$version"; then
      fetched="$version, upstream's tarball only"
      note=" (Debian $suite's archive serves no whole $source of major $(upstream_major "$version"): the installed version's upstream tarball, without Debian's patches, stands in)"
    fi
    if [ -z "$fetched" ]; then
      say "apt-get source $source=$version failed, and Debian $suite's deb-src serves no other $source of major $(upstream_major "$version") nor its upstream tarball (is it reachable?)"
      return 3
    fi
    say "$source $fetched$note"
  fi
  mv "$(find "$work/source" -mindepth 1 -maxdepth 1 -type d | head -1)" "$work/root" &&
    echo "$source $fetched$note" > "$work/root/.complete"
}
