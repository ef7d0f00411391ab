#!/usr/bin/env bash
# The browser test (tests/e2e/test_browser.py) drives Debian's chromium (/usr/bin/chromium) with
# Playwright from requirements.txt; no browser is downloaded. Install it with apt where we may
# (root or passwordless sudo). Elsewhere say so and carry on: the browser test then skips.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi

skip() {
    echo "note: chromium is not installed ($1); the browser test will be skipped. To run it:" >&2
    echo "  sudo apt-get install -y chromium" >&2
    exit 0
}

command -v apt-get >/dev/null 2>&1 || skip "no apt-get on this machine"
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    skip "installing it needs root"
fi
echo "Installing Debian's chromium (for the browser test)..." >&2
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; }; then
    skip "apt-get could not install it"
fi
