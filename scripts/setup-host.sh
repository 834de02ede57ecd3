#!/usr/bin/env bash
# Installs the Debian packages the service and its tests use on a host. Idempotent.
# Usage: scripts/setup-host.sh [--test] [--check]
#   --test   also creates the `agent` user the agent tests run work as
#   --check  changes nothing: prints what is owed, one line each (`missing-packages: p…`, `missing-user: agent`;
#            packages only where dpkg can tell), and exits 0 (what `npm test` asks first: scripts/test-host.mjs)
set -euo pipefail

test_user=false
check=false
for arg in "$@"; do
  case "$arg" in
    --test) test_user=true ;;
    --check) check=true ;;
    *) echo "usage: $0 [--test] [--check]" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  # build of native modules (better-sqlite3, node-pty); gcc + libc6-dev: the agent's static computer-spawn
  python3 make g++ gcc libc6-dev
  # the desktop the agent drives (also inside the guest image)
  xvfb xauth xdotool xclip x11-xserver-utils x11-xkb-utils x11-utils openbox xterm
  fonts-dejavu-core locales coreutils procps
  # browser the agent opens
  chromium
  # tests: a throwaway TLS certificate for the https cookie test (test/helpers/tls-terminator.ts)
  openssl
  # guest image build (images/build.sh): mmdebstrap, mkfs.ext4 -d, qemu-img, the initrd's cpio
  mmdebstrap e2fsprogs qemu-utils cpio
  # container substrate: rootful podman with runc (crun fails on cgroup v1 hybrid hosts), CNI bridge, host guard
  podman runc conmon containernetworking-plugins iptables catatonit uidmap
  # container disk layers: btrfs subvolumes (constant-time live captures); getfattr/setfattr to flatten chains;
  # setpriv (util-linux, essential: listed for the record) ties every disk copy's life to the control plane's
  btrfs-progs attr util-linux
  # vm substrate (iproute2: bridge and taps for outbound networking; ebtables comes with iptables)
  qemu-system-x86 iproute2
)

# --test: the Python SDK's install, type check and tests (clients/python, test/clients/python-sdk.test.ts):
# venv + pip + setuptools + wheel install it offline, httpx and websockets are its dependencies.
# postgresql: the throwaway clusters of the Postgres store tests (test/helpers/postgres.ts, initdb as its `postgres` user).
TEST_PACKAGES=(postgresql python3-venv python3-pip python3-setuptools python3-wheel python3-httpx python3-websockets python3-pytest mypy)
if [ "${1:-}" = "--test" ]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if $check; then
  # Without dpkg (not Debian) the packages cannot be told apart from missing ones: only the user is checked.
  if [ ${#missing[@]} -gt 0 ] && command -v dpkg-query >/dev/null; then echo "missing-packages: ${missing[*]}"; fi
  if $test_user && ! id agent >/dev/null 2>&1; then echo "missing-user: agent"; fi
  exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-host: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Progress stays visible: `npm start` runs this on a fresh host and the operator watches it.
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if $test_user; then
  id agent >/dev/null 2>&1 || useradd --create-home --shell /bin/bash agent
fi
echo "setup-host: ok"
