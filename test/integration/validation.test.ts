import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';

describe('request validation from the OpenAPI document', () => {
  let api: ApiHarness;
  let key: string;
  before(async () => {
    api = await startApi();
    key = (await makeBusiness()).sandboxKey;
  });
  after(() => api.close());

  function invalid(res: { status: number; body: any }, path: string, where = 'body'): void {
    expect(res.status, JSON.stringify(res.body)).to.equal(400);
    expect(res.body.error.code).to.equal('invalid_request');
    expect(res.body.error.details).to.be.an('array');
    expect(res.body.error.details.map((d: { path: string; in: string }) => `${d.in}:${d.path}`)).to.include(`${where}:${path}`);
  }

  it('rejects unknown fields (no mass assignment)', async () => {
    invalid(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'a', status: 'archived' }), 'status');
    invalid(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'a', id: '00000000-0000-4000-8000-000000000000' }), 'id');
  });

  it('rejects wrong types and missing required fields', async () => {
    invalid(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 42 }), 'external_reference');
    invalid(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({}), 'external_reference');
    invalid(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send([{ external_reference: 'a' }]), '(body)');
    invalid(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'a', metadata: { k: 5 } }), 'metadata.k');
  });

  it('refuses a JSON number where an amount belongs, and amounts that are not decimal strings', async () => {
    const create = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: `amt-${Date.now()}` });
    const walletId = create.body.wallet.id;
    const fund = (amount: unknown) => api.http.post(`/api/v1/business/sandbox/wallets/${walletId}/fund`).set(writeHeaders(key)).send({ chain: 'base', amount });
    invalid(await fund(10), 'amount');
    invalid(await fund(10.5), 'amount');
    for (const bad of ['-1', '1e3', '01', '1.', ' 1', '0x10', '']) invalid(await fund(bad), 'amount');
    const ok = await fund('10.5');
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
  });

  it('validates query and path parameters, including unknown query parameters', async () => {
    invalid(await api.http.get('/api/v1/business/customers?limit=0').set(bearer(key)), 'limit', 'query');
    invalid(await api.http.get('/api/v1/business/customers?limit=101').set(bearer(key)), 'limit', 'query');
    invalid(await api.http.get('/api/v1/business/customers?limit=abc').set(bearer(key)), 'limit', 'query');
    invalid(await api.http.get('/api/v1/business/customers?colour=red').set(bearer(key)), 'colour', 'query');
    invalid(await api.http.get('/api/v1/business/customers?starting_after=bogus').set(bearer(key)), 'starting_after', 'query');
    invalid(await api.http.get('/api/v1/business/customers/not-a-uuid').set(bearer(key)), 'id', 'path');
  });

  it('a body on an operation that takes none, and a non-JSON content type, are refused', async () => {
    const create = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: `ct-${Date.now()}` });
    const challenge = await api.http.post(`/api/v1/business/wallets/${create.body.wallet.id}/verification-challenges`).set(writeHeaders(key)).send({ x: 1 });
    expect(challenge.status).to.equal(400);
    expect(challenge.body.error.message).to.match(/no request body/);
    const form = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).type('form').send('external_reference=a');
    expect(form.status).to.equal(400);
    expect(form.body.error.code).to.equal('invalid_request');
  });
});
