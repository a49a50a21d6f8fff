import { lookup as dnsLookup } from 'node:dns';
import { lookup as resolveAll } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { AppError } from '../errors.js';

// The network half of webhook delivery. A business names the URL, so every request is a possible SSRF: the address
// rules are checked at registration (a clear 400) and again on the address each delivery actually connects to, so a
// name that rebinds to an internal address after registration is still refused.

export type EndpointPolicy = {
  environment: 'sandbox' | 'live';
  allowLoopback: boolean;
  /** Added to a refusal of http or of a loopback host: how a receiver on the integrator's machine can be reached. */
  localHint?: string;
};

/**
 * The policy for an environment on this deployment. A sandbox refusal of http or loopback says how to reach a local
 * receiver: the WEBHOOKS_ALLOW_LOOPBACK switch where the deployment could turn it on (not NODE_ENV=production, which
 * refuses it, so a hosted sandbox never names a switch its integrators cannot use), else an https tunnel. Live: none.
 */
export function endpointPolicy(config: { nodeEnv: string; webhooks: { allowLoopback: boolean } }, environment: 'sandbox' | 'live'): EndpointPolicy {
  const allowLoopback = environment === 'sandbox' && config.webhooks.allowLoopback;
  if (environment === 'live' || allowLoopback) return { environment, allowLoopback };
  const tunnel = 'expose it at a public https URL (a tunnel)';
  const localHint = config.nodeEnv === 'production'
    ? `To reach a receiver on your machine, ${tunnel}.`
    : `To reach a receiver on your machine, ${tunnel}, or run this service with WEBHOOKS_ALLOW_LOOPBACK=true (sandbox endpoints may then use http and loopback addresses; local development only).`;
  return { environment, allowLoopback, localHint };
}

export type DeliveryResult = { statusCode: number | null; latencyMs: number; error: string | null; retryAfterSeconds: number | null };

export type WebhookRequest = { url: string; headers: Record<string, string>; body: string; timeoutMs: number; policy: EndpointPolicy };

type Outcome = Omit<DeliveryResult, 'latencyMs'>;

const USER_AGENT = 'Rampway-Webhooks/1';
/** The response body only tells us the endpoint is done; beyond this we stop reading rather than wait. */
const MAX_RESPONSE_BYTES = 64 * 1024;
const MAX_RETRY_AFTER_SECONDS = 86_400;

type Kind = 'loopback' | 'unspecified' | 'private' | 'carrier-grade NAT' | 'link-local' | 'documentation' | 'benchmarking' | 'multicast' | 'broadcast' | 'reserved';

