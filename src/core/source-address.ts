/**
 * Which entry of an audit event's `sourceIPs` a request is attributed to. Pure: no I/O.
 *
 * The API server fills `sourceIPs` from the `X-Forwarded-For` header (each entry), then `X-Real-Ip` (when not already
 * listed), then the connection's remote address (when not already last) — kubernetes
 * `staging/src/k8s.io/apimachinery/pkg/util/net/http.go` `SourceIPs`; the audit `Event.sourceIPs` field documents
 * that all but the last entry can be set arbitrarily by the client
 * (`staging/src/k8s.io/apiserver/pkg/apis/audit/v1/types.go`). So the only address a client cannot forge is the
 * last one, or — behind proxies the operator trusts to append the address they saw — the rightmost entry that is not
 * one of those proxies. Everything left of it is client-settable and is kept only to be shown as such.
 */
import ipaddr from 'ipaddr.js';

/** A parsed trusted-proxies list (see {@link parseTrustedProxies}). */
export interface TrustedProxies {
  /** The entries as configured (for messages). */
  readonly entries: readonly string[];
  /** Whether an address is one of the trusted proxies. */
  has(address: string): boolean;
}

/** No trusted proxies: the connection's own address (the last `sourceIPs` entry) is the client. */
export const NO_TRUSTED_PROXIES: TrustedProxies = { entries: [], has: () => false };

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** A dotted-quad IPv4 or an IPv6 address (not ipaddr.js's legacy IPv4 forms such as `127.1`), parsed. */
function parseAddress(value: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!ipaddr.IPv4.isValidFourPartDecimal(value) && !ipaddr.IPv6.isValid(value)) return undefined;
  return ipaddr.parse(value);
}

/** An address or CIDR block as a range (an address is its own /32 or /128); IPv4-mapped IPv6 as IPv4. */
function rangeOf(value: string): Range | undefined {
  const slash = value.indexOf('/');
  const ip = parseAddress(slash === -1 ? value : value.slice(0, slash));
  if (!ip) return undefined;
  const full = ip.kind() === 'ipv4' ? 32 : 128;
  const text = slash === -1 ? String(full) : value.slice(slash + 1);
  if (!/^\d{1,3}$/.test(text) || Number(text) > full) return undefined;
  const bits = Number(text);
  if (ip instanceof ipaddr.IPv6 && ip.isIPv4MappedAddress() && bits >= 96) return [ip.toIPv4Address(), bits - 96];
  return [ip, bits];
}

/** Whether `value` is an IPv4/IPv6 address or a CIDR block (`10.0.0.0/8`, `fd00::/8`). Used by config validation. */
export function isAddressOrCidr(value: string): boolean {
  return typeof value === 'string' && rangeOf(value.trim()) !== undefined;
}

/**
 * Builds a {@link TrustedProxies} from addresses and CIDR blocks (parsed with ipaddr.js; IPv4-mapped IPv6 addresses
 * match their IPv4 form).
 * @throws TypeError naming the first entry that is neither an IP address nor a CIDR block.
 */
export function parseTrustedProxies(entries: readonly string[]): TrustedProxies {
  if (entries.length === 0) return NO_TRUSTED_PROXIES;
  const ranges: Range[] = [];
  for (const e of entries) {
    const r = rangeOf(e.trim());
    if (!r) throw new TypeError(`trusted proxy ${JSON.stringify(e)} is neither an IP address nor a CIDR block`);
    ranges.push(r);
  }
  return {
    entries: [...entries],
    has: (address) => {
      const a = rangeOf(address);
      if (!a) return false;
      return ranges.some(([net, bits]) => net.kind() === a[0].kind() && a[0].match(net, bits));
    },
  };
}

/** The attributed address of one request and the client-settable entries left of it. */
export interface ClientAddress {
  /** The rightmost `sourceIPs` entry not in the trusted proxies (the leftmost entry when all are); absent for `[]`. */
  address?: string;
  /** Entries left of {@link address}: set by the client (`X-Forwarded-For`, `X-Real-Ip`), never used to attribute. */
  forwarded: string[];
}

/**
 * The address a request is attributed to: walking `sourceIPs` from the right (the connection's own address), the
 * first entry that is not a trusted proxy; with every entry trusted, the leftmost. Entries left of it are returned as
 * `forwarded` (client-settable, see the module doc).
 */
export function clientAddress(sourceIPs: readonly string[], trusted: TrustedProxies = NO_TRUSTED_PROXIES): ClientAddress {
  if (sourceIPs.length === 0) return { forwarded: [] };
  let i = sourceIPs.length - 1;
  while (i > 0 && trusted.has(sourceIPs[i]!)) i--;
  return { address: sourceIPs[i]!, forwarded: sourceIPs.slice(0, i) };
}
