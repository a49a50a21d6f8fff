// `npm run admin -- rotate-encryption-key`: re-seals every sealed column set under the current (first) key of
// ENCRYPTION_KEYS, in short transactions, while the service keeps running.
//
// Rotation without downtime:
//   1. deploy ENCRYPTION_KEYS=old,new  (every process can open `new`; writes still use `old`)
//   2. deploy ENCRYPTION_KEYS=new,old  (new writes use `new`; rows under `old` keep opening)
//   3. run this command                (moves every remaining row to `new`, and every payer digest; safe to re-run)
//   4. deploy ENCRYPTION_KEYS=new      (once it reports nothing left under other keys)
import type { DataSource } from 'typeorm';
import type { Config } from '../config.js';
import { reseal } from '../crypto/envelope.js';
import { SEALED_COLUMNS, rowAad, sealedAssignments, sealedColumnList, sealedFromRow, sealedValues, type RowOwner } from '../crypto/sealed-columns.js';
import { AdminError } from './commands.js';
import { redigestPayers, type RedigestReport } from '../domain/payer-digests.js';

export interface RotationReport {
  current_key_id: string;
  rotated: number;
  remaining: number;
  tables: Record<string, number>;
  /** Rows that would not open (tampered or corrupt): left as they are, for an operator to look at. */
  failed: { table: string; id: string }[];
  /** Payer digests (HMAC under a key derived from the current key) made again; see shared/domain/payer-digests.ts. */
  payer_digests: RedigestReport;
}

export interface RotationOptions {
  batchSize?: number;
  /** Called after each committed batch (progress output; tests read through the API mid-rotation). */
  onBatch?: (progress: { table: string; rotated: number }) => Promise<void> | void;
}

async function countOutside(ds: DataSource, table: string, prefix: string, current: string): Promise<Map<string, number>> {
  const rows: { key_id: string; n: string }[] = await ds.query(
    `SELECT ${prefix}_key_id AS key_id, count(*) AS n FROM ${table} WHERE ${prefix}_key_id <> $1 GROUP BY 1`,
    [current],
  );
  return new Map(rows.map((r) => [r.key_id, Number(r.n)]));
}

/** Re-seals one table in id order; each batch is its own transaction holding row locks only on that batch. */
async function rotateTable(ds: DataSource, config: Config, table: string, prefix: string, opts: RotationOptions, failed: RotationReport['failed']): Promise<number> {
  const current = config.encryptionKeys[0].id;
  const batchSize = opts.batchSize ?? 200;
  let after = '00000000-0000-0000-0000-000000000000';
  let rotated = 0;
  for (;;) {
    const done = await ds.transaction(async (em) => {
      const rows: (RowOwner & Record<string, unknown>)[] = await em.query(
        `SELECT id, business_id, environment, ${sealedColumnList(prefix)} FROM ${table}
          WHERE ${prefix}_key_id <> $1 AND id > $2 ORDER BY id LIMIT $3 FOR UPDATE`,
        [current, after, batchSize],
      );
      let resealed = 0;
      for (const row of rows) {
        let sealed;
        try {
          sealed = reseal(sealedFromRow(row, prefix), config.encryptionKeys, rowAad(table, prefix, row));
        } catch {
          failed.push({ table, id: row.id });
          continue;
        }
        await em.query(`UPDATE ${table} SET ${sealedAssignments(prefix, 2)} WHERE id = $1`, [row.id, ...sealedValues(sealed)]);
        resealed += 1;
      }
      if (rows.length) after = rows[rows.length - 1].id;
      return { seen: rows.length, resealed };
    });
    rotated += done.resealed;
    if (done.seen > 0) await opts.onBatch?.({ table, rotated });
    if (done.seen < batchSize) return rotated;
  }
}

export async function rotateEncryptionKey(deps: { ds: DataSource; config: Config }, opts: RotationOptions = {}): Promise<RotationReport> {
  const { ds, config } = deps;
  const current = config.encryptionKeys[0].id;
  const loadable = new Set(config.encryptionKeys.map((k) => k.id));
  // The development key's bytes are public: live details are never moved under it.
  if (!config.encryptionKeysConfigured) {
    for (const { table, prefix } of SEALED_COLUMNS) {
      const live: unknown[] = await ds.query(`SELECT 1 FROM ${table} WHERE environment = 'live' AND ${prefix}_key_id IS NOT NULL LIMIT 1`);
      if (live.length) throw new AdminError(`the first key of ENCRYPTION_KEYS ("${current}") is the public development key; ${table} holds live rows, which are never sealed under it`);
    }
  }
  // Refuse before touching anything if some row is under a key this process cannot open.
  for (const { table, prefix } of SEALED_COLUMNS) {
    const missing = [...(await countOutside(ds, table, prefix, current)).entries()].filter(([id]) => !loadable.has(id));
    if (missing.length) {
      const list = missing.map(([id, n]) => `${n} under "${id}"`).join(', ');
      throw new AdminError(`${table}: ${list}, which ENCRYPTION_KEYS does not hold; list that key after the current one and re-run`);
    }
  }
  const tables: Record<string, number> = {};
  const failed: RotationReport['failed'] = [];
  let remaining = 0;
  for (const { table, prefix } of SEALED_COLUMNS) {
    // A table with several sealed column sets (payment_intents) reports their sum.
    tables[table] = (tables[table] ?? 0) + (await rotateTable(ds, config, table, prefix, opts, failed));
    for (const n of (await countOutside(ds, table, prefix, current)).values()) remaining += n;
  }
  // Payer digests are keyed under the current key too: they follow it (requests first, waiting callbacks with them).
  const payerDigests = await redigestPayers(ds, config.encryptionKeys, { batchSize: opts.batchSize });
  return { current_key_id: current, rotated: Object.values(tables).reduce((a, b) => a + b, 0), remaining, tables, failed, payer_digests: payerDigests };
}