// IANA's special-purpose registries (RFC 6890 and later). The first kind that matches names the address in messages.
const IPV4_RANGES: [Kind, string[]][] = [
  ['loopback', ['127.0.0.0/8']],
  ['unspecified', ['0.0.0.0/8']],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']],
  ['carrier-grade NAT', ['100.64.0.0/10']],
  ['link-local', ['169.254.0.0/16']],
  ['documentation', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24']],
  ['benchmarking', ['198.18.0.0/15']],
  ['multicast', ['224.0.0.0/4']],
  ['broadcast', ['255.255.255.255/32']],
  ['reserved', ['192.0.0.0/24', '192.88.99.0/24', '240.0.0.0/4']],
];

const IPV6_RANGES: [Kind, string[]][] = [
  ['loopback', ['::1/128']],
  ['unspecified', ['::/128']],
  ['private', ['fc00::/7', 'fec0::/10']],
  ['link-local', ['fe80::/10']],
  ['documentation', ['2001:db8::/32', '3fff::/20']],
  ['benchmarking', ['2001:2::/48']],
  ['multicast', ['ff00::/8']],
  // Discard-only, and the IETF protocol block (Teredo, ORCHID, AMT...): no webhook endpoint lives there.
  ['reserved', ['100::/64', '2001::/23']],
];

/** The IPv6 forms that deliver to an IPv4 address: mapped (::ffff:a.b.c.d), NAT64 (RFC 6052) and 6to4 (RFC 3056). */
function ipv6Wrappers(cidr: string): string[] {
  const [v4, bits] = cidr.split('/');
  const hex = v4.split('.').map((octet) => Number(octet).toString(16).padStart(2, '0')).join('');
  const prefix = Number(bits);
  return [`::ffff:${v4}/${96 + prefix}`, `64:ff9b::${v4}/${96 + prefix}`, `2002:${hex.slice(0, 4)}:${hex.slice(4)}::/${16 + prefix}`];
}

function blockList(cidrs: string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [network, bits] = cidr.split('/');
    list.addSubnet(network, Number(bits), isIP(network) === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

const KINDS: [Kind, BlockList][] = [...IPV4_RANGES, ...IPV6_RANGES].map(([kind, cidrs]) => [
  kind, blockList(cidrs.flatMap((cidr) => (isIP(cidr.split('/')[0]) === 4 ? [cidr, ...ipv6Wrappers(cidr)] : [cidr]))),
]);

// Outside these an IPv6 address is not global unicast (the IPv4 forms inside were checked against the kinds above).
const IPV6_ROUTABLE = blockList(['2000::/3', '::ffff:0:0/96', '64:ff9b::/96']);

/** What makes an IP address no place to deliver to, or null for a public address. */
function addressKind(address: string): Kind | null {
  const family = isIP(address);
  if (family === 0) return 'reserved';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const [kind, list] of KINDS) if (list.check(address, type)) return kind;
  return family === 6 && !IPV6_ROUTABLE.check(address, 'ipv6') ? 'reserved' : null;
}

/** Loopback is for local development: a live policy that claims it is a bug, and is not trusted. */
const loopbackAllowed = (policy: EndpointPolicy) => policy.allowLoopback && policy.environment === 'sandbox';

/** The first address the policy forbids, named by its kind; null when every address may be delivered to. */
function refusedKind(addresses: string[], policy: EndpointPolicy): Kind | null {
  for (const address of addresses) {
    const kind = addressKind(address);
    if (kind && !(kind === 'loopback' && loopbackAllowed(policy))) return kind;
  }
  return null;
}

const anAddress = (kind: Kind) => `${/^[aeiou]/.test(kind) ? 'an' : 'a'} ${kind} address`;

function invalidUrl(message: string, hint?: string): never {
  const full = hint ? `${message} ${hint}` : message;
  throw AppError.invalid(full, [{ path: 'url', in: 'body', message: full }]);
}

/** The URL's own rules, the same at registration and at delivery. Messages never repeat the URL: it may hold a token. */
function parseEndpointUrl(raw: string, policy: EndpointPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return invalidUrl('url must be an absolute URL.');
  }
  const schemes = loopbackAllowed(policy) ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) invalidUrl(loopbackAllowed(policy) ? 'url must use https or http.' : 'url must use https.', url.protocol === 'http:' ? policy.localHint : undefined);
  if (url.username || url.password) invalidUrl('url must not contain a username or password.');
  if (url.port !== '' && Number(url.port) < 1) invalidUrl('url port must be between 1 and 65535.');
  return url;
}

/** The host as net expects it: IPv6 literals without their brackets (the URL parser has already normalised IPv4 forms). */
const bareHost = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

/** Registration: the URL, once its scheme, port and every address its host resolves to are allowed by the policy. */
export async function checkEndpointUrl(raw: string, policy: EndpointPolicy): Promise<URL> {
  const url = parseEndpointUrl(raw, policy);
  const host = bareHost(url);
  if (isIP(host)) {
    const kind = refusedKind([host], policy);
    if (kind) invalidUrl(`url host is ${anAddress(kind)}.`, kind === 'loopback' ? policy.localHint : undefined);
    return url;
  }
  const addresses = await resolveAll(host, { all: true, verbatim: true }).catch(() => []);
  if (addresses.length === 0) invalidUrl('url host does not resolve.');
  const kind = refusedKind(addresses.map((a) => a.address), policy);
  if (kind) invalidUrl(`url host resolves to ${anAddress(kind)}.`, kind === 'loopback' ? policy.localHint : undefined);
  return url;
}

class RefusedAddress extends Error {}

