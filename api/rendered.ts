// Rows rendered once per version. For a read of transactions, building each row's view and serializing it cost the
// web process more than anything else it did (docs/performance.md): clients that poll read the same rows again and
// again, and got the same text each time. Each row's text is kept by its id beside its version (shared/db/row-version.ts:
// PostgreSQL's `xmin`, the transaction that wrote the row version the read saw, with its updated_at): every update
// writes a new version with a new xmin, so a read that sees another version renders it again. The database is still
// asked on every request; nothing is answered that the request's own read did not just see, only its text is not
// built twice.
import { Lru } from '../shared/lru.js';
import type { Page } from '../shared/db/pagination.js';
import type { Serialize } from './openapi/serializers.js';

/** Rows kept per cache: a transaction's text is 1 to 2 KB. */
const CAPACITY = 5_000;
/**
 * xmin is a 32-bit transaction id and comes round after 2^32 transactions: an entry is trusted for at most ten
 * minutes, far less than any server takes to go round, so an old text can never pass for a newer version.
 */
const MAX_AGE_MS = 10 * 60_000;

interface Entry {
  version: string;
  bytes: Buffer;
  at: number;
}

/** A text's UTF-8 bytes in memory of their own: a small Buffer.from shares an 8 KB slab, which one kept row would hold. */
function ownBytes(text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  bytes.write(text);
  return bytes;
}

/**
 * One kind of row's texts (a page's transactions; a transaction with its settlement), each serialized by its
 * component schema's serializer, so only declared fields leave, as from any answer, and kept as UTF-8 bytes, which
 * an answer copies as they are. A version a read sees is a committed one (a transaction that wrote a row twice shows
 * only its last version), so (id, version) names one text.
 */
export class RenderedRows {
  private readonly entries = new Lru<string, Entry>(CAPACITY);

  constructor(private readonly serialize: (value: unknown) => string) {}

  /** The row's text: kept, when the version its read saw was rendered before; else rendered by `view` and kept. */
  bytes<R extends { id: string }>(row: R, version: string, view: (row: R) => unknown): Buffer {
    const now = Date.now();
    const kept = this.entries.get(row.id);
    if (kept !== undefined && kept.version === version && now - kept.at < MAX_AGE_MS) return kept.bytes;
    const bytes = ownBytes(this.serialize(view(row)));
    this.entries.set(row.id, { version, bytes, at: now });
    return bytes;
  }
}

/** An answer already serialized by its schema's serializer (RenderedRows): sent as it is. */
export class Rendered {
  constructor(readonly bytes: Buffer) {}
}

const COMMA = Buffer.from(',');

/** A page whose rows are texts (RenderedRows): its envelope is serialized by the operation's serializer, the rows put in. */
export class RenderedPage {
  constructor(readonly page: Page<Buffer>) {}

  serializeWith(serialize: Serialize, status: number): Buffer {
    const envelope = serialize(status, { ...this.page, data: [] });
    // `"data":[]` can only be the data property: a string value holding it would hold escaped quotes.
    const at = envelope.indexOf('"data":[]');
    if (at < 0) throw new Error('a rendered page\'s envelope has no empty data array');
    const parts: Buffer[] = [Buffer.from(envelope.slice(0, at + 8))];
    for (let i = 0; i < this.page.data.length; i++) {
      if (i > 0) parts.push(COMMA);
      parts.push(this.page.data[i]);
    }
    parts.push(Buffer.from(envelope.slice(at + 8)));
    return Buffer.concat(parts);
  }
}

/** The bytes of an answer whose body was rendered beforehand; undefined for any other body. */
export function renderedBytes(serialize: Serialize | undefined, status: number, body: unknown): Buffer | undefined {
  if (body instanceof Rendered) return body.bytes;
  if (body instanceof RenderedPage) return body.serializeWith(serialize ?? ((_s, v) => JSON.stringify(v)), status);
  return undefined;
}
