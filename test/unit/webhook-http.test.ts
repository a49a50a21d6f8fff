import { expect } from 'chai';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { AppError } from '../../shared/errors.js';
import { checkEndpointUrl, endpointPolicy, parseRetryAfter, sendWebhook, type EndpointPolicy } from '../../shared/webhooks/http-delivery.js';

const LIVE: EndpointPolicy = { environment: 'live', allowLoopback: false };
const SANDBOX: EndpointPolicy = { environment: 'sandbox', allowLoopback: false };
const LOCAL: EndpointPolicy = { environment: 'sandbox', allowLoopback: true };

async function refusal(raw: string, policy: EndpointPolicy = LIVE): Promise<AppError> {
  const outcome = await checkEndpointUrl(raw, policy).then(() => null, (err: unknown) => err);
  if (!(outcome instanceof AppError)) throw new Error(`expected ${raw} to be refused, got ${String(outcome)}`);
  expect(outcome.code).to.equal('invalid_request');
  expect(outcome.details).to.deep.equal([{ path: 'url', in: 'body', message: outcome.message }]);
  return outcome;
}

type Received = { method: string; url: string; headers: IncomingHttpHeaders; body: string };
type Local = { url: string; port: number; received: Received[]; close: () => Promise<void> };

/** A real HTTP server on 127.0.0.1 that records each request (whole body) before `answer` handles it. */
async function serve(answer: RequestListener): Promise<Local> {
  const received: Received[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
    answer(req, res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const close = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  return { url: `http://127.0.0.1:${port}`, port, received, close };
}

/** A bare TCP listener that only counts connections: proof that a refused delivery never connected. */
async function listenTcp(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  let connections = 0;
  const server = createTcpServer((socket) => {
    connections++;
    socket.destroy();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { port, connections: () => connections, close: () => new Promise((r) => server.close(() => r())) };
}

const send = (url: string, overrides: Partial<Parameters<typeof sendWebhook>[0]> = {}) =>
  sendWebhook({ url, headers: {}, body: '{}', timeoutMs: 5_000, policy: LOCAL, ...overrides });

describe('webhook endpoint URLs', () => {
  const FORBIDDEN: [string, RegExp][] = [
    ['https://127.0.0.1/', /is a loopback address/],
    ['https://127.255.1.2/', /loopback/],
    ['https://2130706433/', /loopback/],
    ['https://0x7f.1/', /loopback/],
    ['https://[::1]/', /loopback/],
    ['https://10.1.2.3/', /is a private address/],
    ['https://172.16.0.1/', /private/],
    ['https://172.31.255.255/', /private/],
    ['https://192.168.1.1/', /private/],
    ['https://[fc00::1]/', /private/],
    ['https://[fd12:3456::1]/', /private/],
    ['https://[fec0::1]/', /private/],
    ['https://169.254.169.254/latest/meta-data/', /link-local/],
    ['https://169.254.0.1/', /link-local/],
    ['https://[fe80::1]/', /link-local/],
    ['https://[febf::1]/', /link-local/],
    ['https://100.64.0.1/', /carrier-grade NAT/],
    ['https://100.127.255.254/', /carrier-grade NAT/],
    ['https://0.0.0.0/', /unspecified/],
    ['https://0.1.2.3/', /unspecified/],
    ['https://[::]/', /unspecified/],
    ['https://224.0.0.1/', /multicast/],
    ['https://239.255.255.250/', /multicast/],
    ['https://[ff02::1]/', /multicast/],
    ['https://255.255.255.255/', /broadcast/],
    ['https://240.0.0.1/', /reserved/],
    ['https://250.1.2.3/', /reserved/],
    ['https://192.0.0.8/', /reserved/],
    ['https://192.0.2.1/', /documentation/],
    ['https://198.51.100.7/', /documentation/],
    ['https://203.0.113.9/', /documentation/],
    ['https://[2001:db8::1]/', /documentation/],
    ['https://[3fff::1]/', /documentation/],
    ['https://198.18.0.1/', /benchmarking/],
    // IPv4-mapped and -compatible IPv6, in dotted and hex spellings.
    ['https://[::ffff:127.0.0.1]/', /loopback/],
    ['https://[::ffff:7f00:1]/', /loopback/],
    ['https://[0:0:0:0:0:ffff:7f00:1]/', /loopback/],
    ['https://[::ffff:169.254.169.254]/', /link-local/],
    ['https://[::ffff:10.0.0.1]/', /private/],
    ['https://[::ffff:100.64.0.1]/', /carrier-grade NAT/],
    ['https://[::127.0.0.1]/', /reserved|loopback/],
    ['https://[::a9fe:a9fe]/', /reserved|link-local/],
    // NAT64 and 6to4 wrapping a forbidden IPv4 address.
    ['https://[64:ff9b::127.0.0.1]/', /loopback/],
    ['https://[64:ff9b::a9fe:a9fe]/', /link-local/],
    ['https://[64:ff9b::c0a8:101]/', /private/],
    ['https://[2002:7f00:1::1]/', /loopback/],
    ['https://[2002:a9fe:a9fe::1]/', /link-local/],
    ['https://[2002:c0a8:101::1]/', /private/],
    ['https://[2002:a00:1::]/', /private/],
    // Not global unicast at all: Teredo, NAT64 local use, discard-only, SIIT.
    ['https://[2001::1]/', /reserved/],
    ['https://[64:ff9b:1::a]/', /reserved/],
    ['https://[100::1]/', /reserved/],
    ['https://[::ffff:0:7f00:1]/', /reserved/],
  ];

  it('refuses every forbidden address range given as an IP literal, naming the range', async () => {
    for (const [url, message] of FORBIDDEN) {
      const err = await refusal(url);
      expect(err.message, url).to.match(message);
    }
  });

  it('still refuses private, link-local and wrapped ranges when loopback is allowed', async () => {
    for (const [url] of FORBIDDEN.filter(([, m]) => !m.source.includes('loopback'))) await refusal(url.replace('https:', 'http:'), LOCAL);
  });

  it('accepts public addresses, including at the edges of the forbidden ranges', async () => {
    for (const raw of [
      'https://93.184.215.14/', 'https://8.8.8.8/hooks?x=1', 'https://172.32.0.1/', 'https://172.15.255.255/', 'https://100.128.0.1/',
      'https://100.63.255.255/', 'https://11.0.0.1/', 'https://169.255.0.1/', 'https://223.255.255.255/', 'https://93.184.215.14:65535/',
      'https://[2606:4700:4700::1111]/', 'https://[::ffff:93.184.215.14]/', 'https://[64:ff9b::5db8:d70e]/', 'https://[2002:5db8:d70e::1]/',
    ]) {
      const url = await checkEndpointUrl(raw, LIVE);
      expect(url).to.be.instanceOf(URL);
      expect(url.href, raw).to.equal(new URL(raw).href);
    }
  });

  it('refuses what is not an absolute https URL without credentials and with a usable port', async () => {
    expect((await refusal('not a url')).message).to.match(/absolute URL/);
    expect((await refusal('/hooks')).message).to.match(/absolute URL/);
    expect((await refusal('ftp://93.184.215.14/')).message).to.match(/must use https/);
    expect((await refusal('http://93.184.215.14/')).message).to.match(/must use https/);
    expect((await refusal('http://93.184.215.14/', SANDBOX)).message).to.match(/must use https/);
    expect((await refusal('https://93.184.215.14:0/')).message).to.match(/port must be between 1 and 65535/);
    await refusal('https://93.184.215.14:65536/');
    const withCredentials = await refusal('https://hook-user:s3cret-token@93.184.215.14/');
    expect(withCredentials.message).to.match(/username or password/);
    expect(JSON.stringify([withCredentials.message, withCredentials.details])).not.to.match(/s3cret|hook-user/);
    expect((await refusal('https://:s3cret@93.184.215.14/')).message).to.match(/username or password/);
  });

  it('tells a sandbox integrator how to reach a local receiver, naming WEBHOOKS_ALLOW_LOOPBACK only where it can be turned on', async () => {
    const config = (nodeEnv: string, allowLoopback = false) => ({ nodeEnv, webhooks: { allowLoopback } });
    const dev = endpointPolicy(config('development'), 'sandbox');
    const hint = /To reach a receiver on your machine, expose it at a public https URL \(a tunnel\), or run this service with WEBHOOKS_ALLOW_LOOPBACK=true/;
    expect((await refusal('http://127.0.0.1:4000/webhooks', dev)).message).to.match(/^url must use https\. /).and.match(hint);
    expect((await refusal('https://127.0.0.1/', dev)).message).to.match(/^url host is a loopback address\. /).and.match(hint);
    expect((await refusal('https://localhost/', dev)).message).to.match(/^url host resolves to a loopback address\. /).and.match(hint);
    // Other refusals have nothing to do with a local receiver.
    expect((await refusal('ftp://93.184.215.14/', dev)).message).to.equal('url must use https.');
    expect((await refusal('https://10.0.0.1/', dev)).message).to.equal('url host is a private address.');
    // A production deployment refuses the switch, so its integrators are not told of it.
    const hosted = endpointPolicy(config('production'), 'sandbox');
    const prod = (await refusal('http://127.0.0.1:4000/webhooks', hosted)).message;
    expect(prod).to.equal('url must use https. To reach a receiver on your machine, expose it at a public https URL (a tunnel).');
    // Live never takes loopback, so there is nothing to suggest; with the switch on, sandbox takes it.
    const live = endpointPolicy(config('development', true), 'live');
    expect(live).to.deep.equal({ environment: 'live', allowLoopback: false });
    expect((await refusal('http://127.0.0.1:4000/webhooks', live)).message).to.equal('url must use https.');
    expect((await checkEndpointUrl('http://127.0.0.1:4000/webhooks', endpointPolicy(config('development', true), 'sandbox'))).port).to.equal('4000');
    // A delivery's record states the refusal, without the hint.
    expect(await sendWebhook({ url: 'http://127.0.0.1:1/', headers: {}, body: '{}', timeoutMs: 1000, policy: dev })).to.include({ statusCode: null, error: 'refused: url must use https' });
  });

  it('refuses names that resolve to loopback in live, and allows them (over http too) with loopback allowed', async () => {
    expect((await refusal('https://localhost/')).message).to.match(/resolves to a loopback address/);
    expect((await refusal('https://localhost:8443/hooks', SANDBOX)).message).to.match(/resolves to a loopback address/);
    expect((await refusal('http://localhost:3000/')).message).to.match(/must use https/);
    const liveClaimingLoopback: EndpointPolicy = { environment: 'live', allowLoopback: true };
    expect((await refusal('https://localhost/', liveClaimingLoopback)).message).to.match(/resolves to a loopback address/);
    expect((await refusal('http://93.184.215.14/', liveClaimingLoopback)).message).to.match(/must use https/);
    expect((await checkEndpointUrl('http://localhost:3000/hooks', LOCAL)).host).to.equal('localhost:3000');
    expect((await checkEndpointUrl('https://localhost/', LOCAL)).hostname).to.equal('localhost');
    expect((await checkEndpointUrl('http://127.0.0.1:3000/', LOCAL)).port).to.equal('3000');
    expect((await checkEndpointUrl('http://[::1]/', LOCAL)).hostname).to.equal('[::1]');
  });

  it('refuses a name that does not resolve', async () => {
    expect((await refusal('https://no-such-endpoint.invalid/hooks')).message).to.match(/does not resolve/);
  });
});

describe('webhook delivery over HTTP', () => {
  const servers: { close: () => Promise<void> }[] = [];
  const track = <T extends { close: () => Promise<void> }>(s: T) => (servers.push(s), s);
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('POSTs the exact body and headers and returns the status and latency', async () => {
    const server = track(await serve((_req, res) => setTimeout(() => res.writeHead(200).end('ok'), 40)));
    const body = JSON.stringify({ type: 'transaction.completed', data: { note: 'naïve €' } });
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': '1700000000', 'webhook-signature': 'v1,abc=' };
    const result = await send(`${server.url}/hooks?tenant=7`, { headers, body });
    expect(result).to.include({ statusCode: 200, error: null, retryAfterSeconds: null });
    expect(result.latencyMs).to.be.at.least(40).and.below(5_000);
    expect(server.received).to.have.length(1);
    const [got] = server.received;
    expect(got).to.include({ method: 'POST', url: '/hooks?tenant=7', body });
    expect(got.headers).to.include({ ...headers, 'content-type': 'application/json', 'user-agent': 'Rampway-Webhooks/1', 'content-length': String(Buffer.byteLength(body)) });
    expect(got.headers.connection).to.equal('close');
  });

  it('returns a 500 as a 500', async () => {
    const server = track(await serve((_req, res) => res.writeHead(500).end('boom')));
    expect(await send(server.url)).to.include({ statusCode: 500, error: null, retryAfterSeconds: null });
  });

  it('does not follow redirects', async () => {
    const target = track(await serve((_req, res) => res.writeHead(200).end()));
    const moved = track(await serve((_req, res) => res.writeHead(301, { location: `${target.url}/elsewhere` }).end()));
    const relative = track(await serve((_req, res) => res.writeHead(307, { location: '/again' }).end()));
    const bare = track(await serve((_req, res) => res.writeHead(302).end()));
    expect(await send(moved.url)).to.include({ statusCode: 301, error: `redirect not followed (301 to 127.0.0.1:${target.port})` });
    expect(await send(relative.url)).to.include({ statusCode: 307, error: `redirect not followed (307 to 127.0.0.1:${relative.port})` });
    expect(await send(bare.url)).to.include({ statusCode: 302, error: 'redirect not followed (302 to elsewhere)' });
    expect(target.received).to.have.length(0);
    expect(relative.received).to.have.length(1);
  });

  it('gives up on a server that never answers', async () => {
    const server = track(await serve(() => {}));
    const result = await send(server.url, { timeoutMs: 300 });
    expect(result).to.include({ statusCode: null, error: 'timed out after 300 ms' });
    expect(result.latencyMs).to.be.at.least(290).and.below(2_000);
    expect(server.received).to.have.length(1);
  });

  it('keeps the status of an endpoint that answered but dawdles over its body', async () => {
    const server = track(await serve((_req, res) => res.writeHead(202).write('partial')));
    const result = await send(server.url, { timeoutMs: 300 });
    expect(result).to.include({ statusCode: 202, error: null });
    expect(result.latencyMs).to.be.at.least(290).and.below(2_000);
  });

  it('stops reading a huge response body and closes the connection', async () => {
    let closed = false;
    const server = track(await serve((_req, res) => {
      res.on('close', () => (closed = true));
      res.writeHead(200);
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    }));
    const result = await send(server.url, { timeoutMs: 10_000 });
    expect(result).to.include({ statusCode: 200, error: null });
    expect(result.latencyMs).to.be.below(5_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).to.equal(true);
  });

  it('reads Retry-After on 429 and 503, as seconds or an HTTP-date, capped at a day', async () => {
    const answers = [
      [429, '120'], [503, new Date(Date.now() + 90_000).toUTCString()], [429, '999999'], [500, '5'], [429, 'soon'], [503, undefined],
    ] as const;
    const results = [];
    for (const [status, retryAfter] of answers) {
      const server = track(await serve((_req, res) => res.writeHead(status, retryAfter ? { 'retry-after': retryAfter } : {}).end()));
      results.push(await send(server.url));
    }
    expect(results.map((r) => r.statusCode)).to.deep.equal([429, 503, 429, 500, 429, 503]);
    expect(results[0].retryAfterSeconds).to.equal(120);
    expect(results[1].retryAfterSeconds).to.be.within(85, 90);
    expect(results.slice(2).map((r) => r.retryAfterSeconds)).to.deep.equal([86_400, null, null, null]);
    expect(parseRetryAfter(new Date(Date.now() - 60_000).toUTCString())).to.equal(0);
  });

  it('reports a refused connection by its code', async () => {
    const gone = await serve(() => {});
    await gone.close();
    expect(await send(gone.url)).to.include({ statusCode: null, error: 'ECONNREFUSED', retryAfterSeconds: null });
  });

  it('in live, refuses loopback literals without connecting', async () => {
    const tcp = track(await listenTcp());
    const server = track(await serve((_req, res) => res.writeHead(200).end()));
    const literal = await send(`https://127.0.0.1:${tcp.port}/`, { policy: LIVE });
    expect(literal).to.include({ statusCode: null, error: 'refused: host is a loopback address', retryAfterSeconds: null });
    expect(await send(`https://[::ffff:7f00:1]:${tcp.port}/`, { policy: LIVE })).to.include({ error: 'refused: host is a loopback address' });
    expect(await send(`${server.url}/`, { policy: LIVE })).to.include({ statusCode: null, error: 'refused: url must use https' });
    await new Promise((r) => setTimeout(r, 50));
    expect(tcp.connections()).to.equal(0);
    expect(server.received).to.have.length(0);
  });

  it('refuses at send time a name that resolves to loopback, though no registration check ran (DNS rebinding)', async () => {
    const tcp = track(await listenTcp());
    const result = await send(`https://localhost:${tcp.port}/hooks`, { policy: LIVE });
    expect(result).to.include({ statusCode: null, error: 'refused: host resolves to a loopback address' });
    await new Promise((r) => setTimeout(r, 50));
    expect(tcp.connections()).to.equal(0);
  });

  it('delivers to loopback names when allowed, and never to private or metadata addresses', async () => {
    const server = track(await serve((_req, res) => res.writeHead(204).end()));
    expect(await send(`http://localhost:${server.port}/`)).to.include({ statusCode: 204, error: null });
    expect(server.received).to.have.length(1);
    // Refused before any connection: were they tried, these would time out instead.
    expect(await send('http://169.254.169.254/latest/meta-data/', { timeoutMs: 300 })).to.include({ error: 'refused: host is a link-local address' });
    expect(await send('https://[::ffff:10.0.0.1]/', { timeoutMs: 300 })).to.include({ error: 'refused: host is a private address' });
    expect(await send('https://[64:ff9b::a9fe:a9fe]/', { timeoutMs: 300 })).to.include({ error: 'refused: host is a link-local address' });
  });

  it('returns a result, not an exception, for an unusable URL', async () => {
    expect(await send('nonsense')).to.include({ statusCode: null, error: 'refused: url must be an absolute URL' });
    expect(await send('https://u:p@93.184.215.14/')).to.include({ error: 'refused: url must not contain a username or password' });
  });
});
