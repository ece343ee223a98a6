#!/usr/bin/env bash
# Debian's packages the tests use, installed in one apt-get run when some are missing and this
# runs as root: bubblewrap (the sandbox), chromium (the status page's browser test) and
# postgresql (the queue tests). bubblewrap.sh, chromium.sh and postgres.sh then find them, or
# say which tests are skipped without them.
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} (Debian packages) for the tests" >&2
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
fi
bash "$(dirname "$0")/bubblewrap.sh"
bash "$(dirname "$0")/chromium.sh"
