import { createHash, createHmac } from 'node:crypto';
import { EKSClient } from '@aws-sdk/client-eks';
import { CoreV1Api } from '@kubernetes/client-node';
import type { AwsCredentialIdentity } from '@smithy/types';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { startFakeEks, type EksReply, type FakeEks } from '../fakes/eks.js';
import {
  describeEksCluster,
  EKS_AUTH_PROVIDER,
  eksKubeConfig,
  eksToken,
  eksTokenSource,
} from '../../src/cluster/eks-auth.js';

// ---------------------------------------------------------------------------------------------
// An independent SigV4 (AWS General Reference, "Signature Version 4 signing process": canonical request,
// string to sign, signing key, signature) written with node:crypto only.
// ---------------------------------------------------------------------------------------------

const sha256Hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');
const hmac = (key: string | Buffer, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest();

/** RFC 3986 encoding as SigV4 canonical query strings need it. */
const rfc3986 = (s: string): string =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function signingKey(secret: string, date: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
}

interface SigParts {
  method: string;
  path: string;
  /** Decoded query parameters (without X-Amz-Signature). */
  query: Record<string, string>;
  /** Lower-case header name → value, exactly the signed headers. */
  headers: Record<string, string>;
  payloadHash: string;
  amzDate: string;
  /** `<date>/<region>/<service>/aws4_request` */
  scope: string;
  secret: string;
}

function canonicalRequest(p: SigParts): string {
  const query = Object.entries(p.query)
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const names = Object.keys(p.headers).sort();
  return [
    p.method,
    p.path,
    query,
    ...names.map((n) => `${n}:${p.headers[n]?.trim()}`),
    '',
    names.join(';'),
    p.payloadHash,
  ].join('\n');
}

function signature(p: SigParts): string {
  const stringToSign = ['AWS4-HMAC-SHA256', p.amzDate, p.scope, sha256Hex(canonicalRequest(p))].join('\n');
  const [date, region, service] = p.scope.split('/');
  return hmac(signingKey(p.secret, date ?? '', region ?? '', service ?? ''), stringToSign).toString('hex');
}

describe('the independent SigV4 helper', () => {
  // AWS General Reference, "Calculate the signature for AWS Signature Version 4" (IAM ListUsers example).
  it('reproduces the published signing key and signature', () => {
    expect(signingKey('wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', '20120215', 'us-east-1', 'iam').toString('hex')).toBe(
      'f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d',
    );
    const parts: SigParts = {
      method: 'GET',
      path: '/',
      query: { Action: 'ListUsers', Version: '2010-05-08' },
      headers: {
        'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
        host: 'iam.amazonaws.com',
        'x-amz-date': '20150830T123600Z',
      },
      payloadHash: sha256Hex(''),
      amzDate: '20150830T123600Z',
      scope: '20150830/us-east-1/iam/aws4_request',
      secret: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
    };
    expect(sha256Hex(canonicalRequest(parts))).toBe('f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59');
    expect(signature(parts)).toBe('5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7');
  });
});

// ---------------------------------------------------------------------------------------------
// Token checks
// ---------------------------------------------------------------------------------------------

const CREDS: AwsCredentialIdentity = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
};
const T0 = new Date('2026-01-02T03:04:05.000Z');
const MIN = 60_000;

/** `k8s-aws-v1.<base64url>` → the presigned URL. */
function decodeToken(token: string): URL {
  expect(token.startsWith('k8s-aws-v1.')).toBe(true);
  const body = token.slice('k8s-aws-v1.'.length);
  expect(body).toMatch(/^[A-Za-z0-9_-]+$/); // base64url, no padding
  return new URL(Buffer.from(body, 'base64url').toString('utf8'));
}

function queryOf(url: URL): Record<string, string> {
  const q: Record<string, string> = {};
  for (const [k, v] of url.searchParams) q[k] = v;
  return q;
}

/** Recompute the signature of a presigned token URL as the API server's authenticator would have STS check it. */
function expectValidSignature(url: URL, clusterName: string, secret: string): void {
  const { 'X-Amz-Signature': sig, ...rest } = queryOf(url);
  expect(sig).toMatch(/^[0-9a-f]{64}$/);
  expect(
    signature({
      method: 'GET',
      path: url.pathname,
      query: rest,
      headers: { host: url.host, 'x-k8s-aws-id': clusterName },
      payloadHash: sha256Hex(''),
      amzDate: rest['X-Amz-Date'] ?? '',
      scope: (rest['X-Amz-Credential'] ?? '').split('/').slice(1).join('/'),
      secret,
    }),
  ).toBe(sig);
}

