#!/usr/bin/env bash
# deps.sh SET...: install the Debian 12 packages of the named sets that are
# missing. Sets:
#   build  what building latgov and running latgovd need
#   test   the test beds of scripts/test: fio, the QEMU guest harness, the
#          Debian package tools, bash-completion, python3-matplotlib for the
#          bench plots; promtool and node_exporter are unpacked from their
#          Debian packages, not installed (scripts/prometheus-tools)
# No set installs a kernel: the VM harness takes its guest kernel out of the
# Debian package without installing it into the host's boot chain.
set -euo pipefail
build=(
    build-essential cmake pkg-config scdoc
    libnvme-dev libjson-c-dev libssl-dev   # libnvme's .pc needs json-c and openssl
    liburing-dev libspdlog-dev libfmt-dev libtoml11-dev nlohmann-json3-dev libarchive-dev
    libsystemd-dev doctest-dev
)
test=(
    python3 fio clang-format
    qemu-system-x86 busybox-static cpio   # the NVMe VM test bed (tests/vm/nvme-vm)
    acpica-tools                          # iasl: the _CST SSDT of nvme-vm --cstates (vm.cstates)
    debhelper dpkg-dev fakeroot lintian bash-completion git   # the Debian package (debian/, tests/package)
    systemd man-db groff-base             # check-install.sh: systemd-analyze verify, man -l (nroff)
    python3-matplotlib python3-pytest     # the bench package: plots, its unit tests
    clang libclang-rt-14-dev              # fuzz targets and sanitizers (tests/fuzz)
)
[[ $# -gt 0 ]] || { echo "usage: deps.sh build|test..." >&2; exit 2; }
packages=()
for set in "$@"; do
    case $set in
        build) packages+=("${build[@]}");;
        test) packages+=("${test[@]}");;
        *) echo "deps.sh: unknown set $set (build, test)" >&2; exit 2;;
    esac
done
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
for set in "$@"; do
    if [[ $set == test ]]; then
        "$(dirname "$0")/prometheus-tools" > /dev/null
        "$(dirname "$0")/tuned-debs" > /dev/null
    fi
done
exit 0
