#!/usr/bin/env bash
# Builds the guest image from Debian bookworm packages, in two cached stages. Called by the image builder
# (control-plane/src/substrate/image.ts), which owns the content hashes; run directly only to debug.
#   images/build.sh base  OUT                           Debian root (mmdebstrap), kernel, small initrd
#   images/build.sh image OUT BASE APP NODE container|all
#       OUT   image directory (rootfs/ hard-linked from BASE plus the agent; vmlinuz, initrd.img, base.qcow2)
#       APP   staging directory with the built agent (dist/) and its production node_modules/
#       NODE  the node binary copied into the guest (Node 20: the agent's native modules are built for its ABI)
# Needs root, mmdebstrap, e2fsprogs (mkfs.ext4 -d), qemu-utils, cpio, kmod.
set -euo pipefail
STAGE=$1 OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
MIRROR=${COMPUTER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${COMPUTER_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# The base filesystem is small; a machine's disk is larger and the guest grows the filesystem at boot.
BASE_FS_SIZE=${COMPUTER_BASE_FS_SIZE:-4G}

step() { echo "image: [$(date -u +%H:%M:%S)] $*"; }
mkdir -p "$OUT"
ROOT="$OUT/rootfs"

if [ "$STAGE" = base ]; then
  rm -rf "$ROOT"
  pkgs=$(grep -v '^\s*#' "$HERE/packages.txt" | grep -v '^\s*$' | paste -sd, -)
  step "mmdebstrap bookworm (minbase, no recommends): $(echo "$pkgs" | tr ',' ' ' | wc -w) packages"
  mmdebstrap --variant=minbase --mode=root --format=directory \
    --aptopt='APT::Install-Recommends "false"' \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --include="$pkgs" \
    --customize-hook="$HERE/hooks/fetch-kernel.sh" \
    bookworm "$ROOT" \
    "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" "deb $SECURITY_MIRROR bookworm-security main"

  step "agent user, locale, keyboard"
  chroot "$ROOT" useradd --create-home --uid 1000 --shell /bin/bash agent
  echo "en_US.UTF-8 UTF-8" > "$ROOT/etc/locale.gen"
  chroot "$ROOT" locale-gen >/dev/null
  echo 'LANG=en_US.UTF-8' > "$ROOT/etc/default/locale"
  printf 'XKBMODEL="pc105"\nXKBLAYOUT="us"\nXKBVARIANT=""\nXKBOPTIONS=""\n' > "$ROOT/etc/default/keyboard"
  echo computer > "$ROOT/etc/hostname"
  ln -sf /run/resolv.conf "$ROOT/etc/resolv.conf"
  rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/apt/archives/*.deb

  KVER=$(ls "$ROOT/usr/lib/modules" | head -n1)
  chroot "$ROOT" depmod "$KVER"
  step "kernel $KVER and small initrd"
  cp "$ROOT/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
  resolve() { # module names -> their files plus dependencies, dependencies first
    local m f
    for m in "$@"; do
      f=$(chroot "$ROOT" modinfo -k "$KVER" -F filename "$m" 2>/dev/null || true)
      case "$f" in ""|"(builtin)"|*"name:"*) continue ;; esac
      resolve $(chroot "$ROOT" modinfo -k "$KVER" -F depends "$m" | tr ',' ' ')
      f=${f#/usr}
      echo "$ROOT/usr$f"
    done
  }
  INITRD_MODS="virtio_mmio virtio_pci virtio_blk crc32c_generic ext4"
  RUNTIME_MODS="$INITRD_MODS virtio_console virtio_net virtio_rng evdev button"
  work=$(mktemp -d)
  mkdir -p "$work/bin" "$work/modules" "$work/proc" "$work/sys" "$work/dev" "$work/newroot"
  cp "$ROOT/usr/bin/busybox" "$work/bin/busybox"
  cp "$HERE/initrd/init" "$work/init"
  : > "$work/modules.order"
  for f in $(resolve $INITRD_MODS | awk '!seen[$0]++'); do
    b=$(basename "$f")
    case "$b" in
      *.ko.xz) xz -dc "$f" > "$work/modules/${b%.xz}"; b=${b%.xz} ;;
      *) cp "$f" "$work/modules/$b" ;;
    esac
    echo "$b" >> "$work/modules.order"
  done
  (cd "$work" && find . | cpio -o -H newc --quiet | gzip -1 > "$OUT/initrd.img")
  rm -rf "$work"

  # Only the modules the guest loads stay in the root filesystem (the full set is ~400 MB).
  keep=$(resolve $RUNTIME_MODS | awk '!seen[$0]++')
  moddir="$ROOT/usr/lib/modules/$KVER"
  tmpkeep=$(mktemp -d)
  for f in $keep; do rel=${f#"$moddir/"}; mkdir -p "$tmpkeep/$(dirname "$rel")"; cp -a "$f" "$tmpkeep/$rel"; done
  rm -rf "$moddir/kernel"
  cp -a "$tmpkeep/." "$moddir/"
  rm -rf "$tmpkeep" "$ROOT"/boot/*
  chroot "$ROOT" depmod "$KVER"
  step "root filesystem: $(du -sh "$ROOT" | cut -f1)"
  touch "$OUT/base.done"
  step "done"
  exit 0
fi

BASE=$3 APP=$4 NODE=$5 ARTIFACTS=${6:-container}
if [ ! -e "$OUT/rootfs.done" ]; then
  rm -rf "$ROOT"
  step "root filesystem: hard links to the Debian base, plus agent, node and init"
  # Hard links are safe: both trees are immutable caches, and overlayfs never writes to a lower layer.
  cp -al "$BASE/rootfs" "$ROOT"
  rm -f "$ROOT/usr/bin/node"
  install -m 0755 "$NODE" "$ROOT/usr/bin/node"
  mkdir -p "$ROOT/opt/computer"
  cp -a "$APP/." "$ROOT/opt/computer/"
  # Merged-/usr: everything we add lives under usr/ (or opt/), never /bin or /sbin directly.
  for f in $(cd "$HERE/rootfs" && find . -type f); do
    rm -f "$ROOT/$f"
    install -D -m "$(stat -c %a "$HERE/rootfs/$f")" "$HERE/rootfs/$f" "$ROOT/$f"
  done
  ln -f "$BASE/vmlinuz" "$OUT/vmlinuz"
  ln -f "$BASE/initrd.img" "$OUT/initrd.img"
  touch "$OUT/rootfs.done"
fi

if [ "$ARTIFACTS" = all ] && [ ! -e "$OUT/vm.done" ]; then
  step "ext4 base disk ($BASE_FS_SIZE, mkfs.ext4 -d, no mount)"
  rm -f "$OUT/base.raw" "$OUT/base.qcow2"
  mkfs.ext4 -q -F -L computer-root -d "$ROOT" "$OUT/base.raw" "$BASE_FS_SIZE"
  step "qcow2 base disk"
  qemu-img convert -f raw -O qcow2 "$OUT/base.raw" "$OUT/base.qcow2"
  rm -f "$OUT/base.raw"
  touch "$OUT/vm.done"
fi
step "done"
