# syntax=docker/dockerfile:1
# tokenwatch container image: `docker build -t tokenwatch:0.1.0 .`
#
# build:   all dependencies (dev included) → `npm run build` (esbuild bundle → dist/cli/) → `npm pack`: the package's own file list
#          (package.json "files": bin/, dist/, examples/, catalog.json, config.example.yaml, .env.example, README.md) → a clean production install of it
#          (`npm ci --omit=dev`). No compiler anywhere: better-sqlite3 13 ships prebuilt N-API binaries in its package.
# runtime: Node 26 (the active LTS) on Debian trixie slim, no npm cache, no TypeScript sources or dev dependencies,
#          non-root uid 10001. The node probe DaemonSet (manifests/probe, the chart's probe.enabled) runs this same image.
# Another Node (22.19 or later): `docker build --build-arg NODE_IMAGE=node:24-trixie-slim .`
# Pinned base image: `--build-arg NODE_IMAGE_DIGEST=sha256:…` (the release workflow resolves the tag's digest and
# passes it; a dependency bot such as Renovate can update it too) makes both stages FROM node:26-trixie-slim@sha256:…,
# so a rebuilt tag cannot change the base under a release. Empty (the default) = the tag alone.
# OCI labels (https://github.com/opencontainers/image-spec/blob/main/annotations.md): VERSION, REVISION, CREATED and
# SOURCE are build arguments the release script fills (scripts/release.mjs; docs/release.md).
# test/docker/ checks this file; scripts/check-runtime.sh reproduces the build and runtime steps without Docker,
# running the same scripts/prune-runtime.sh and measuring node_modules.

ARG NODE_IMAGE=node:26-trixie-slim
ARG NODE_IMAGE_DIGEST=

FROM ${NODE_IMAGE}${NODE_IMAGE_DIGEST:+@}${NODE_IMAGE_DIGEST} AS build
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
# scripts/prune-runtime.sh: no type declarations, TypeScript sources or source maps; better-sqlite3's prebuilds for
# linux-x64 and linux-arm64 (glibc) only, without its C sources (docs/release.md "Image size").
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force \
 && sh /src/scripts/prune-runtime.sh /app \
 && node -e "new (require('better-sqlite3'))(':memory:').close()"

FROM ${NODE_IMAGE}${NODE_IMAGE_DIGEST:+@}${NODE_IMAGE_DIGEST} AS runtime
ARG NODE_IMAGE
ARG NODE_IMAGE_DIGEST
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="tokenwatch" \
      org.opencontainers.image.description="Finds Kubernetes ServiceAccount clients that use stale bound tokens, from API-server audit logs, and fixes them with approved, verified restarts from Slack." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="docker.io/library/${NODE_IMAGE}" \
      org.opencontainers.image.base.digest="${NODE_IMAGE_DIGEST}"
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
