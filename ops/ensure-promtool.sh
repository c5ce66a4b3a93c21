#!/usr/bin/env bash
# Install `promtool` (Prometheus's checker) if none is on PATH: tests/unit/test_monitoring.py
# checks the alert rules, the dashboard's queries and a scrape with it. It comes from Debian's
# `prometheus` package, downloaded (`apt-get download`) and unpacked: only its promtool is
# installed (to /usr/local/bin), so no Prometheus service is set up or started. CI runs this as
# root (.ci/run); without promtool those tests skip locally and fail under CI.
set -u
if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
hint="as root: apt-get update && bash ops/ensure-promtool.sh (Debian's prometheus package)"
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "ops/ensure-promtool.sh: no promtool on PATH and no apt-get; install promtool ($hint)" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ops/ensure-promtool.sh: no promtool on PATH; $hint" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show prometheus >/dev/null 2>&1; then
  apt-get update -qq >/dev/null 2>&1
fi
if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
  echo "ops/ensure-promtool.sh: apt-get could not download Debian's prometheus ($hint)" >&2
  exit 1
fi
dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" && install -m 0755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
if ! command -v promtool >/dev/null 2>&1; then
  echo "ops/ensure-promtool.sh: promtool installed but not on PATH" >&2
  exit 1
fi
echo "installed $(promtool --version 2>&1 | head -1)"
