import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { BASE } from '../helpers/wallets.js';
import { verifiedWallet } from '../helpers/ramps.js';
import { startPools, type RunningPools } from '../helpers/workers.js';
import { getDs } from '../helpers/shared.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import type { EventType } from '../../shared/domain/machines.js';
import { deliverMessage, DeliveryBusy, EndpointSlots } from '../../shared/webhooks/delivery.js';
import { createWorkerRedis } from '../../shared/queues/connections.js';
import { until } from '../helpers/until.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

type Answer = { status: number; headers?: Record<string, string> } | 'hang';

/** A real receiver: records every request and answers as `answer` says (default 204). */
class Receiver {
  readonly received: Received[] = [];
  answer: (n: number, r: Received) => Answer = () => ({ status: 204 });
  private readonly hanging: ServerResponse[] = [];
  private server!: Server;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const r = { headers: req.headers, body };
        this.received.push(r);
        const answer = this.answer(this.received.length, r);
        if (answer === 'hang') return void this.hanging.push(res);
        res.writeHead(answer.status, answer.headers).end();
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
    return this;
  }

  async until(count: number, ms = 10_000): Promise<Received[]> {
    return until(() => this.received.length >= count && this.received, { timeoutMs: ms, everyMs: 10, what: `${count} deliveries`, describe: () => `got ${this.received.length}` });
  }

  close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const WEBHOOK_ENV = {
  WEBHOOKS_ALLOW_LOOPBACK: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '100,150,200', WEBHOOK_TIMEOUT_MS: '1500', WEBHOOK_ENDPOINT_CONCURRENCY: '2',
};

