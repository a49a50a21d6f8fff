import { expect } from 'chai';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { httpServer } from '../../api/http-server.js';

// What the first fuzz of the OpenAPI document found; each case failed before its fix.
describe('fuzz findings: query numbers, the envelope, Expect, declared statuses', () => {
  let api: ApiHarness;
  let key: string;
  before(async () => {
    api = await startApi();
    key = (await makeBusiness()).sandboxKey;
  });
  after(() => api.close());

  function envelope(res: { status: number; body: any; headers: Record<string, string> }, status: number, code: string): void {
    expect(res.status, JSON.stringify(res.body)).to.equal(status);
    expect(Object.keys(res.body)).to.deep.equal(['error']);
    expect(Object.keys(res.body.error).sort()).to.deep.equal(['code', 'details', 'message', 'requestId']);
    expect(res.body.error.code).to.equal(code);
    expect(res.body.error.requestId).to.equal(res.headers['x-request-id']);
  }

  it('a limit that is not a plain integer (Infinity, 1e309, 0x10, 1e2, " 5") is 400 on every list, never 500', async () => {
    for (const list of ['customers', 'wallets', 'beneficiaries']) {
      for (const limit of ['Infinity', '-Infinity', '1e309', '0x10', '1e2', ' 5', '25.0', '']) {
        const res = await api.http.get(`/api/v1/business/${list}?limit=${encodeURIComponent(limit)}`).set(bearer(key));
        envelope(res, 400, 'invalid_request');
        expect(res.body.error.details[0]).to.include({ path: 'limit', in: 'query' });
      }
      expect((await api.http.get(`/api/v1/business/${list}?limit=100`).set(bearer(key))).status).to.equal(200);
    }
  });

  it('booleans in the query are true or false, nothing else', async () => {
    expect((await api.http.get('/api/v1/business/beneficiaries?include_archived=true').set(bearer(key))).status).to.equal(200);
    for (const bad of ['1', 'yes', 'TRUE', '']) {
      envelope(await api.http.get(`/api/v1/business/beneficiaries?include_archived=${bad}`).set(bearer(key)), 400, 'invalid_request');
    }
  });

  it('errors raised before schema validation carry details: null', async () => {
    envelope(await api.http.get('/api/v1/business/nothing-here').set(bearer(key)), 404, 'not_found');
    envelope(await api.http.get(`/api/v1/business/customers/${crypto.randomUUID()}`).set(bearer(key)), 404, 'not_found');
    envelope(await api.http.post('/api/v1/business/customers').set(bearer(key)).send({ external_reference: 'x' }), 400, 'idempotency_key_required');
    envelope(await api.http.post('/api/v1/business/customers').set(bearer(key)).set('Idempotency-Key', 'short').send({}), 400, 'invalid_idempotency_key');
    envelope(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).set('Content-Type', 'application/json').send('{"a":'), 400, 'invalid_request');
    const big = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'A'.repeat(1_100_000) });
    envelope(big, 413, 'payload_too_large');
    for (const res of [big, await api.http.get('/api/v1/business/account')]) expect(res.body.error.details).to.equal(null);
  });

  it('an Expect other than 100-continue is answered in the envelope with X-Request-Id, not a bare 417', async () => {
    const server = httpServer(api.app, api.deps.log);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const answer = await new Promise<{ status: number; headers: Record<string, any>; body: string }>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/api/v1/business/customers', headers: { ...bearer(key), Expect: 'nonsense' } }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        });
        req.on('error', reject);
        req.end();
      });
      expect(answer.headers['content-type']).to.match(/^application\/json/);
      envelope({ ...answer, body: JSON.parse(answer.body) }, 400, 'invalid_request');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('the document lists 413 on every write, with or without a body, and requires every envelope key', async () => {
    const doc = (await api.http.get('/openapi.json')).body;
    const writes = Object.values(doc.paths as Record<string, Record<string, any>>).flatMap((item) =>
      Object.entries(item).filter(([method]) => method !== 'get').map(([, op]) => op),
    );
    expect(writes.map((op) => op.operationId)).to.include.members(['archiveWallet', 'archiveBeneficiary', 'createWalletVerificationChallenge']);
    for (const op of writes) expect(Object.keys(op.responses), op.operationId).to.include('413');
    expect(doc.components.schemas.Error.required).to.have.members(['code', 'message', 'requestId', 'details']);
  });
});
