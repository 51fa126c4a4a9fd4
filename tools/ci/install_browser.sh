#!/usr/bin/env bash
# Install Chromium for the browser test (tests/test_browser.py) from the distribution's
# packages (Debian: `chromium`), unless a Chromium or Chrome is already on the PATH.
# Uses sudo when not root. CI (.ci/run) calls it, then sets REQUIRE_BROWSER=1.
set -euo pipefail

for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "browser: $(command -v "$name")"
        exit 0
    fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh container has no package lists yet: update only when the first try fails.
if ! $SUDO apt-get install -y -q chromium; then
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q chromium
fi
echo "browser: $(command -v chromium)"
