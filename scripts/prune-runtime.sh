#!/bin/sh
# Prunes an installed production node_modules to what the container image runs; the Dockerfile's build stage and
# scripts/check-runtime.sh (so `npm run release:dry`) run this same file, so what is measured is what ships.
# Removes, under APP/node_modules:
#   - type declarations (*.d.ts, *.d.mts, *.d.cts), TypeScript sources (*.ts, *.mts, *.cts: Node never runs them from
#     node_modules, https://nodejs.org/api/typescript.html) and source maps (*.map): nothing at run time reads them
#     (the CLI runs without --enable-source-maps);
#   - native addons of the Bare runtime (*.bare, in bare-fs & co., optional paths of tar-fs): Node cannot load them;
#   - better-sqlite3's C sources (deps/, src/, binding.gyp: it never compiles here, it loads a prebuild) and every
#     prebuild but the image's platforms: linux-x64 and linux-arm64, glibc (Debian; not musl, darwin or win32).
# POSIX sh + find only (the node:*-slim image has no bash extras). Usage: scripts/prune-runtime.sh APP_DIR
set -eu
app=${1:?usage: prune-runtime.sh APP_DIR}
nm="$app/node_modules"
test -d "$nm" || { echo "prune-runtime: $nm is not a directory" >&2; exit 1; }
find "$nm" -type f \( -name '*.ts' -o -name '*.mts' -o -name '*.cts' -o -name '*.map' -o -name '*.bare' \) -delete
sqlite="$nm/better-sqlite3"
if [ -d "$sqlite" ]; then
  rm -rf "$sqlite/deps" "$sqlite/src" "$sqlite/binding.gyp"
  if [ -d "$sqlite/prebuilds" ]; then
    find "$sqlite/prebuilds" -type f ! -name 'linux-x64.node' ! -name 'linux-arm64.node' -delete
  fi
fi
