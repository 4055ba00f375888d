#!/usr/bin/env bash
# Copies a binary and the shared libraries it links into a root file system for a slim image:
#   deploy/collect-runtime.sh BINARY ROOTFS
# The binary goes to ROOTFS/usr/local/bin (debug sections stripped); each library the dynamic
# linker resolves goes to its own path under ROOTFS, except the C runtime every base image has
# (libc, libm, the loader, libstdc++, libgcc_s), which stays the base image's.
set -euo pipefail
binary="$1" rootfs="$2"
mkdir -p "$rootfs/usr/local/bin"
install -m 0755 "$binary" "$rootfs/usr/local/bin/mmserve"
strip --strip-debug "$rootfs/usr/local/bin/mmserve"
base_runtime='/(ld-linux[^/]*|libc|libm|libdl|librt|libpthread|libresolv|libstdc\+\+|libgcc_s)\.so'
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | grep -Ev "$base_runtime" |
  while read -r lib; do
    dest="/usr${lib#/usr}"  # Debian 12 merged /lib into /usr/lib: the image's /lib is a link
    mkdir -p "$rootfs$(dirname "$dest")"
    cp -L "$lib" "$rootfs$dest"
  done
echo "collect-runtime: $(find "$rootfs" -type f | wc -l) files, $(du -sh "$rootfs" | cut -f1) in $rootfs"