/** net's lookup hook: resolves the name itself and fails the connection, before it is made, on a forbidden address. */
function guardedLookup(policy: EndpointPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { family: options.family, hints: options.hints, all: true, verbatim: true }, (err, addresses) => {
      if (err) return callback(err, '');
      const kind = refusedKind(addresses.map((a) => a.address), policy);
      if (kind) return callback(new RefusedAddress(`refused: host resolves to ${anAddress(kind)}`), '');
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

/** Retry-After (delta-seconds or an HTTP-date) in whole seconds from now, at most a day; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | null {
  const text = value?.trim();
  if (!text) return null;
  const seconds = /^\d+$/.test(text) ? Number(text) : Math.ceil((Date.parse(text) - now) / 1000);
  return Number.isNaN(seconds) ? null : Math.min(Math.max(seconds, 0), MAX_RETRY_AFTER_SECONDS);
}

function locationHost(location: string | undefined, base: URL): string {
  if (!location) return 'elsewhere';
  return URL.canParse(location, base) ? new URL(location, base).host : 'elsewhere';
}

function answered(res: IncomingMessage, url: URL): Outcome {
  const status = res.statusCode ?? 0;
  const redirect = status >= 300 && status < 400;
  return {
    statusCode: status,
    error: redirect ? `redirect not followed (${status} to ${locationHost(res.headers.location, url)})` : null,
    retryAfterSeconds: status === 429 || status === 503 ? parseRetryAfter(res.headers['retry-after']) : null,
  };
}

const failed = (error: string): Outcome => ({ statusCode: null, error, retryAfterSeconds: null });

function connectionError(err: Error & { code?: string; errors?: { code?: string }[] }): string {
  if (err instanceof RefusedAddress) return err.message;
  return err.code ?? err.errors?.[0]?.code ?? 'connection failed';
}

/** One POST, settled once: by the response (body read up to the cap, then dropped), an error, or the deadline. */
function exchange(url: URL, req: WebhookRequest): Promise<Outcome> {
  return new Promise((resolve) => {
    const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)({
      hostname: bareHost(url),
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers: { ...req.headers, 'content-type': 'application/json', 'user-agent': USER_AGENT, 'content-length': Buffer.byteLength(req.body) },
      // No pool: a peer that died must not be reused by the next delivery.
      agent: false,
      lookup: guardedLookup(req.policy),
    });
    let response: IncomingMessage | undefined;
    let settled = false;
    const settle = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      request.destroy();
      resolve(outcome);
    };
    // Once the status line is in, the endpoint has answered; a body that dawdles past the deadline does not undo that.
    const deadline = setTimeout(() => settle(response ? answered(response, url) : failed(`timed out after ${req.timeoutMs} ms`)), req.timeoutMs);
    request.on('error', (err) => settle(response ? answered(response, url) : failed(connectionError(err))));
    request.on('response', (res) => {
      response = res;
      let read = 0;
      const done = () => settle(answered(res, url));
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= MAX_RESPONSE_BYTES) done();
      });
      res.on('end', done);
      res.on('error', done);
      res.on('close', done);
    });
    request.end(req.body);
  });
}

/** Delivers one webhook. Network and HTTP outcomes come back in the result; it throws only on programming errors. */
export async function sendWebhook(req: WebhookRequest): Promise<DeliveryResult> {
  const started = performance.now();
  const timed = (outcome: Outcome): DeliveryResult => ({ ...outcome, latencyMs: Math.round(performance.now() - started) });
  let url: URL;
  try {
    // A delivery's record says what happened; the hint is for the person registering the URL.
    url = parseEndpointUrl(req.url, { ...req.policy, localHint: undefined });
  } catch (err) {
    if (err instanceof AppError) return timed(failed(`refused: ${err.message.replace(/\.$/, '')}`));
    throw err;
  }
  // net skips the lookup hook for IP literals, so they are checked here, before any connection.
  const host = bareHost(url);
  const kind = isIP(host) ? refusedKind([host], req.policy) : null;
  if (kind) return timed(failed(`refused: host is ${anAddress(kind)}`));
  return timed(await exchange(url, req));
}
