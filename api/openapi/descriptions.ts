import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouteDef } from '../routes/route.js';

export const TAG_DESCRIPTIONS: Record<string, string> = {
  Account: 'The business and API key a request authenticates as.',
  Corridors: 'Which currencies and payment methods are served, with their limits and scales.',
  Customers: 'Your customers; each gets one managed USDC wallet, the same address on every chain.',
  Wallets: 'Managed wallets, external wallets you register, their USDC balances and ownership proofs (EIP-191 / EIP-1271).',
  Beneficiaries: 'Payout destinations, stored encrypted and returned redacted; the fields each corridor requires.',
  'On-ramps': 'Whether on-ramps can run in this environment now: the checks a live on-ramp needs, and what is missing.',
  Quotes: 'Prices for an on-ramp or off-ramp, valid for a short time, consumed by one transaction.',
  Transactions: 'On-ramps and off-ramps: start them, follow their lifecycle, confirm a transfer, retry what needs you.',
  'Payment intents': 'Collect a customer\'s payment (mobile money or USDC) into your treasury, optionally paid straight out to a beneficiary.',
  Treasury: 'Your USDC treasury: balance, deposits and the ledger entries behind them.',
  'Liquidation addresses': 'Permanent USDC deposit addresses tied to a beneficiary: every confirmed transfer to one is paid out as an off-ramp.',
  'Payout batches': 'Many payouts from your treasury in one request, checked and priced whole before anything moves.',
  Events: 'Every state change, as it happened; the bodies webhooks deliver.',
  Webhooks: 'Endpoints that receive events, signed per Standard Webhooks, and their delivery attempts.',
  Sandbox: 'Controls that play the outside world in sandbox: fund wallets, send transfers, pay intents, force outcomes. Sandbox keys only.',
};

/** The line every operation's description ends with: who may call it and what it needs, from the route itself. */
export function accessNote(route: RouteDef): string {
  const parts = [route.scope ? `Scope: \`${route.scope}\`.` : 'Any valid API key.'];
  if (route.method !== 'get') parts.push('Needs an `Idempotency-Key`.');
  if (route.requiresLiveEnabled) parts.push('Live keys need the business enabled for live (else 403 `live_not_enabled`).');
  if (route.sandboxOnly) parts.push('Sandbox keys only (a live key gets 404).');
  if (route.query && 'starting_after' in route.query) parts.push('A page, newest first: `limit` 1..100 (default 25), then `starting_after` = `next_cursor`.');
  return parts.join(' ');
}

const DOCS_DIR = join(import.meta.dirname, '..', '..', 'docs');
/** The guide's chapters shown in the reference (/docs renders each `#` heading as a section); the rest stay in docs/. */
const IN_DOCUMENT = ['authentication.md', 'idempotency.md', 'rate-limits.md', 'errors.md', 'money.md', 'pagination.md', 'sandbox.md'];

const INTRO =
  'Business stablecoin payments over HTTP/JSON: customers with managed USDC wallets, external wallets, beneficiaries, quotes, ' +
  'on-ramps (mobile money in, USDC out), off-ramps (USDC in, fiat paid out), payment intents and a USDC treasury, every state change an ' +
  'event pushed to signed webhooks. Sandbox keys (`svc_test_`) simulate everything; live keys (`svc_live_`) move real funds once the ' +
  'business is enabled. The full guide (lifecycles, webhooks, going live) is in the repository\'s `docs/` folder.';

let cached: string | undefined;

/** The document's description: the introduction, then the guide's chapters that concern every operation. */
export function guideDescription(): string {
  cached ??= [INTRO, ...IN_DOCUMENT.filter((f) => existsSync(join(DOCS_DIR, f))).map((f) => stripLinks(readFileSync(join(DOCS_DIR, f), 'utf8')))].join('\n\n');
  return cached;
}

/** Links between guide files mean nothing inside the reference page: keep their text. */
function stripLinks(markdown: string): string {
  return markdown.replace(/\[([^\]]+)\]\((?!https?:)[^)]+\)/g, '$1').trim();
}
