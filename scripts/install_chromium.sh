#!/usr/bin/env bash
# Best effort: Debian's Chromium for the browser test (tests/test_serve.py drives it with Playwright).
# Run by `make test` before pytest, and so by CI (.ci/run). Installs with apt-get only where it can
# (root, or sudo without a password; ~20 s, apt lists refreshed only when the first try fails);
# anywhere else it prints one line saying the browser test will skip and why. Never fails the build.
set -u
CHROMIUM=/usr/bin/chromium  # where tests/test_serve.py looks

skip() {
  echo "install_chromium: $*; the browser test (tests/test_serve.py) will skip" >&2
  exit 0
}

[ -x "$CHROMIUM" ] && exit 0
command -v apt-get >/dev/null 2>&1 || skip "no Chromium at $CHROMIUM and no apt-get to install it"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
  as_root=(sudo -n)
else
  skip "no Chromium at $CHROMIUM, and installing it needs root (sudo apt-get install chromium)"
fi
as_apt() { ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get "$@" >/dev/null 2>&1; }
install_it() { as_apt install -y -q --no-install-recommends chromium; }
install_it || { as_apt update -q && install_it; } || skip "apt-get could not install chromium"
[ -x "$CHROMIUM" ] || skip "apt-get installed chromium but there is no $CHROMIUM"
echo "install_chromium: installed Chromium for the browser test" >&2