describe('events and signed webhooks', function () {
  this.timeout(60_000);
  let api: ApiHarness;
  let pools: RunningPools;
  let key: string;
  let businessId: string;
  const receivers: Receiver[] = [];

  before(async () => {
    api = await startApi({ env: WEBHOOK_ENV });
    pools = await startPools(['webhooks'], { env: WEBHOOK_ENV });
  });
  after(async () => {
    await pools?.close();
    await api?.close();
  });
  beforeEach(async () => {
    const biz = await makeBusiness();
    [key, businessId] = [biz.sandboxKey, biz.businessId];
  });
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  const receiver = async () => {
    const r = await new Receiver().start();
    receivers.push(r);
    return r;
  };
  const register = async (url: string, body: Record<string, unknown> = {}, k = key) => {
    const res = await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(k)).send({ url, ...body });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body as { id: string; secret: string } & Record<string, any>;
  };
  /** An event written as every state change writes it: through a unit of work. */
  const emit = (type: EventType = 'quote.available', data: Record<string, unknown> = { id: randomUUID() }) =>
    inUnit(api.deps, async (unit) => unit.event({ businessId, environment: 'sandbox' }, type, data));
  const deliveries = async (endpointId: string) => (await api.http.get(`${BASE}/webhook-endpoints/${endpointId}/deliveries`).set(bearer(key))).body.data as Record<string, any>[];
  const endpoint = async (id: string) => (await api.http.get(`${BASE}/webhook-endpoints/${id}`).set(bearer(key))).body;
  async function eventually<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
    let last: T | undefined;
    return until(async () => {
      last = await read();
      return ok(last) && { last };
    }, { timeoutMs: ms, describe: () => last }).then((r) => r.last);
  }

  it('delivers a state change signed per Standard Webhooks: the body is the event as GET /events/{id} shows it', async () => {
    const r = await receiver();
    const ep = await register(r.url, { events: ['wallet.*'], description: 'wallets' });
    expect(ep.secret).to.match(/^whsec_/);
    expect(ep).to.deep.include({ status: 'enabled', events: ['wallet.*'], description: 'wallets' });
    const wallet = await verifiedWallet(api, key);
    const [got] = await r.until(1);
    const verified = new Webhook(ep.secret).verify(got.body, got.headers as Record<string, string>) as Record<string, any>;
    expect(verified.type).to.equal('wallet.verified');
    expect(verified.data.id).to.equal(wallet.id);
    const event = (await api.http.get(`${BASE}/events/${verified.id}`).set(bearer(key))).body;
    expect(JSON.parse(got.body)).to.deep.equal(event);
    expect(got.headers['webhook-id']).to.equal(event.id);
    expect(got.headers['content-type']).to.match(/application\/json/);
    // Tampering breaks the signature.
    expect(() => new Webhook(ep.secret).verify(got.body.replace('wallet.verified', 'wallet.verifiee'), got.headers as Record<string, string>)).to.throw();
    const [attempt] = await eventually(() => deliveries(ep.id), (d) => d.length === 1);
    expect(attempt).to.deep.include({ event_id: event.id, event_type: 'wallet.verified', attempt: 1, status_code: 204, error: null, next_retry_at: null });
    // The secret is shown once.
    expect((await endpoint(ep.id)).secret).to.equal(undefined);
  });

  it('one resource\'s events carry a sequence and a microsecond created_at in the order its changes happened, even when the unit that began first waited', async () => {
    const id = randomUUID();
    const scope = { businessId, environment: 'sandbox' as const };
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    let release!: () => void;
    const firstHasLock = new Promise<void>((resolve) => (release = resolve));
    // B begins first, then waits for the lock A holds on the resource's row: B's change happens after A's.
    const b = inUnit(api.deps, async (unit) => {
      await unit.em.query('SELECT now()');
      await firstHasLock;
      await unit.em.query('SELECT id FROM businesses WHERE id = $1 FOR UPDATE', [businessId]);
      unit.event(scope, 'transaction.completed', { id });
    });
    await pause(50);
    await inUnit(api.deps, async (unit) => {
      await unit.em.query('SELECT id FROM businesses WHERE id = $1 FOR UPDATE', [businessId]);
      release();
      await pause(200);
      unit.event(scope, 'transaction.processing', { id });
    });
    await b;
    const listed = (await api.http.get(`${BASE}/events?type=transaction.*&limit=100`).set(bearer(key))).body.data as Record<string, any>[];
    const mine = listed.filter((e) => e.data.id === id);
    expect(mine.map((e) => e.type)).to.deep.equal(['transaction.completed', 'transaction.processing']);
    expect(mine[0].sequence).to.be.a('number').greaterThan(mine[1].sequence);
    expect(mine[0].created_at > mine[1].created_at).to.equal(true);
    for (const e of mine) expect(e.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect((await api.http.get(`${BASE}/events/${mine[1].id}`).set(bearer(key))).body).to.deep.equal(mine[1]);
  });

  it('a test event goes to that endpoint alone, signed, recorded in its deliveries, and never listed by GET /events', async () => {
    const target = await receiver();
    const other = await receiver();
    const ep = await register(target.url, { events: ['transaction.*'] });
    await register(other.url); // every type
    const sent = await api.http.post(`${BASE}/webhook-endpoints/${ep.id}/test`).set(writeHeaders(key)).send();
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const [got] = await target.until(1);
    const verified = new Webhook(ep.secret).verify(got.body, got.headers as Record<string, string>) as Record<string, any>;
    expect(verified).to.deep.include({ id: sent.body.event_id, type: 'webhook.test', data: { webhook_endpoint_id: ep.id } });
    expect(got.headers['webhook-id']).to.equal(sent.body.event_id);
    const [attempt] = await eventually(() => deliveries(ep.id), (d) => d.length === 1);
    expect(attempt).to.deep.include({ event_id: sent.body.event_id, event_type: 'webhook.test', status_code: 204 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(other.received.filter((r) => JSON.parse(r.body).type === 'webhook.test')).to.deep.equal([]);
    const listed = (await api.http.get(`${BASE}/events?limit=100`).set(bearer(key))).body.data as Record<string, any>[];
    expect(listed.map((e) => e.id)).to.not.include(sent.body.event_id);
    // Another business's endpoint is not found.
    const stranger = (await makeBusiness()).sandboxKey;
    expect((await api.http.post(`${BASE}/webhook-endpoints/${ep.id}/test`).set(writeHeaders(stranger)).send()).status).to.equal(404);
  });

  it('sends only the types an endpoint asked for; every type when it named none', async () => {
    const [picky, all] = [await receiver(), await receiver()];
    await register(picky.url, { events: ['payment_intent.completed', 'transaction.*'] });
    await register(all.url);
    await emit('quote.available');
    await emit('transaction.completed');
    await emit('payment_intent.awaiting_payment');
    await emit('payment_intent.completed');
    await all.until(4);
    await picky.until(2);
    await new Promise((r) => setTimeout(r, 200));
    expect(picky.received.map((x) => JSON.parse(x.body).type).sort()).to.deep.equal(['payment_intent.completed', 'transaction.completed']);
    expect(all.received).to.have.length(4);
  });

  it('retries failures on the schedule with the same webhook-id, and records every attempt', async () => {
    const r = await receiver();
    r.answer = (n) => ({ status: n < 3 ? 500 : 200 });
    const ep = await register(r.url);
    await emit();
    const got = await r.until(3);
    expect(new Set(got.map((g) => g.headers['webhook-id'])).size).to.equal(1);
    const attempts = await eventually(() => deliveries(ep.id), (d) => d.length === 3);
    expect(attempts.map((a) => [a.attempt, a.status_code])).to.deep.equal([[3, 200], [2, 500], [1, 500]]);
    expect(attempts[1].next_retry_at).to.be.a('string');
    expect(attempts[0].next_retry_at).to.equal(null);
    expect((await endpoint(ep.id)).status).to.equal('enabled');
  });

  it('honours Retry-After when it asks for longer than the schedule', async () => {
    const r = await receiver();
    const at: number[] = [];
    r.answer = (n) => {
      at.push(Date.now());
      return n === 1 ? { status: 503, headers: { 'Retry-After': '1' } } : { status: 200 };
    };
    await register(r.url);
    await emit();
    await r.until(2);
    expect(at[1] - at[0], 'waited the second Retry-After asked for, not the 100 ms schedule').to.be.at.least(950);
  });

  it('a schedule run out marks the endpoint failing; its next success enables it again', async () => {
    const r = await receiver();
    let healthy = false;
    r.answer = () => ({ status: healthy ? 200 : 502 });
    const ep = await register(r.url);
    await emit();
    const failing = await eventually(() => endpoint(ep.id), (e) => e.status === 'failing');
    expect(failing.failing_since).to.be.a('string');
    expect(r.received).to.have.length(4); // the first attempt and three retries
    healthy = true;
    await emit();
    const back = await eventually(() => endpoint(ep.id), (e) => e.status === 'enabled');
    expect(back.failing_since).to.equal(null);
  });

  it('410 Gone disables the endpoint: nothing more is sent to it', async () => {
    const r = await receiver();
    r.answer = () => ({ status: 410 });
    const ep = await register(r.url);
    await emit();
    const disabled = await eventually(() => endpoint(ep.id), (e) => e.status === 'disabled');
    expect(disabled.disabled_reason).to.match(/410/);
    // Both moves went through the one transition function: each left its history row.
    const history = await (await getDs()).query(
      `SELECT resource_type, from_status, to_status, reason FROM status_history WHERE resource_id = $1 OR resource_id IN (SELECT id FROM webhook_messages WHERE endpoint_id = $1) ORDER BY id`,
      [ep.id],
    );
    expect(history).to.deep.equal([
      { resource_type: 'webhook_message', from_status: 'pending', to_status: 'failed', reason: 'gone' },
      { resource_type: 'webhook_endpoint', from_status: 'enabled', to_status: 'disabled', reason: 'gone' },
    ]);
    await emit();
    await new Promise((res) => setTimeout(res, 400));
    expect(r.received).to.have.length(1);
  });

  it('never follows a redirect', async () => {
    const [r, elsewhere] = [await receiver(), await receiver()];
    r.answer = () => ({ status: 302, headers: { Location: elsewhere.url } });
    const ep = await register(r.url);
    await emit();
    const [first] = await eventually(() => deliveries(ep.id), (d) => d.length >= 1);
    expect(first.status_code).to.equal(302);
    expect(first.error).to.match(/redirect/);
    expect(elsewhere.received).to.have.length(0);
  });

  it('a dead endpoint does not delay a healthy one', async () => {
    const [dead, healthy] = [await receiver(), await receiver()];
    dead.answer = () => 'hang';
    await register(dead.url);
    await register(healthy.url);
    const started = Date.now();
    for (let i = 0; i < 20; i++) await emit();
    await healthy.until(20, 5000);
    // Every event reached the healthy endpoint well within one timeout of the dead one (1.5 s).
    expect(Date.now() - started).to.be.lessThan(1500);
    // The dead one holds at most its share of the pool.
    expect(dead.received.length).to.be.at.most(2);
  });

  it('redelivers an event on request, with the same webhook-id', async () => {
    const r = await receiver();
    const ep = await register(r.url);
    await emit();
    const [first] = await r.until(1);
    const eventId = first.headers['webhook-id'] as string;
    const res = await api.http.post(`${BASE}/events/${eventId}/redeliver`).set(writeHeaders(key)).send({});
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body).to.deep.equal({ event_id: eventId, endpoint_ids: [ep.id] });
    const got = await r.until(2);
    expect(got[1].headers['webhook-id']).to.equal(eventId);
    expect(got[1].body).to.equal(first.body);
    expect((await api.http.post(`${BASE}/events/${randomUUID()}/redeliver`).set(writeHeaders(key)).send({})).status).to.equal(404);
  });

  it('rotation: the new secret is shown once, and for 24 h deliveries carry both signatures', async () => {
    const r = await receiver();
    const ep = await register(r.url);
    const rotated = await api.http.post(`${BASE}/webhook-endpoints/${ep.id}/rotate-secret`).set(writeHeaders(key));
    expect(rotated.status).to.equal(200);
    expect(rotated.body.secret).to.match(/^whsec_/).and.not.equal(ep.secret);
    await emit();
    const [got] = await r.until(1);
    const first = (got.headers['webhook-signature'] as string).split(' ');
    expect(first).to.have.length(2);
    for (const secret of [ep.secret, rotated.body.secret]) expect(() => new Webhook(secret).verify(got.body, got.headers as Record<string, string>)).to.not.throw();
    // Newest first: the new secret's signature leads, the rotated-out one follows until it expires.
    const at = new Date(Number(got.headers['webhook-timestamp']) * 1000);
    const id = got.headers['webhook-id'] as string;
    expect(first).to.deep.equal([rotated.body.secret, ep.secret].map((secret) => new Webhook(secret).sign(id, at, got.body)));
    expect(Date.parse(rotated.body.updated_at)).to.be.greaterThan(Date.parse(ep.updated_at));
    // A replay of the rotation (same Idempotency-Key) does not show the secret again: it was never stored outside the database.
    const headers = writeHeaders(key);
    const third = await api.http.post(`${BASE}/webhook-endpoints/${ep.id}/rotate-secret`).set(headers);
    const replay = await api.http.post(`${BASE}/webhook-endpoints/${ep.id}/rotate-secret`).set(headers);
    expect(third.body.secret).to.match(/^whsec_/);
    expect(replay.headers['idempotent-replayed']).to.equal('true');
    expect(replay.body.secret).to.equal(undefined);
    // Rotated twice: only the newest and the one it replaced sign.
    await emit();
    const [, second] = await r.until(2);
    const signatures = (second.headers['webhook-signature'] as string).split(' ');
    expect(signatures).to.have.length(2);
    expect(() => new Webhook(third.body.secret).verify(second.body, second.headers as Record<string, string>)).to.not.throw();
    expect(() => new Webhook(ep.secret).verify(second.body, second.headers as Record<string, string>)).to.throw();
    const live = await (await getDs()).query(`SELECT expires_at FROM webhook_secrets WHERE endpoint_id = $1 AND expires_at > now()`, [ep.id]);
    expect(live).to.have.length(1);
    expect(new Date(live[0].expires_at).getTime() - Date.now()).to.be.closeTo(24 * 3600_000, 60_000);
  });

  it('checks the address it connects to at delivery: an endpoint that now resolves to loopback is refused (live rules)', async () => {
    const r = await receiver();
    // It takes no quote events, so no pool job races the direct delivery below.
    const ep = await register(r.url, { events: ['transaction.*'] });
    await emit('quote.available');
    const ds = await getDs();
    const [event] = await ds.query(`SELECT id FROM events WHERE business_id = $1 AND type = 'quote.available'`, [businessId]);
    const [message] = await ds.query(`INSERT INTO webhook_messages (event_id, endpoint_id, business_id, environment) VALUES ($1, $2, $3, 'sandbox') RETURNING id`, [event.id, ep.id, businessId]);
    const redis = createWorkerRedis(pools.deps.config.redisUrl);
    try {
      // Registered while loopback was allowed; delivered by a worker that does not allow it.
      const strict = { ...pools.deps.config, webhooks: { ...pools.deps.config.webhooks, allowLoopback: false } };
      await deliverMessage({ ...pools.deps, redis, config: strict }, { messageId: message.id, round: 0, attempt: 1 });
      expect(r.received).to.have.length(0);
      const [attempt] = await ds.query(`SELECT status_code, error FROM webhook_deliveries WHERE message_id = $1`, [message.id]);
      expect(attempt.status_code).to.equal(null);
      expect(attempt.error).to.match(/^refused: /);
    } finally {
      redis.disconnect();
    }
  });

  it('a delivery whose endpoint has its share in flight steps aside before reading anything (its job names the endpoint)', async () => {
    const r = await receiver();
    const ep = await register(r.url, { events: ['quote.available'] });
    await emit('quote.available');
    const ds = await getDs();
    // The first delivery's job, as the unit of work staged it, names the endpoint.
    const [row] = await ds.query(`SELECT o.payload FROM outbox_jobs o JOIN webhook_messages m ON m.id = (o.payload->>'messageId')::uuid WHERE m.endpoint_id = $1`, [ep.id]);
    expect(row.payload.endpointId).to.equal(ep.id);
    // That delivery done (the pool's own slot given back) before the test holds the endpoint's slots.
    await until(async () => (await ds.query(`SELECT count(*)::int AS n FROM webhook_messages WHERE endpoint_id = $1 AND status = 'delivered'`, [ep.id]))[0].n === 1, { what: 'the delivery' });
    const redis = createWorkerRedis(pools.deps.config.redisUrl);
    const deps = { ...pools.deps, redis };
    const held = [];
    try {
      for (let i = 0; i < pools.deps.config.webhooks.endpointConcurrency; i++) held.push((await EndpointSlots.take(deps, ep.id, `held-${i}`))!);
      // A message that does not exist: had it been read first, the answer would be `moved on (gone)`.
      const busy = await deliverMessage(deps, { messageId: randomUUID(), endpointId: ep.id, round: 0, attempt: 1 }).catch((err: unknown) => err);
      expect(busy).to.be.instanceOf(DeliveryBusy);
      await Promise.all(held.map((h) => h.release()));
      expect(await deliverMessage(deps, { messageId: randomUUID(), endpointId: ep.id, round: 0, attempt: 1 })).to.equal('moved on (gone)');
      // The slot it took to find that out is given back.
      expect(await redis.zcard(`${pools.deps.config.redisPrefix}:webhook-slots:${ep.id}`)).to.equal(0);
    } finally {
      redis.disconnect();
    }
  });

  it('manages endpoints: list, 16 at most, unknown types and unsafe URLs refused, delete', async () => {
    const r = await receiver();
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) ids.push((await register(r.url)).id);
    const seventeenth = await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(key)).send({ url: r.url });
    expect(seventeenth.status).to.equal(409);
    const list = (await api.http.get(`${BASE}/webhook-endpoints?limit=100`).set(bearer(key))).body;
    expect(list.data.map((e: { id: string }) => e.id)).to.deep.equal([...ids].reverse());
    expect(list.data.every((e: Record<string, unknown>) => e.secret === undefined)).to.equal(true);
    const removed = await api.http.delete(`${BASE}/webhook-endpoints/${ids[0]}`).set(writeHeaders(key));
    expect(removed.body.status).to.equal('deleted');
    // Creating with an Idempotency-Key twice: the replay is the endpoint without its secret.
    const once = writeHeaders(key);
    const made = await api.http.post(`${BASE}/webhook-endpoints`).set(once).send({ url: r.url });
    const again = await api.http.post(`${BASE}/webhook-endpoints`).set(once).send({ url: r.url });
    expect(made.body.secret).to.match(/^whsec_/);
    const { secret: _secret, ...withoutSecret } = made.body;
    expect(again.body).to.deep.equal(withoutSecret);
    await api.http.delete(`${BASE}/webhook-endpoints/${made.body.id}`).set(writeHeaders(key));
    expect((await api.http.get(`${BASE}/webhook-endpoints/${ids[0]}`).set(bearer(key))).status).to.equal(404);
    expect((await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(key)).send({ url: r.url })).status).to.equal(201);
    for (const body of [{ url: r.url, events: ['transaction.paid'] }, { url: 'ftp://example.com/x' }, { url: 'http://10.0.0.8/hook' }, { url: 'not a url' }]) {
      const res = await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(key)).send(body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_request');
    }
    // Live: https only, and never loopback, whatever WEBHOOKS_ALLOW_LOOPBACK says.
    const live = await makeBusiness();
    for (const url of [r.url, 'https://localhost/hook', 'https://127.0.0.1/hook', 'https://169.254.169.254/latest']) {
      const res = await api.http.post(`${BASE}/webhook-endpoints`).set(writeHeaders(live.liveKey)).send({ url });
      expect(res.status, url).to.equal(400);
    }
  });

  it('lists events newest first, by type or wildcard and time; one is readable by id, others\' are not', async () => {
    await emit('quote.available');
    await emit('transaction.created');
    await emit('transaction.completed');
    const all = (await api.http.get(`${BASE}/events`).set(bearer(key))).body.data;
    expect(all.map((e: { type: string }) => e.type)).to.have.members(['quote.available', 'transaction.created', 'transaction.completed']);
    const txs = (await api.http.get(`${BASE}/events?type=transaction.*`).set(bearer(key))).body.data;
    expect(txs.map((e: { type: string }) => e.type).sort()).to.deep.equal(['transaction.completed', 'transaction.created']);
    const exact = (await api.http.get(`${BASE}/events?type=quote.available`).set(bearer(key))).body.data;
    expect(exact).to.have.length(1);
    const future = (await api.http.get(`${BASE}/events?created_gte=${new Date(Date.now() + 60_000).toISOString()}`).set(bearer(key))).body.data;
    expect(future).to.deep.equal([]);
    const page = (await api.http.get(`${BASE}/events?limit=2`).set(bearer(key))).body;
    expect(page.has_more).to.equal(true);
    const rest = (await api.http.get(`${BASE}/events?limit=2&starting_after=${page.next_cursor}`).set(bearer(key))).body;
    expect([...page.data, ...rest.data].map((e: { id: string }) => e.id).sort()).to.deep.equal(all.map((e: { id: string }) => e.id).sort());
    expect((await api.http.get(`${BASE}/events/${all[0].id}`).set(bearer(key))).body).to.deep.equal(all[0]);
    const other = await makeBusiness();
    expect((await api.http.get(`${BASE}/events/${all[0].id}`).set(bearer(other.sandboxKey))).status).to.equal(404);
    expect((await api.http.get(`${BASE}/events?type=transaction.paid`).set(bearer(key))).status).to.equal(400);
    expect((await api.http.get(`${BASE}/events?type=*`).set(bearer(key))).body.data).to.have.length(3);
    // PostgreSQL has no year 0: refused as input, not a 500.
    expect((await api.http.get(`${BASE}/events?created_gte=0000-01-01T00:00:00Z`).set(bearer(key))).status).to.equal(400);
    // One unit's events keep the order they happened in.
    await inUnit(api.deps, async (unit) => {
      for (const type of ['transaction.created', 'transaction.awaiting_funds', 'transaction.funded'] as const) unit.event({ businessId, environment: 'sandbox' }, type, { id: 'ordered' });
    });
    const ordered = (await api.http.get(`${BASE}/events?limit=3`).set(bearer(key))).body.data.map((e: { type: string }) => e.type);
    expect(ordered).to.deep.equal(['transaction.funded', 'transaction.awaiting_funds', 'transaction.created']);
  });

  it('a webhooks worker killed mid-delivery: another delivers it again, with the same webhook-id', async () => {
    const r = await receiver();
    r.answer = (n) => (n === 1 ? 'hang' : { status: 200 });
    await register(r.url);
    // This test's deliveries go to worker processes only: the in-process pool stands aside.
    await pools.close();
    const spawnWorker = (): ChildProcess =>
      spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', 'webhooks'], { env: { ...process.env, ...WEBHOOK_ENV, WEBHOOK_TIMEOUT_MS: '20000', LOG_LEVEL: 'silent' }, stdio: 'ignore' });
    let worker = spawnWorker();
    try {
      await emit();
      const [first] = await r.until(1, 20_000);
      worker.kill('SIGKILL');
      await new Promise((res) => worker.once('exit', res));
      worker = spawnWorker();
      const got = await r.until(2, 20_000);
      expect(got[1].headers['webhook-id']).to.equal(first.headers['webhook-id']);
      expect(got[1].body).to.equal(first.body);
    } finally {
      worker.kill('SIGKILL');
      pools = await startPools(['webhooks'], { env: WEBHOOK_ENV });
    }
  });
});
