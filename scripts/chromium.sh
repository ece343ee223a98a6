#!/usr/bin/env bash
# Makes sure a headless Chromium is there for the status page's browser test, installing
# Debian's package when it is missing and this runs as root; without it that test is skipped,
# and says so.
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium (Debian package) for the status page's browser test" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1; then
  echo "chromium is not available: the status page's browser test will be skipped" >&2
fi
exit 0
