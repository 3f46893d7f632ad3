#!/usr/bin/env bash
# Installs what lilac needs to build and test on a fresh Debian/Ubuntu machine.
# Debian packages: the C libraries the engine links (see README "Dependencies") and the test
# framework (clang for `make fuzz`, chromium for the browser test); PyPI: independent references
# used only by tests (playwright drives the Debian chromium, never a browser build of its own).
set -e
PKGS="build-essential pkg-config clang libcmocka-dev libcjson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev chromium python3 python3-pip"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
PY="numpy safetensors gguf pytest tokenizers jinja2 httpx openai schemathesis playwright"
python3 -c "import numpy, safetensors, gguf, pytest, tokenizers, jinja2, httpx, openai, schemathesis, playwright" 2>/dev/null || \
    python3 -m pip install -q $PY 2>/dev/null || python3 -m pip install -q --break-system-packages $PY