describe('eksToken', () => {
  it('presigns STS GetCallerIdentity for the cluster, as aws eks get-token does', async () => {
    const { token, expiresAt } = await eksToken({ clusterName: 'prod', region: 'us-west-2', credentials: CREDS, now: T0 });
    const url = decodeToken(token);
    expect(url.protocol).toBe('https:');
    expect(url.host).toBe('sts.us-west-2.amazonaws.com');
    expect(url.pathname).toBe('/');
    const q = queryOf(url);
    // Exactly aws-iam-authenticator's parameterWhitelist, one value each.
    expect(Object.keys(q).sort()).toEqual([
      'Action',
      'Version',
      'X-Amz-Algorithm',
      'X-Amz-Credential',
      'X-Amz-Date',
      'X-Amz-Expires',
      'X-Amz-Signature',
      'X-Amz-SignedHeaders',
    ]);
    expect(url.searchParams.getAll('Action')).toEqual(['GetCallerIdentity']);
    expect(q['Version']).toBe('2011-06-15');
    expect(q['X-Amz-Algorithm']).toBe('AWS4-HMAC-SHA256');
    expect(q['X-Amz-Credential']).toBe('AKIDEXAMPLE/20260102/us-west-2/sts/aws4_request');
    expect(q['X-Amz-Date']).toBe('20260102T030405Z');
    expect(q['X-Amz-Expires']).toBe('60');
    expect(q['X-Amz-SignedHeaders']).toBe('host;x-k8s-aws-id');
    expectValidSignature(url, 'prod', CREDS.secretAccessKey);
    expect(expiresAt.toISOString()).toBe('2026-01-02T03:19:05.000Z');
  });

  it('signs the cluster name: a token for another cluster does not verify', async () => {
    const url = decodeToken((await eksToken({ clusterName: 'prod', region: 'us-west-2', credentials: CREDS, now: T0 })).token);
    expect(() => expectValidSignature(url, 'staging', CREDS.secretAccessKey)).toThrow();
  });

  it('carries and signs the session token, and expires with the credentials when they expire first', async () => {
    const creds = { ...CREDS, sessionToken: 'FwoGZXIvYXdzE+/session=', expiration: new Date(T0.getTime() + 5 * MIN) };
    const { token, expiresAt } = await eksToken({ clusterName: 'prod', region: 'eu-west-1', credentials: async () => creds, now: T0 });
    const url = decodeToken(token);
    expect(url.searchParams.get('X-Amz-Security-Token')).toBe('FwoGZXIvYXdzE+/session=');
    expect(url.searchParams.get('X-Amz-Credential')).toBe('AKIDEXAMPLE/20260102/eu-west-1/sts/aws4_request');
    expectValidSignature(url, 'prod', CREDS.secretAccessKey);
    expect(expiresAt.toISOString()).toBe('2026-01-02T03:09:05.000Z');
  });

  it('uses the China partition STS host for cn- regions and honours stsEndpoint', async () => {
    const cn = decodeToken((await eksToken({ clusterName: 'c', region: 'cn-north-1', credentials: CREDS, now: T0 })).token);
    expect(cn.host).toBe('sts.cn-north-1.amazonaws.com.cn');
    expectValidSignature(cn, 'c', CREDS.secretAccessKey);
    const fips = decodeToken(
      (
        await eksToken({
          clusterName: 'c',
          region: 'us-east-1',
          credentials: CREDS,
          now: T0,
          stsEndpoint: 'https://sts-fips.us-east-1.amazonaws.com',
        })
      ).token,
    );
    expect(fips.host).toBe('sts-fips.us-east-1.amazonaws.com');
    expectValidSignature(fips, 'c', CREDS.secretAccessKey);
  });

  it('names the cluster and region when credentials cannot be had', async () => {
    const failing = async (): Promise<AwsCredentialIdentity> => {
      throw Object.assign(new Error('Could not load credentials from any providers'), { name: 'CredentialsProviderError' });
    };
    await expect(eksToken({ clusterName: 'prod', region: 'us-west-2', credentials: failing, now: T0 })).rejects.toThrow(
      'cannot get AWS credentials to sign an EKS token for cluster "prod" (us-west-2): CredentialsProviderError: Could not load credentials from any providers',
    );
    await expect(eksToken({ clusterName: '', region: 'us-west-2', credentials: CREDS })).rejects.toThrow(
      'EKS cluster name must be a non-empty string',
    );
  });
});

