#!/usr/bin/env bash
# deps.sh: install whatever Debian 12 packages latgov needs and are missing.
set -euo pipefail
packages=(
    build-essential cmake pkg-config clang-format
    libnvme-dev libjson-c-dev libssl-dev   # libnvme's .pc needs json-c and openssl
    liburing-dev libspdlog-dev libfmt-dev libtoml11-dev nlohmann-json3-dev libarchive-dev
    libsystemd-dev doctest-dev
    clang libclang-rt-14-dev   # fuzz targets and sanitizers (tests/fuzz)
    fio python3 python3-matplotlib python3-pytest
    qemu-system-x86 linux-image-amd64 busybox-static   # the NVMe VM test bed
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "deps: installing ${missing[*]}" >&2
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >&2
fi
