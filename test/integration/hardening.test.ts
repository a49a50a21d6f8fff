import { expect } from 'chai';
import { createHash, randomUUID } from 'node:crypto';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, makeKey, writeHeaders } from '../helpers/factories.js';
import { testDatabaseUrl } from '../env.js';
import { createDataSource } from '../../shared/db/data-source.js';
import { fingerprint } from '../../api/middleware/idempotency-store.js';
import { encodeCursor } from '../../shared/db/pagination.js';

// Inputs that once reached PostgreSQL or the stack raw and came back as 500s; each must be a clean 4xx or 503.
describe('hardening: hostile and unlucky inputs', () => {
  let api: ApiHarness;
  let key: string;
  before(async () => {
    api = await startApi();
    key = (await makeBusiness()).sandboxKey;
  });
  after(() => api.close());

  function clean4xx(res: { status: number; body: any }, status = 400, code = 'invalid_request'): void {
    expect(res.status, JSON.stringify(res.body)).to.equal(status);
    expect(res.body.error.code).to.equal(code);
  }

  it('urn:uuid ids are refused by the schema, not by PostgreSQL', async () => {
    clean4xx(await api.http.get('/api/v1/business/customers/urn:uuid:00000000-0000-4000-8000-000000000000').set(bearer(key)));
    clean4xx(await api.http.post('/api/v1/business/wallets').set(writeHeaders(key)).send({
      address: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8', chain: 'base', customer_id: 'urn:uuid:00000000-0000-4000-8000-000000000000',
    }));
  });

  it('NUL characters in bodies and queries are 400', async () => {
    clean4xx(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'a\u0000b' }));
    clean4xx(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'x', metadata: { k: 'v\u0000' } }));
    clean4xx(await api.http.get('/api/v1/business/customers?external_reference=%00').set(bearer(key)));
  });

  it('unpaired UTF-16 surrogates and bytes that are not UTF-8 are 400, never stored altered', async () => {
    const raw = (json: string) => api.http.post('/api/v1/business/customers').set(writeHeaders(key)).set('Content-Type', 'application/json').send(json);
    // Each once reached PostgreSQL: jsonb refused the first (500), text stored U+FFFD for the others, merging references.
    for (const json of ['{"external_reference":"m","metadata":{"k":"\\ud800"}}', '{"external_reference":"lone\\udc00"}', '{"external_reference":"x","metadata":{"\\ud83d":"v"}}']) {
      const res = await raw(json);
      clean4xx(res);
      expect(res.body.error.message, json).to.match(/surrogate/);
    }
    // A paired surrogate (an emoji) is ordinary text.
    const emoji = `emoji-${randomUUID()}-\ud83d\ude00`;
    const ok = await raw(`{"external_reference":"${emoji}"}`);
    expect(ok.status, ok.text).to.equal(201);
    expect(ok.body.external_reference).to.equal(JSON.parse(`"${emoji}"`));
    // Latin-1 "café": raw bytes, over a real socket (supertest would re-encode a Buffer as JSON).
    const server = api.app.listen(0);
    try {
      const { port } = server.address() as net.AddressInfo;
      const latin1 = Buffer.concat([Buffer.from('{"external_reference":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/business/customers`, {
        method: 'POST', headers: { ...writeHeaders(key), 'Content-Type': 'application/json' }, body: latin1,
      });
      const body = await res.json();
      clean4xx({ status: res.status, body });
      expect(body.error.message).to.match(/UTF-8/);
    } finally {
      server.close();
    }
  });

  it('JSON nested beyond any real request is 400, not a stack overflow', async () => {
    const deep = '['.repeat(8000) + ']'.repeat(8000);
    const res = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).set('Content-Type', 'application/json')
      .send(`{"external_reference":"x","metadata":${deep}}`);
    clean4xx(res);
    expect(res.body.error.message).to.match(/nests deeper/);
  });

  it('an IPv6 zone id in X-Forwarded-For is no address, not a 500', async () => {
    const trusted = await startApi({ env: { TRUST_PROXY: '1' } });
    try {
      const biz = await makeBusiness();
      const allowlisted = await makeKey(biz.businessId, { allowedIps: ['fe80::1'] });
      clean4xx(await trusted.http.get('/api/v1/business/account').set(bearer(allowlisted.key)).set('X-Forwarded-For', 'fe80::1%eth0'), 403, 'ip_not_allowed');
      clean4xx(await trusted.http.get('/api/v1/business/account').set('X-Forwarded-For', 'fe80::1%eth0'), 401, 'unauthorized');
    } finally {
      await trusted.close();
    }
  });

  it('malformed percent-encoding in the path is 400', async () => {
    clean4xx(await api.http.get('/api/v1/business/customers/%E0%A4%A').set(bearer(key)));
    clean4xx(await api.http.get('/api/v1/business/customers/%').set(bearer(key)));
  });

  it('cursors must be exactly what the API issued', async () => {
    const forged = [
      Buffer.from(JSON.stringify({ t: '1', i: randomUUID() })).toString('base64url'),
      Buffer.from(JSON.stringify({ t: '2026-01-01T00:00:00.000000Z', i: '-'.repeat(36) })).toString('base64url'),
      Buffer.from(JSON.stringify({ t: '2026-01-01 00:00:00+00', i: randomUUID() })).toString('base64url'),
      // The right shape, but no such instant: PostgreSQL would refuse them.
      ...['2026-13-45T25:61:61.000000Z', '2026-02-30T00:00:00.000000Z', '0000-01-01T00:00:00.000000Z'].map((t) =>
        Buffer.from(JSON.stringify({ t, i: randomUUID() })).toString('base64url')),
    ];
    for (const cursor of forged) clean4xx(await api.http.get(`/api/v1/business/customers?starting_after=${cursor}`).set(bearer(key)));
    const genuine = encodeCursor('2026-01-01T00:00:00.123456Z', randomUUID());
    expect((await api.http.get(`/api/v1/business/customers?starting_after=${genuine}`).set(bearer(key))).status).to.equal(200);
  });

  it('a key without the scope cannot replay another key\'s stored answer', async () => {
    const biz = await makeBusiness();
    const readOnly = await makeKey(biz.businessId, { scopes: ['beneficiaries:read'] });
    const idem = randomUUID();
    const body = { external_reference: `replay-scope-${idem}` };
    expect((await api.http.post('/api/v1/business/customers').set(writeHeaders(biz.sandboxKey, idem)).send(body)).status).to.equal(201);
    const res = await api.http.post('/api/v1/business/customers').set(writeHeaders(readOnly.key, idem)).send(body);
    clean4xx(res, 403, 'insufficient_scope');
    expect(res.headers['idempotent-replayed']).to.equal(undefined);
    expect(res.text).not.to.include(body.external_reference);
    expect(res.headers['x-ratelimit-limit']).to.equal('1000');
  });

  it('request fingerprints are keyed: a stored fingerprint is not a plain digest of the body', () => {
    const body = { details: { phone_number: '+254733918277' } };
    const a = fingerprint(Buffer.from('secret-a'), 'POST', '/x', body);
    const b = fingerprint(Buffer.from('secret-b'), 'POST', '/x', body);
    expect(a).not.to.equal(b);
    const plain = createHash('sha256').update(`POST /x\n${JSON.stringify(body)}`).digest('base64url');
    expect([a, b]).not.to.include(plain);
  });

  it('PostgreSQL going away mid-flight answers 503 with Retry-After, never 500', async () => {
    // A TCP proxy in front of PostgreSQL that the test can cut.
    const target = new URL(testDatabaseUrl());
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const viaProxy = new URL(testDatabaseUrl());
    viaProxy.port = String((proxy.address() as net.AddressInfo).port);
    const ds = createDataSource({ url: viaProxy.toString(), poolSize: 2 });
    await ds.initialize();
    const realDs = api.deps.ds;
    try {
      expect((await api.http.get('/api/v1/business/customers').set(bearer(key))).status).to.equal(200); // key cached
      api.deps.ds = ds;
      proxy.close();
      for (const s of sockets) s.destroy();
      const res = await api.http.get('/api/v1/business/customers').set(bearer(key));
      clean4xx(res, 503, 'service_unavailable');
      expect(Number(res.headers['retry-after'])).to.be.at.least(1);
    } finally {
      api.deps.ds = realDs;
      await ds.destroy().catch(() => undefined);
    }
  });
});

describe('hardening: WEBHOOKS_ALLOW_LOOPBACK in production', () => {
  /** Runs a process as the Procfile does; resolves with its exit code and what it wrote to stderr. */
  function run(script: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr })));
  }

  it('the web process and the workers refuse to boot, saying why', async function () {
    this.timeout(60_000);
    const env = { NODE_ENV: 'production', WEBHOOKS_ALLOW_LOOPBACK: 'true' };
    const [web, workers] = await Promise.all([run('api/main.ts', [], env), run('workers/main.ts', ['all'], env)]);
    for (const [name, exit] of [['web', web], ['workers', workers]] as const) {
      expect(exit.code, `${name}: ${exit.stderr}`).to.equal(1);
      expect(exit.stderr, name).to.match(/ConfigError: WEBHOOKS_ALLOW_LOOPBACK=true .* NODE_ENV=production refuses it/);
    }
  });
});
