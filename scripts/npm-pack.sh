#!/usr/bin/env bash
# Packs the npm packages (npm/, docs/guide/install.md "With npm"): `promptgauge`, the
# launcher every platform installs, and the platform package that carries BINARY. The
# templates are copied, never written to. Each platform package of a release is one run of
# this with that platform's binary (.github/workflows/release.yml).
# Usage: scripts/npm-pack.sh BINARY OUT_DIR [PLATFORM]
#   PLATFORM: a folder of npm/platforms/ (linux-x64, darwin-arm64, linux-x64-musl, …)
#   [default: this machine's, as node names it]
set -euo pipefail
bin=${1:?usage: scripts/npm-pack.sh BINARY OUT_DIR [PLATFORM]}
out=${2:?usage: scripts/npm-pack.sh BINARY OUT_DIR [PLATFORM]}
platform=${3:-$(node -p 'process.platform + "-" + process.arch + (process.platform === "linux" && !process.report.getReport().header.glibcVersionRuntime ? "-musl" : "")')}
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$repo/npm/platforms/$platform" ] || {
  echo "npm-pack: no package for $platform: npm/platforms/ has: $(cd "$repo/npm/platforms" && echo *)" >&2
  exit 2
}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

cp -R "$repo/npm/promptgauge" "$stage/promptgauge"
cp -R "$repo/npm/platforms/$platform" "$stage/platform"
mkdir -p "$stage/platform/bin"
cp "$bin" "$stage/platform/bin/promptgauge"
chmod 755 "$stage/platform/bin/promptgauge" "$stage/promptgauge/bin/promptgauge.js"
for p in promptgauge platform; do
  cp "$repo/README.md" "$repo/LICENSE-MIT" "$repo/LICENSE-APACHE" "$stage/$p/"
  (cd "$stage/$p" && npm pack --silent --pack-destination "$out" >/dev/null)
done
echo "npm-pack: promptgauge and @promptgauge/$platform packed into $out"
