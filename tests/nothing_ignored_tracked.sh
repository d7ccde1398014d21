#!/bin/sh
# SPDX-License-Identifier: MIT
# nothing_ignored_tracked.sh SOURCE: no tracked file of the checkout at SOURCE matches .gitignore's patterns
# (git ls-files -ci --exclude-standard lists exactly those): what a run leaves behind is ignored, and a
# pattern never hides a file the project keeps (docs/data/, dist/prometheus/*.yml). Exits 77 (a skip, with
# the reason) when SOURCE is not a git checkout, as in a source tarball.
set -u
source=$1
if ! command -v git > /dev/null; then
  echo "skipped: git is not installed"; exit 77
fi
if ! reason=$(git -C "$source" rev-parse --is-inside-work-tree 2>&1); then
  echo "skipped: $source is not a git checkout ($reason)"; exit 77
fi
tracked=$(git -C "$source" ls-files -ci --exclude-standard) || exit 1
if [ -n "$tracked" ]; then
  echo "tracked files that .gitignore ignores: git rm --cached them, or anchor the pattern that matches them:"
  echo "$tracked"
  exit 1
fi
echo "no tracked file of $source matches .gitignore"
