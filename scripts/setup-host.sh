#!/usr/bin/env bash
# Installs the Debian packages the service and its tests use on a host. Idempotent.
# Usage: scripts/setup-host.sh [--test]   (--test also creates the `agent` user the agent tests run work as)
set -euo pipefail

PACKAGES=(
  # build of native modules (better-sqlite3, node-pty)
  python3 make g++
  # the desktop the agent drives (also inside the guest image)
  xvfb xauth xdotool xclip x11-xserver-utils x11-xkb-utils x11-utils openbox xterm
  fonts-dejavu-core locales coreutils procps
  # browser the agent opens
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-host: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--test" ]; then
  id agent >/dev/null 2>&1 || useradd --create-home --shell /bin/bash agent
fi
echo "setup-host: ok"
