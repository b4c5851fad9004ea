#!/usr/bin/env bash
# System packages the tests use beyond Python: Debian's chromium, for the JupyterLab browser test
# (tests/app/test_browser.py drives it through Playwright's Python package; nothing is downloaded by
# Playwright itself). Installs with apt when it can; otherwise says what is needed and goes on.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "install-system: installing Debian's chromium for the browser test (apt-get, about 30 s)"
    export DEBIAN_FRONTEND=noninteractive
    if apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; then
        exit 0
    fi
fi
echo "install-system: the JupyterLab browser test needs a Chromium binary on PATH ('chromium'):" >&2
echo "  Debian/Ubuntu: sudo apt-get install chromium chromium-driver; other systems: install Chromium." >&2
echo "  Without it, tests/app/test_browser.py fails with this same message." >&2
exit 0
