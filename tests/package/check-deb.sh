#!/usr/bin/env bash
# check-deb.sh OUT_DIR: build the Debian package (scripts/build-deb) into
# OUT_DIR and check it: lintian reports no error, the package depends on the
# shared libraries latgovd links (shlibs), ships the unit, the conffile, the
# man pages, the completion and the copyright file (Apache-2.0), carries the
# commit in its version, and its prerm runs the unit's restore after the
# stop. Exit 1 on any failure.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
failed=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }

# The package's own test step (unit and golden) is what this suite runs
# already: skip it here, it would double the build.
export DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}"
deb=$("$src/scripts/build-deb" "$out") || { fail "dpkg-buildpackage -b -us -uc"; exit 1; }
pass "dpkg-buildpackage -b -us -uc: $(basename "$deb")"

# The version names the commit built (scripts/build-deb): HEAD, or one
# before it if a commit landed meanwhile; and whether the tree had changes
# that are not committed.
version=$(dpkg-deb -f "$deb" Version)
upstream=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
sha=${version#"$upstream+git"*.*.}; sha=${sha%.dirty}
stamp=$(TZ=UTC git -C "$src" log -1 --date=format-local:%Y%m%d.%H%M%S --format=%cd "$sha" -- 2>/dev/null || true)
if [[ $version =~ ^"$upstream+git"[0-9]{8}\.[0-9]{6}\.[0-9a-f]{7,}(\.dirty)?$ && -n $stamp &&
      $version == "$upstream+git$stamp.$sha"* ]] && git -C "$src" merge-base --is-ancestor "$sha" HEAD; then
  pass "version $version: $upstream, commit $sha$([[ $version == *.dirty ]] && echo ", uncommitted changes")"
else fail "version $version does not name $upstream+gitDATE.TIME.HASH[.dirty] of a commit of HEAD"; fi

command -v lintian > /dev/null || { fail "lintian is not installed"; exit 1; }
lintian --tag-display-limit 0 "$deb" > "$out/lintian.txt" 2>&1 || true
sed 's/^/    /' "$out/lintian.txt"
errors=$(grep -c '^E: ' "$out/lintian.txt" || true)
if [[ $errors -eq 0 ]]; then pass "lintian: no errors ($(grep -c '^W: ' "$out/lintian.txt" || true) warnings)"
else fail "lintian: $errors errors"; fi

depends=$(dpkg-deb -f "$deb" Depends)
for lib in libnvme1 liburing2 libsystemd0 libspdlog1 libfmt9 libarchive13; do
  if [[ $depends == *"$lib"* ]]; then pass "Depends names $lib"; else fail "Depends lacks $lib: $depends"; fi
done
contents=$(dpkg-deb -c "$deb")
for f in ./usr/sbin/latgovd ./usr/bin/latgov ./lib/systemd/system/latgov.service \
    ./etc/latgov/latgov.toml ./usr/share/man/man8/latgovd.8.gz ./usr/share/man/man8/latgov.8.gz \
    ./usr/share/man/man5/latgov.toml.5.gz ./usr/share/bash-completion/completions/latgov \
    ./usr/share/latgov/prometheus/latgov-alerts.yml; do
  if grep -q " $f\$" <<< "$contents"; then pass "ships $f"; else fail "does not ship $f"; fi
done
# The licence: debian/copyright only (Debian policy 12.5), naming the full
# text in common-licenses; no second copy of it.
if grep -q ' ./usr/share/doc/latgov/copyright$' <<< "$contents"; then pass "ships /usr/share/doc/latgov/copyright"
else fail "does not ship /usr/share/doc/latgov/copyright"; fi
copyright=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/doc/latgov/copyright)
if grep -qx 'License: Apache-2.0' <<< "$copyright" &&
    grep -q '/usr/share/common-licenses/Apache-2.0' <<< "$copyright"; then
  pass "copyright: License: Apache-2.0, full text in /usr/share/common-licenses"
else fail "copyright does not state Apache-2.0 with the common-licenses reference"; fi
if grep -qiE '/(LICENSE|COPYING)[^/]*$' <<< "$contents"; then fail "ships a second licence file: $(grep -iE '/(LICENSE|COPYING)[^/]*$' <<< "$contents")"
else pass "no licence file besides copyright"; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dpkg-deb -e "$deb" "$tmp"
if grep -qx /etc/latgov/latgov.toml "$tmp/conffiles"; then pass "/etc/latgov/latgov.toml is a conffile"
else fail "/etc/latgov/latgov.toml is not a conffile"; fi
if grep -q "deb-systemd-helper enable 'latgov.service'" "$tmp/postinst" &&
    grep -q "deb-systemd-invoke .*'latgov.service'" "$tmp/postinst" &&
    grep -qE "_dh_action=(re)?start" "$tmp/postinst"; then
  pass "postinst enables and starts latgov.service (dh_installsystemd)"
else fail "postinst does not enable and start latgov.service"; fi
# After the stop on remove, the prerm runs the unit's own restore command
# once more (ExecStopPost= may have been refused by `latgov calibrate`'s lock).
restore=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./lib/systemd/system/latgov.service |
  sed -n 's/^ExecStopPost=//p' || true)
stop_line=$(grep -n "deb-systemd-invoke stop 'latgov.service'" "$tmp/prerm" | cut -d: -f1 | head -n 1 || true)
restore_line=$(grep -nF -- "$restore" "$tmp/prerm" | cut -d: -f1 | head -n 1 || true)
if [[ -n $restore && -n $stop_line && -n $restore_line && $restore_line -gt $stop_line ]]; then
  pass "prerm runs '$restore' after stopping latgov.service"
else fail "prerm does not run the unit's ExecStopPost '$restore' after the stop (lines ${stop_line:-none}, ${restore_line:-none})"; fi
exit $failed
