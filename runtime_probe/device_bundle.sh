#!/usr/bin/env bash
# Builds a relocatable shardlint for the GPU machine, whose image has CUDA, torch and CMake but not
# the Debian libraries shardlint links (yaml-cpp, fmt, toml++) and cannot install them (no network).
#
#   runtime_probe/device_bundle.sh      # -> build-device/bundle/{bin,lib}, a few MiB
#
# bin/ holds shardlint and shardlint-preflight (when CUDA and NCCL were found here); lib/ holds the
# shared libraries they need beyond glibc, libstdc++ and libgcc (which the device image has, newer).
# NCCL (about 200 MiB) and the CUDA driver are not bundled: gpu_check.sh takes libnccl from the
# device's own PyTorch install. Carry `build-device/bundle` to the machine and run
# `runtime_probe/gpu_check.sh` there; it uses the bundle when it runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-device "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DSHARDLINT_BUILD_TESTS=OFF -DSHARDLINT_CXX=OFF >/dev/null
cmake --build build-device -j "$(nproc)"
out=build-device/bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=(build-device/shardlint)
[ -x build-device/shardlint-preflight ] && bins+=(build-device/shardlint-preflight)
cp "${bins[@]}" "$out/bin/"
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++.so* | libgcc_s.so* | \
      libnccl.so* | libcuda.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
du -sh "$out"
ls "$out/bin" "$out/lib"
