#!/bin/sh
# mmdebstrap customize hook ($1 = the new root): unpack Debian's current bookworm kernel without installing
# it. Installing linux-image-amd64 would pull initramfs-tools and build a 40 MB initramfs we never use (the
# image makes its own small initrd); only vmlinuz and the modules are needed.
set -eu
ROOT=$1
pkg=$(chroot "$ROOT" apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
[ -n "$pkg" ] || { echo "fetch-kernel: no kernel package found" >&2; exit 1; }
chroot "$ROOT" sh -c "cd /tmp && apt-get download -q=2 $pkg"
tmp=$(mktemp -d)
dpkg-deb -x "$ROOT"/tmp/"$pkg"_*.deb "$tmp"
rm -f "$ROOT"/tmp/*.deb
mkdir -p "$ROOT/boot" "$ROOT/usr/lib/modules"
cp "$tmp"/boot/vmlinuz-* "$ROOT/boot/"
# Merged-/usr: the package may still ship lib/modules; it belongs under usr/lib/modules.
for d in "$tmp/lib/modules" "$tmp/usr/lib/modules"; do
  [ -d "$d" ] && cp -a "$d/." "$ROOT/usr/lib/modules/"
done
rm -rf "$tmp"
