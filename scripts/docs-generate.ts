// The parts of docs/ that restate code (state machines, the corridor registry, the error codes) are generated from it
// between `<!-- generated:NAME -->` and `<!-- /generated -->` markers. `npm run docs:generate` rewrites them;
// test/unit/docs.test.ts fails when one is stale.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  PAYMENT_INTENT_MACHINE, QUOTE_MACHINE, SETTLEMENT_MACHINE, TRANSACTION_MACHINE, TREASURY_DEPOSIT_MACHINE, TREASURY_WITHDRAWAL_MACHINE,
  INTENT_PAYOUT_MACHINE, PAYOUT_BATCH_MACHINE, REFUND_MACHINE, WEBHOOK_ENDPOINT_MACHINE, WALLET_OWNERSHIP_MACHINE, type Machine,
} from '../shared/domain/machines.js';
import { ERROR_CODES } from '../shared/errors.js';
import { getConfig } from '../shared/config.js';
import { HTTP_STATUS } from '../api/http-errors.js';
import { routes } from '../api/routes/index.js';
import type { HandlerContext } from '../api/routes/route.js';

export const DOCS_DIR = join(import.meta.dirname, '..', 'docs');

/** A mermaid state diagram of a machine: every allowed move, terminal statuses to the end state. */
function diagram(machine: Machine, initial: string[]): string {
  const lines = ['```mermaid', 'stateDiagram-v2'];
  for (const s of initial) lines.push(`    [*] --> ${s}`);
  const statuses = new Set<string>(initial);
  for (const [from, tos] of Object.entries(machine.moves) as [string, readonly string[]][]) {
    statuses.add(from);
    for (const to of tos) {
      const label = machine.labels?.[`${from}->${to}`];
      lines.push(`    ${from} --> ${to}${label ? `: ${label}` : ''}`);
      statuses.add(to);
    }
  }
  for (const s of statuses) if (!(s in machine.moves)) lines.push(`    ${s} --> [*]`);
  for (const [s, note] of Object.entries(machine.notes ?? {})) lines.push(`    note right of ${s}: ${note}`);
  lines.push('```');
  return lines.join('\n');
}

async function corridorTable(): Promise<string> {
  const list = routes.find((r) => r.operationId === 'listCorridors')!;
  // The table is exactly what GET /corridors answers on a deployment with the default configuration.
  const reply = await list.handler({ deps: { config: getConfig() } } as unknown as HandlerContext);
  const rows = (reply.body as { data: Record<string, any>[] }).data;
  const out = ['| currency | payment method | directions | min | max | scale | networks | live |', '|---|---|---|---|---|---|---|---|'];
  for (const c of rows) {
    out.push(`| ${c.currency} | \`${c.payment_method}\` | ${c.directions.join(', ')} | ${c.min_amount} | ${c.max_amount} | ${c.currency_scale} | ${(c.networks ?? []).join(', ') || '-'} | ${c.live_available ? 'yes' : 'no'} |`);
  }
  return out.join('\n');
}

function statusTable(): string {
  const out = ['| status | codes |', '|---|---|'];
  const byStatus = new Map<number, string[]>();
  for (const code of ERROR_CODES) byStatus.set(HTTP_STATUS[code], [...(byStatus.get(HTTP_STATUS[code]) ?? []), code]);
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) out.push(`| ${status} | ${codes.map((c) => `\`${c}\``).join(', ')} |`);
  return out.join('\n');
}

/** Every generated block, by name. */
export async function generatedBlocks(): Promise<Record<string, string>> {
  return {
    'transaction-machine': diagram(TRANSACTION_MACHINE, ['created']),
    'settlement-machine': diagram(SETTLEMENT_MACHINE, ['awaiting_transfer']),
    'quote-machine': diagram(QUOTE_MACHINE, ['pending']),
    'payment-intent-machine': diagram(PAYMENT_INTENT_MACHINE, ['awaiting_payment']),
    'payout-machine': diagram(INTENT_PAYOUT_MACHINE, ['pending']),
    'refund-machine': diagram(REFUND_MACHINE, [...REFUND_MACHINE.embedded!.initial]),
    'treasury-deposit-machine': diagram(TREASURY_DEPOSIT_MACHINE, ['pending']),
    'treasury-withdrawal-machine': diagram(TREASURY_WITHDRAWAL_MACHINE, ['pending']),
    'payout-batch-machine': diagram(PAYOUT_BATCH_MACHINE, ['processing']),
    'wallet-ownership-machine': diagram(WALLET_OWNERSHIP_MACHINE, ['unverified']),
    'webhook-endpoint-machine': diagram(WEBHOOK_ENDPOINT_MACHINE, ['enabled']),
    corridors: await corridorTable(),
    'error-statuses': statusTable(),
  };
}

const BLOCK = /<!-- generated:([a-z-]+) -->\n[\s\S]*?<!-- \/generated -->/g;

/** The file with every generated block brought up to date; unknown block names throw. */
export function render(text: string, blocks: Record<string, string>): string {
  return text.replace(BLOCK, (_all, name: string) => {
    if (!(name in blocks)) throw new Error(`unknown generated block ${name}`);
    return `<!-- generated:${name} -->\n${blocks[name]}\n<!-- /generated -->`;
  });
}

/** Every docs/ file with a generated block, found by its markers: a block added to any chapter is kept current (and checked). */
export function generatedFiles(dir = DOCS_DIR): string[] {
  return readdirSync(dir).filter((f) => f.endsWith('.md') && readFileSync(join(dir, f), 'utf8').includes('<!-- generated:')).sort();
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const blocks = await generatedBlocks();
  for (const f of generatedFiles()) {
    const path = join(DOCS_DIR, f);
    const before = readFileSync(path, 'utf8');
    const after = render(before, blocks);
    if (after !== before) {
      writeFileSync(path, after);
      console.log(`docs/${f} regenerated`);
    }
  }
  process.exit(0);
}
