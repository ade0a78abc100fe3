# syntax=docker/dockerfile:1
# tokenwatch container image: `docker build -t tokenwatch:0.1.0 .`
#
# build:   all dependencies (dev included) → `npm run build` (esbuild bundle → dist/cli/) → `npm pack`: the package's own file list
#          (package.json "files": bin/, dist/, examples/, catalog.json, config.example.yaml, .env.example, README.md) → a clean production install of it
#          (`npm ci --omit=dev`). No compiler anywhere: better-sqlite3 13 ships prebuilt N-API binaries in its package.
# runtime: Node 26 (the active LTS) on Debian trixie slim, no npm cache, no TypeScript sources or dev dependencies,
#          non-root uid 10001. The node probe DaemonSet (manifests/probe, the chart's probe.enabled) runs this same image.
# Another Node (22.19 or later): `docker build --build-arg NODE_IMAGE=node:24-trixie-slim .`
# test/docker/ checks this file; scripts/check-runtime.sh reproduces the build and runtime steps without Docker.

ARG NODE_IMAGE=node:26-trixie-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json README.md LICENSE config.example.yaml .env.example ./
COPY bin ./bin
COPY src ./src
COPY examples ./examples
COPY scripts ./scripts
# npm run build = scripts/build.mjs (esbuild: the CLI bundled into dist/cli/); --ignore-scripts: prepack would build a
# second time.
RUN npm run build \
 && npm pack --ignore-scripts --pack-destination /tmp \
 && mkdir /app \
 && tar -xzf /tmp/tokenwatch-*.tgz -C /app --strip-components=1 \
 && cp package-lock.json /app/
WORKDIR /app
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force \
 && node -e "new (require('better-sqlite3'))(':memory:').close()"

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true
WORKDIR /app
# Files stay owned by root (read-only for the app); only /data, the SQLite store, belongs to the app user.
COPY --from=build /app /app
RUN groupadd --system --gid 10001 tokenwatch \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin tokenwatch \
 && mkdir -p /data \
 && chown 10001:10001 /data
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["node", "bin/tokenwatch.js"]
CMD ["serve"]
