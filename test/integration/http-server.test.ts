import { expect } from 'chai';
import { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpServer } from '../../api/http-server.js';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, writeHeaders } from '../helpers/factories.js';

// The web server's requests and responses are born with Express's prototypes (api/http-server.ts), so Express's
// per-request prototype change is a no-op and the objects keep one hidden class.
describe('the web server: requests and responses born as Express makes them', () => {
  let api: ApiHarness;
  let base: string;
  let server: ReturnType<typeof httpServer>;
  const born: { request: boolean; response: boolean }[] = [];
  before(async () => {
    api = await startApi();
    server = httpServer(api.app, api.deps.log);
    // Before Express sees them: the prototype each object was made with.
    server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
      born.push({ request: Object.getPrototypeOf(req) === api.app.request, response: Object.getPrototypeOf(res) === api.app.response });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((r) => server.close(r));
    await api.close();
  });

  it('each is made with app.request and app.response, and is still an IncomingMessage and a ServerResponse', async () => {
    const { sandboxKey } = await makeBusiness();
    const res = await fetch(`${base}/api/v1/business/account`, { headers: { Authorization: `Bearer ${sandboxKey}` } });
    expect(res.status).to.equal(200);
    expect(born.at(-1)).to.deep.equal({ request: true, response: true });
    let req: IncomingMessage | undefined;
    server.prependOnceListener('request', (r: IncomingMessage) => (req = r));
    await fetch(`${base}/health`);
    expect(req).to.be.instanceOf(IncomingMessage);
    expect((req as unknown as { res: unknown }).res).to.be.instanceOf(ServerResponse);
  });

  it('a JSON body is read from the request stream, the write answered 201, and the row read back through the same server', async () => {
    const { sandboxKey } = await makeBusiness();
    const created = await fetch(`${base}/api/v1/business/customers`, {
      method: 'POST',
      headers: { ...writeHeaders(sandboxKey), 'Content-Type': 'application/json' },
      body: JSON.stringify({ external_reference: 'born-1', metadata: { note: 'read from the stream' } }),
    });
    expect(created.status, await created.clone().text()).to.equal(201);
    const customer = (await created.json()) as { id: string; metadata: unknown };
    expect(customer.metadata).to.deep.equal({ note: 'read from the stream' });
    const read = await fetch(`${base}/api/v1/business/customers/${customer.id}`, { headers: { Authorization: `Bearer ${sandboxKey}` } });
    expect(read.status).to.equal(200);
    expect(((await read.json()) as { id: string }).id).to.equal(customer.id);
    expect(read.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    expect(born.every((b) => b.request && b.response)).to.equal(true);
  });
});
