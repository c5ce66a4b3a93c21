#!/usr/bin/env bash
# Install Debian's Chromium if none is on PATH: the Flower browser test
# (tests/integration/test_flower_browser.py) drives it headless. CI runs this as root (.ci/run);
# elsewhere it needs root or password-less sudo, and without Chromium that test skips locally.
set -u
for name in chromium chromium-browser; do
  if command -v "$name" >/dev/null 2>&1; then
    exit 0
  fi
done
hint="as root: apt-get update && apt-get install -y --no-install-recommends chromium"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ops/ensure-chromium.sh: no chromium on PATH and no apt-get; install Chromium ($hint)" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "ops/ensure-chromium.sh: no chromium on PATH; $hint" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
  echo "ops/ensure-chromium.sh: apt-get could not install chromium ($hint)" >&2
  exit 1
fi
if ! command -v chromium >/dev/null 2>&1; then
  echo "ops/ensure-chromium.sh: chromium installed but not on PATH" >&2
  exit 1
fi
echo "installed $(chromium --version 2>/dev/null)"
