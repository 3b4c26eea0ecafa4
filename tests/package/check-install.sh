#!/usr/bin/env bash
# check-install.sh BUILD_DIR: `cmake --install` into a staging directory
# (DESTDIR) and check the layout under the configured CMAKE_INSTALL_PREFIX:
# binaries that run, a unit whose Exec paths name the installed latgovd, the
# configuration where that latgovd looks for it (kept on reinstall), man pages
# that render, and a bash completion that loads. Exit 1 on any failure.
set -euo pipefail
build=$(realpath -e "$1")
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
unitdir=$(sed -n 's/^LATGOV_SYSTEMD_UNITDIR:PATH=//p' "$build/CMakeCache.txt")
[[ -n $prefix && -n $unitdir ]] || { echo "FAIL no install prefix in $build/CMakeCache.txt"; exit 1; }
stage=$(mktemp -d "${TMPDIR:-/tmp}/latgov-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
failed=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

DESTDIR=$stage cmake --install "$build" > "$stage.log" 2>&1 || { cat "$stage.log"; fail "cmake --install"; exit 1; }
rm -f "$stage.log"
root=$stage$prefix
echo "prefix $prefix, units in $unitdir"

quiet() { "$@" > /dev/null; }
check "latgovd installed in $prefix/sbin and runs" quiet "$root/sbin/latgovd" --help
check "latgov installed in $prefix/bin and runs" quiet "$root/bin/latgov" --help

unit=$stage$unitdir/latgov.service
if [[ -f $unit ]]; then
    start=$(sed -n 's/^ExecStart=//p' "$unit")
    stop=$(sed -n 's/^ExecStopPost=//p' "$unit")
    check "unit ExecStart=$start" test "$start" = "$prefix/sbin/latgovd --runtime-dir /run/latgov --wait-for-lock 60"
    check "unit ExecStopPost=$stop" test "$stop" = "$prefix/sbin/latgovd --restore --runtime-dir /run/latgov --wait-for-lock 60"
    check "unit has no unreplaced @VARIABLE@" bash -c "! grep -qE '@[A-Z_]+@' '$unit'"
    if command -v systemd-analyze > /dev/null; then
        # verify resolves Exec paths on the real root: point them at the stage
        sed "s|$prefix/sbin/latgovd|$root/sbin/latgovd|" "$unit" > "$stage/latgov.service"
        check "systemd-analyze verify accepts the unit" \
            systemd-analyze verify --man=no "$stage/latgov.service"
    else
        fail "systemd-analyze is missing, cannot verify the unit (package systemd; scripts/deps.sh test)"
    fi
else
    fail "no unit at $unitdir/latgov.service"
fi

config=$("$root/sbin/latgovd" --help | sed -nE 's/.*--config FILE .*\(default ([^;]+);.*/\1/p')
check "latgovd's default configuration $config is installed" test -f "$stage$config"
check "the installed configuration is valid" quiet "$root/sbin/latgovd" --check-config --config "$stage$config"
check "example configuration in $prefix/share/doc/latgov/examples" test -f "$root/share/doc/latgov/examples/latgov.toml"
echo "# local change" >> "$stage$config"
DESTDIR=$stage cmake --install "$build" > /dev/null
check "a reinstall keeps a changed configuration" grep -q "^# local change" "$stage$config"

for page in man8/latgovd.8 man8/latgov.8 man5/latgov.toml.5; do
    f=$root/share/man/$page
    if [[ -s $f ]] && grep -q '^\.TH' "$f"; then
        if command -v man > /dev/null && command -v nroff > /dev/null; then
            check "man page $page renders" bash -c "MANWIDTH=80 man -l '$f' 2>/dev/null | grep -q NAME"
        else fail "man or nroff is missing, cannot render $page (packages man-db, groff-base; scripts/deps.sh test)"; fi
    else fail "no man page $page"; fi
done

check "the licence in $prefix/share/doc/latgov/LICENSE" grep -q "Apache License" "$root/share/doc/latgov/LICENSE"
check "alerting rules in $prefix/share/latgov/prometheus" test -s "$root/share/latgov/prometheus/latgov-alerts.yml"

comp=$root/share/bash-completion/completions/latgov
if [[ -f $comp ]]; then
    lib=/usr/share/bash-completion/bash_completion
    if [[ -f $lib ]]; then
        out=$(bash -c "source $lib; source '$comp'; COMP_WORDS=(latgov sta); COMP_CWORD=1; COMP_LINE='latgov sta'; COMP_POINT=10; _latgov latgov sta latgov; echo \"\${COMPREPLY[*]}\"")
        check "bash completion: 'latgov sta<TAB>' -> '$out'" test "$out" = status
    else
        fail "bash-completion is not installed ($lib), cannot load the completion"
    fi
else
    fail "no bash completion at $prefix/share/bash-completion/completions/latgov"
fi
exit $failed
