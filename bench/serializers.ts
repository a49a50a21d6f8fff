// npm run bench:serializers: what an answer's serialization costs, JSON.stringify against the serializer compiled from
// its OpenAPI response schema (api/openapi/serializers.ts), in one process: a transaction (the documented off-ramp
// example) and a page of 25 (off- and on-ramps alternating), each timed after a warm-up.
import { buildDocument } from '../api/openapi/document.js';
import { serializerFor } from '../api/openapi/serializers.js';
import { routes, schemas } from '../api/routes/index.js';
const doc = buildDocument(routes, schemas);
const op = (id: string) => routes.find((r) => r.operationId === id)!;
const off = doc.components.schemas.OfframpTransaction.examples[0];
const on = doc.components.schemas.OnrampTransaction.examples[0];
const page = { data: Array.from({ length: 25 }, (_, i) => ({ ...(i % 2 ? off : on), settlement: undefined })), has_more: true, next_cursor: 'abc' };
for (const x of page.data) delete (x as any).settlement;
function time(name: string, f: () => string, n = 20000) {
  for (let i = 0; i < 2000; i++) f();
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) f();
  console.log(name, (Number(process.hrtime.bigint() - t) / n / 1000).toFixed(2), 'µs');
}
const getTx = serializerFor(doc, op('getTransaction'), false);
const listTx = serializerFor(doc, op('listTransactions'), false);
time('tx JSON.stringify', () => JSON.stringify(off));
time('tx compiled', () => getTx(200, off));
time('page JSON.stringify', () => JSON.stringify(page), 2000);
time('page compiled', () => listTx(200, page), 2000);
