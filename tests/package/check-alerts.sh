#!/usr/bin/env bash
# check-alerts.sh PROMTOOL: promtool check rules and promtool test rules on
# prometheus/latgov-alerts.yml with the cases in tests/package/alerts-test.yml.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
promtool=$1
[[ -x $promtool ]] || { echo "FAIL no promtool at $promtool (scripts/prometheus-tools)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$src/prometheus/latgov-alerts.yml" "$src/tests/package/alerts-test.yml" "$tmp/"
cd "$tmp"
"$promtool" check rules latgov-alerts.yml
"$promtool" test rules alerts-test.yml