describe('eksTokenSource', () => {
  it('caches the token, refreshes one minute before expiry and shares one presign between concurrent callers', async () => {
    let now = T0;
    let calls = 0;
    const get = eksTokenSource({
      clusterName: 'prod',
      region: 'us-west-2',
      now: () => now,
      credentials: async () => {
        calls += 1;
        return CREDS;
      },
    });
    const first = await Promise.all([get(), get(), get()]);
    expect(calls).toBe(1);
    expect(new Set(first.map((t) => t.token)).size).toBe(1);
    now = new Date(T0.getTime() + 14 * MIN - 1);
    expect((await get()).token).toBe(first[0]?.token);
    expect(calls).toBe(1);
    now = new Date(T0.getTime() + 14 * MIN);
    const second = await get();
    expect(calls).toBe(2);
    expect(decodeToken(second.token).searchParams.get('X-Amz-Date')).toBe('20260102T031805Z');
    expect(second.expiresAt.toISOString()).toBe('2026-01-02T03:33:05.000Z');
  });

  it('keeps a still-valid token when a refresh fails, and throws once it has expired', async () => {
    let now = T0;
    let fail = false;
    const get = eksTokenSource({
      clusterName: 'prod',
      region: 'us-west-2',
      now: () => now,
      credentials: async () => {
        if (fail) throw new Error('IMDS unreachable');
        return CREDS;
      },
    });
    const first = await get();
    fail = true;
    now = new Date(T0.getTime() + 14 * MIN + 30_000);
    expect((await get()).token).toBe(first.token);
    now = new Date(T0.getTime() + 15 * MIN);
    await expect(get()).rejects.toThrow('cannot get AWS credentials to sign an EKS token for cluster "prod" (us-west-2): IMDS unreachable');
    fail = false;
    const again = await get();
    expect(decodeToken(again.token).searchParams.get('X-Amz-Date')).toBe('20260102T031905Z');
  });
});

// ---------------------------------------------------------------------------------------------
// DescribeCluster against a loopback fake EKS API (REST-JSON) and the built KubeConfig against the fake API server
// ---------------------------------------------------------------------------------------------

const CA_DATA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIC/jCCAeagAwIBAgIBADANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwprdWJl\n-----END CERTIFICATE-----\n').toString('base64');
const ARN = 'arn:aws:eks:us-west-2:123456789012:cluster/prod';

function activeCluster(endpoint: string): EksReply {
  return {
    status: 200,
    body: {
      cluster: { name: 'prod', arn: ARN, endpoint, status: 'ACTIVE', certificateAuthority: { data: CA_DATA }, version: '1.30' },
    },
  };
}

