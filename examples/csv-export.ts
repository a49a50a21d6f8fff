// CSV exports, for a finance team's spreadsheet: every completed transaction (not one page: the whole filtered set,
// streamed, up to 100,000 rows) saved to a file, and the treasury ledger read posting by posting, checking that each
// journal entry sums to zero per asset. Both are RFC 4180 CSV with a header row, read with a CSV parser (csv-parse),
// never split on commas: a field may hold a quoted comma or line break.
//   RAMPWAY_KEY=svc_test_... [RAMPWAY_BASE_URL=http://localhost:3000] [OUT=transactions.csv] npx tsx examples/csv-export.ts
import { createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { parse } from 'csv-parse';
import { createRampwayClient, unwrap } from '@rampway/client';

export interface CsvExportOptions {
  baseUrl: string;
  apiKey: string;
  /** Where the transactions CSV goes (not kept when omitted). */
  out?: string;
  log?: (line: string) => void;
}

export interface CsvExportResult {
  transactions: { rows: number; header: string[]; paidOut: Record<string, string> };
  ledger: { rows: number; entries: number; unbalanced: string[] };
}

/** A decimal string as an integer count of 10^-scale units, exactly (money is never a float). */
function units(value: string, scale: number): bigint {
  const [whole, fraction = ''] = value.replace(/^-/, '').split('.');
  const n = BigInt(whole + fraction.padEnd(scale, '0').slice(0, scale));
  return value.startsWith('-') ? -n : n;
}

export async function csvExport(options: CsvExportOptions): Promise<CsvExportResult> {
  const api = createRampwayClient(options);
  const log = options.log ?? console.log;
  // Accept: text/csv turns the list into the export; parseAs: 'stream' hands over the body as it arrives.
  const csv = { headers: { Accept: 'text/csv' }, parseAs: 'stream' as const };

  // Every completed transaction, newest first (the list's filters apply: created_gte / created_lte for a month).
  const transactions = unwrap(await api.GET('/api/v1/business/transactions', { params: { query: { status: 'completed' } }, ...csv })) as unknown as WebReadableStream;
  const [toFile, toParser] = transactions.tee();
  const saving = options.out ? pipeline(Readable.fromWeb(toFile), createWriteStream(options.out)) : toFile.cancel();
  let header: string[] = [];
  let rows = 0;
  const cents: Record<string, bigint> = {};
  for await (const record of Readable.fromWeb(toParser).pipe(parse({ columns: (names: string[]) => (header = names) })) as AsyncIterable<Record<string, string>>) {
    rows += 1;
    // What reached beneficiaries, per fiat currency (off-ramp destinations are fiat, at 2 decimals).
    if (record.direction === 'offramp') {
      cents[record.destination_currency_or_asset] = (cents[record.destination_currency_or_asset] ?? 0n) + units(record.destination_amount, 2);
    }
  }
  await saving;
  const paidOut = Object.fromEntries(Object.entries(cents).map(([currency, c]) => [currency, `${c / 100n}.${String(c % 100n).padStart(2, '0')}`]));
  log(`transactions: ${rows} completed${options.out ? `, saved to ${options.out}` : ''}; paid out ${JSON.stringify(paidOut)}`);

  // The ledger, one posting a row; `amount` is a signed decimal, so each entry's rows sum to zero per asset.
  const ledger = unwrap(await api.GET('/api/v1/business/treasury/ledger', { params: { query: {} }, ...csv })) as unknown as WebReadableStream;
  const sums = new Map<string, bigint>();
  let postings = 0;
  for await (const record of Readable.fromWeb(ledger).pipe(parse({ columns: true })) as AsyncIterable<Record<string, string>>) {
    postings += 1;
    const key = `${record.entry_id}/${record.asset}`;
    sums.set(key, (sums.get(key) ?? 0n) + units(record.amount, 6));
  }
  const unbalanced = [...sums].filter(([, sum]) => sum !== 0n).map(([key]) => key);
  const entries = new Set([...sums.keys()].map((key) => key.split('/')[0])).size;
  log(`ledger: ${postings} postings in ${entries} entries, ${unbalanced.length ? `${unbalanced.length} unbalanced` : 'every entry balanced'}`);
  return { transactions: { rows, header, paidOut }, ledger: { rows: postings, entries, unbalanced } };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const apiKey = process.env.RAMPWAY_KEY;
  if (!apiKey) {
    console.error('Set RAMPWAY_KEY to a key holding transactions:read and treasury:read (npm run -s admin -- create-business --name Acme --json).');
    process.exit(2);
  }
  await csvExport({ baseUrl: process.env.RAMPWAY_BASE_URL ?? 'http://localhost:3000', apiKey, out: process.env.OUT ?? 'transactions.csv' });
}
