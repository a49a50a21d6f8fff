import { expect } from 'chai';
import express from 'express';
import supertest from 'supertest';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { bearer, makeBusiness, writeHeaders } from '../helpers/factories.js';
import { errorHandler } from '../../api/middleware/error-handler.js';
import { requestContext } from '../../api/middleware/request-context.js';

describe('error envelope', () => {
  let api: ApiHarness;
  let key: string;
  before(async () => {
    api = await startApi();
    key = (await makeBusiness()).sandboxKey;
  });
  after(() => api.close());

  function envelope(res: supertest.Response, status: number, code: string): void {
    expect(res.status, res.text).to.equal(status);
    expect(res.headers['content-type']).to.match(/application\/json/);
    expect(Object.keys(res.body)).to.deep.equal(['error']);
    expect(res.body.error.code).to.equal(code);
    expect(res.body.error.message).to.be.a('string').and.not.empty;
    expect(res.body.error.requestId).to.equal(res.headers['x-request-id']);
  }

  it('404 not_found for unknown routes, inside and outside the API', async () => {
    envelope(await api.http.get('/api/v1/business/nope').set(bearer(key)), 404, 'not_found');
    envelope(await api.http.get('/nope'), 404, 'not_found');
    envelope(await api.http.delete('/api/v2/anything'), 404, 'not_found');
  });

  it('401 unauthorized comes before route matching', async () => {
    envelope(await api.http.get('/api/v1/business/nope'), 401, 'unauthorized');
  });

  it('400 invalid_request for malformed JSON', async () => {
    const res = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).set('Content-Type', 'application/json').send('{"external_reference": ');
    envelope(res, 400, 'invalid_request');
    expect(res.body.error.message).to.match(/JSON/);
  });

  it('413 payload_too_large over 1 MB', async () => {
    const big = JSON.stringify({ external_reference: 'x'.repeat(1_100_000) });
    envelope(await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).set('Content-Type', 'application/json').send(big), 413, 'payload_too_large');
  });

  /** An error answer within the bounds, whatever was asked: 20 items, 300-character strings, 16 KB. */
  function bounded(res: supertest.Response): void {
    expect(Buffer.byteLength(res.text), 'answer bytes').to.be.at.most(16 * 1024);
    const details = res.body.error.details as { path: string; message: string }[];
    expect(details).to.be.an('array').that.is.not.empty;
    expect(details.length).to.be.at.most(20);
    for (const item of details) {
      expect(item.message.length).to.be.at.most(300);
      expect(item.path.length).to.be.at.most(300);
    }
  }

  it('details list at most 20 issues of at most 300 characters: 10,000 unknown event types are not a 4 MB answer', async () => {
    const events = Array.from({ length: 10_000 }, (_, i) => `nothing.happened_${i}`);
    const res = await api.http.post('/api/v1/business/webhook-endpoints').set(writeHeaders(key)).send({ url: 'https://hooks.example.com/x', events });
    envelope(res, 400, 'invalid_request');
    bounded(res);
    expect(res.body.error.details).to.have.length(20);
    // The first issues, in order; each one's list of allowed types cut short.
    expect(res.body.error.details[0].path).to.equal('events');
    expect(res.body.error.details.some((d: { message: string }) => d.message.startsWith('must be one of: ') && d.message.endsWith('…'))).to.equal(true);
  });

  it('no error answer is over 16 KB, even when the request names fields of escaped control characters', async () => {
    // Each unknown field name is 1,000 characters that JSON writes as six bytes each: 20 of them would be 120 KB.
    const body = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`${'\u0001'.repeat(1_000)}${i}`, 1]));
    const res = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).set('Content-Type', 'application/json').send(JSON.stringify(body));
    envelope(res, 400, 'invalid_request');
    bounded(res);
    expect(res.body.error.message.length).to.be.at.most(1_000);
    expect(res.body.error.details.length, 'items dropped from the end to fit 16 KB').to.be.below(20);
    // A field name a megabyte long is named, cut short.
    const long = await api.http.post('/api/v1/business/customers').set(writeHeaders(key)).send({ external_reference: 'x', ['f'.repeat(900_000)]: 1 });
    envelope(long, 400, 'invalid_request');
    bounded(long);
    expect(long.body.error.details[0].path).to.equal(`${'f'.repeat(299)}…`);
  });

  it('400 idempotency_key_required and invalid_idempotency_key on writes', async () => {
    envelope(await api.http.post('/api/v1/business/customers').set(bearer(key)).send({}), 400, 'idempotency_key_required');
    envelope(await api.http.post('/api/v1/business/customers').set(writeHeaders(key, 'short')).send({}), 400, 'invalid_idempotency_key');
    envelope(await api.http.post('/api/v1/business/customers').set(writeHeaders(key, 'k'.repeat(256))).send({}), 400, 'invalid_idempotency_key');
    // Two headers would otherwise be joined by Node into a third key ("a, b") and pass.
    const twice = await api.http.post('/api/v1/business/customers').set(bearer(key)).set('Idempotency-Key', ['first-key-0001', 'second-key-0002'] as unknown as string).send({});
    envelope(twice, 400, 'invalid_idempotency_key');
    expect(twice.body.error.message).to.match(/exactly one/);
    // Four Cyrillic letters are 8 bytes, not 8 characters.
    envelope(await api.http.post('/api/v1/business/customers').set(bearer(key)).set('Idempotency-Key', Buffer.from('ключ', 'utf8').toString('latin1')).send({}), 400, 'invalid_idempotency_key');
    expect((await api.http.post('/api/v1/business/customers').set(writeHeaders(key, `ok key ${'~'.repeat(248)}`)).send({ external_reference: `k-${Date.now()}` })).status).to.equal(201);
  });

  it('500 internal_error never leaks the message, SQL or stack of an unexpected error', async () => {
    // The real request context and error handler, behind a route that fails the way a bug would.
    const app = express();
    app.use(requestContext(api.deps));
    app.get('/boom', () => {
      throw new Error('relation "secret_table" does not exist at SELECT * FROM secret_table');
    });
    app.use(errorHandler(api.deps));
    const res = await supertest(app).get('/boom');
    envelope(res, 500, 'internal_error');
    expect(res.text).not.to.match(/secret_table|SELECT|at Object|\.ts:/);
  });
});