describe('describeEksCluster and eksKubeConfig', () => {
  let eks: FakeEks;
  let kube: FakeKube;
  let eksClient: EKSClient;

  beforeAll(async () => {
    eks = await startFakeEks();
    kube = await startFakeKube({
      objects: [{ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'app', namespace: 'default', uid: 'sa-uid' } }],
    });
    eksClient = new EKSClient({ region: 'us-west-2', endpoint: eks.url, credentials: CREDS, maxAttempts: 1 });
  });
  afterAll(async () => {
    eksClient.destroy();
    await eks.close();
    await kube.close();
  });
  afterEach(() => {
    eks.clusters.clear();
    eks.requests.length = 0;
    kube.requests.length = 0;
  });

  it('reads endpoint and CA with a signed GET /clusters/<name>', async () => {
    eks.clusters.set('prod', activeCluster('https://ABCDEF.gr7.us-west-2.eks.amazonaws.com'));
    const info = await describeEksCluster({ clusterName: 'prod', region: 'us-west-2', eksClient });
    expect(info).toEqual({ arn: ARN, endpoint: 'https://ABCDEF.gr7.us-west-2.eks.amazonaws.com', caData: CA_DATA });
    expect(eks.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /clusters/prod']);
    expect(eks.requests[0]?.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-west-2\/eks\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
    );
  });

  it('builds a KubeConfig whose requests carry a fresh EKS bearer token', async () => {
    eks.clusters.set('prod', activeCluster(kube.url));
    let now = T0;
    const kc = await eksKubeConfig({
      clusterName: 'prod',
      region: 'us-west-2',
      eksClient,
      credentials: CREDS,
      now: () => now,
      insecureHttpForTests: true,
    });
    expect(kc.getCurrentContext()).toBe(ARN);
    expect(kc.getCurrentCluster()).toEqual({ name: ARN, server: kube.url, caData: CA_DATA, skipTLSVerify: true });
    expect(kc.getCurrentUser()).toEqual({
      name: ARN,
      authProvider: { name: EKS_AUTH_PROVIDER, config: { clusterName: 'prod', region: 'us-west-2' } },
    });

    const core = kc.makeApiClient(CoreV1Api);
    const sa = await core.readNamespacedServiceAccount({ name: 'app', namespace: 'default' });
    expect(sa.metadata?.uid).toBe('sa-uid');
    now = new Date(T0.getTime() + 10 * MIN);
    await core.readNamespacedServiceAccount({ name: 'app', namespace: 'default' });
    now = new Date(T0.getTime() + 16 * MIN); // past the first token's expiry
    await core.readNamespacedServiceAccount({ name: 'app', namespace: 'default' });

    const auths = kube.requests.map((r) => r.headers.authorization ?? '');
    expect(auths).toHaveLength(3);
    for (const a of auths) expect(a).toMatch(/^Bearer k8s-aws-v1\.[A-Za-z0-9_-]+$/);
    expect(auths[1]).toBe(auths[0]);
    expect(auths[2]).not.toBe(auths[0]);
    const urls = auths.map((a) => decodeToken(a.slice('Bearer '.length)));
    expect(urls.map((u) => u.searchParams.get('X-Amz-Date'))).toEqual(['20260102T030405Z', '20260102T030405Z', '20260102T032005Z']);
    for (const u of urls) expectValidSignature(u, 'prod', CREDS.secretAccessKey);
  });

  it('refuses an http:// endpoint unless the test option allows it', async () => {
    eks.clusters.set('prod', activeCluster(kube.url));
    await expect(eksKubeConfig({ clusterName: 'prod', region: 'us-west-2', eksClient, credentials: CREDS })).rejects.toThrow(
      `EKS cluster "prod" in region us-west-2: API server endpoint must be https, got ${kube.url}`,
    );
  });

  it('uses endpointOverride instead of the described endpoint, keeping TLS verification for https', async () => {
    eks.clusters.set('prod', activeCluster(kube.url));
    const kc = await eksKubeConfig({
      clusterName: 'prod',
      region: 'us-west-2',
      eksClient,
      credentials: CREDS,
      endpointOverride: 'https://127.0.0.1:6443',
      insecureHttpForTests: true,
    });
    expect(kc.getCurrentCluster()).toEqual({ name: ARN, server: 'https://127.0.0.1:6443', caData: CA_DATA, skipTLSVerify: false });
  });

  it('names cluster, region and eks:DescribeCluster on AccessDenied', async () => {
    eks.clusters.set('prod', {
      status: 403,
      headers: { 'x-amzn-errortype': 'AccessDeniedException' },
      body: {
        message:
          'User: arn:aws:iam::123456789012:role/tokenwatch is not authorized to perform: eks:DescribeCluster on resource: ' + ARN,
      },
    });
    await expect(eksKubeConfig({ clusterName: 'prod', region: 'us-west-2', eksClient, credentials: CREDS })).rejects.toThrow(
      'cannot read EKS cluster "prod" in region us-west-2: access denied (User: arn:aws:iam::123456789012:role/tokenwatch is not ' +
        `authorized to perform: eks:DescribeCluster on resource: ${ARN}); the AWS identity needs IAM permission ` +
        'eks:DescribeCluster on arn:aws:eks:us-west-2:<account>:cluster/prod',
    );
  });

  it('names cluster, region and eks:DescribeCluster on ResourceNotFound', async () => {
    await expect(describeEksCluster({ clusterName: 'nope', region: 'us-west-2', eksClient })).rejects.toThrow(
      'EKS cluster "nope" in region us-west-2 not found (No cluster found for name: nope.); check kubernetes.eks.clusterName ' +
        'and region (tokenwatch calls eks:DescribeCluster on it)',
    );
  });

  it('reports a cluster without an endpoint yet, and other failures with the operation', async () => {
    eks.clusters.set('new', { status: 200, body: { cluster: { name: 'new', status: 'CREATING' } } });
    await expect(describeEksCluster({ clusterName: 'new', region: 'us-west-2', eksClient })).rejects.toThrow(
      'EKS cluster "new" in region us-west-2 has no API server endpoint yet (status CREATING)',
    );
    eks.clusters.set('prod', { status: 500, headers: { 'x-amzn-errortype': 'ServerException' }, body: { message: 'boom' } });
    await expect(describeEksCluster({ clusterName: 'prod', region: 'us-west-2', eksClient })).rejects.toThrow(
      'cannot describe EKS cluster "prod" in region us-west-2 (eks:DescribeCluster): ServerException: boom',
    );
  });
});
