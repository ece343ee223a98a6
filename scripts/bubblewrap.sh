#!/usr/bin/env bash
# Makes sure bubblewrap (`bwrap`) is there for the sandbox and its tests, installing Debian's
# package when it is missing and this runs as root; without it the sandbox runs without
# namespaces (the tests that need them are skipped, and say so).
if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing bubblewrap (Debian package) for the sandbox" >&2
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq bubblewrap >/dev/null
fi
if ! command -v bwrap >/dev/null 2>&1; then
  echo "bubblewrap is not available: the sandbox tests that need namespaces will be skipped" >&2
fi
exit 0
