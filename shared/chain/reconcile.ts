import { erc20Abi, getAddress, type Address } from 'viem';
import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Chain, Environment } from '../domain/chains.js';
import { chainDrift, chainDriftAddresses } from '../metrics.js';
import { depositAddressExpected } from '../kernel/refund-due.js';
import { scanClientFor } from './clients.js';

// The ledger and the chain, compared: each managed wallet's on-chain USDC against its ledger account (credited by
// deliveries, refunds and the watcher's record of outside funding; debited by the transfers it sent), and the treasury
// hot wallet's against what our records say it holds (sweeps and outside funding in, deliveries and refunds out), and
// every deposit address (settlement, payment intent, liquidation address) against what arrived there less what left it
// (depositAddressExpected: a refund the hot wallet paid beyond what was swept in counts as leaving the address, so a
// deposit address that kept USDC the ledger says was returned shows). A difference is logged per address and exposed
// as a metric: an operator sees drift before a customer does.

export interface AddressDrift {
  kind: 'managed_wallet' | 'treasury' | 'deposit_address';
  address: Address;
  wallet_id: string | null;
  chain_balance: bigint;
  ledger_balance: bigint;
  drift: bigint;
}

const CONCURRENCY = 8;

export async function reconcileChain(deps: { ds: DataSource; config: Config; log: Logger }, environment: Environment, chain: Chain): Promise<AddressDrift[] | 'not configured'> {
  const wallet = deps.config.wallets[environment];
  if (!wallet || !deps.config.chains[chain].rpcUrl) return 'not configured';
  const wallets: { id: string; address: string; balance: string }[] = await deps.ds.query(
    `SELECT w.id, w.address, coalesce(a.balance, 0)::text AS balance
       FROM wallets w LEFT JOIN ledger_accounts a
         ON a.business_id = w.business_id AND a.environment = w.environment AND a.account_key = 'wallet:' || w.id || ':' || $2 || ':USDC'
      WHERE w.environment = $1 AND w.type = 'managed_wallet'`,
    [environment, chain],
  );
  const hot = wallet.treasuryAddress;
  const [{ expected }]: { expected: string }[] = await deps.ds.query(
    `SELECT ((SELECT coalesce(sum(amount), 0) FROM chain_sends WHERE environment = $1 AND chain = $2 AND asset = 'USDC' AND to_address = $3 AND status = 'mined')
           + (SELECT coalesce(sum(amount), 0) FROM chain_inflows WHERE environment = $1 AND chain = $2 AND address = $3 AND status <> 'reorged')
           - (SELECT coalesce(sum(amount), 0) FROM chain_sends WHERE environment = $1 AND chain = $2 AND asset = 'USDC' AND from_address = $3 AND status IN ('sent', 'mined')))::text AS expected`,
    [environment, chain, hot.toLowerCase()],
  );
  const deposits = await depositAddresses(deps.ds, environment, chain, hot);
  const subjects = [
    ...wallets.map((w) => ({ kind: 'managed_wallet' as const, address: getAddress(w.address), wallet_id: w.id, ledger: BigInt(w.balance) })),
    { kind: 'treasury' as const, address: hot, wallet_id: null, ledger: BigInt(expected) },
    ...deposits.map((d) => ({ kind: 'deposit_address' as const, address: getAddress(d.address), wallet_id: null, ledger: depositAddressExpected({
      received: BigInt(d.received), sweptOut: BigInt(d.swept_out), paidOut: BigInt(d.paid_out), refundedFromHotWallet: BigInt(d.refunded_from_hot_wallet),
    }) })),
  ];
  const client = scanClientFor(deps.config, chain);
  const token = getAddress(deps.config.chains[chain].usdcAddress);
  const out: AddressDrift[] = [];
  for (let i = 0; i < subjects.length; i += CONCURRENCY) {
    const batch = subjects.slice(i, i + CONCURRENCY);
    const balances = await Promise.all(batch.map((s) => client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [s.address] })));
    batch.forEach((s, j) => out.push({ kind: s.kind, address: s.address, wallet_id: s.wallet_id, chain_balance: balances[j], ledger_balance: s.ledger, drift: balances[j] - s.ledger }));
  }
  for (const kind of ['managed_wallet', 'treasury', 'deposit_address'] as const) {
    const drifted = out.filter((d) => d.kind === kind && d.drift !== 0n);
    chainDrift.set({ environment, chain, kind }, Number(drifted.reduce((sum, d) => sum + d.drift, 0n)));
    chainDriftAddresses.set({ environment, chain, kind }, drifted.length);
    for (const d of drifted) {
      deps.log.warn({ environment, chain, kind, address: d.address, wallet_id: d.wallet_id, chain_balance: d.chain_balance.toString(), ledger_balance: d.ledger_balance.toString(), drift: d.drift.toString() },
        'ledger and chain disagree');
    }
  }
  return out;
}

/** How long a deposit address whose records say it is empty is still read (one that holds USDC by our records always is). */
const DEPOSIT_RECENT_DAYS = 30;

/**
 * Every deposit address that received USDC, with its payments summed in minor units: arrived (counted settlement
 * transfers, liquidation transfers, a payment intent's stablecoin deposits), swept or sent out of it, paid out in fiat
 * (completed off-ramps), and refunded by the hot wallet (sends named refund-<transaction>-...).
 */
async function depositAddresses(ds: DataSource, environment: Environment, chain: Chain, hot: string) {
  return (await ds.query(
    `WITH payments AS (
       SELECT lower(s.to_address) AS address, s.updated_at, t.id AS transaction_id, t.status, t.total_required,
              (SELECT coalesce(sum(x.amount), 0) FROM settlement_transfers x WHERE x.settlement_id = s.id) AS received
         FROM settlements s JOIN transactions t ON t.id = s.transaction_id
        WHERE s.environment = $1 AND s.chain = $2 AND s.liquidation_address_id IS NULL
       UNION ALL
       SELECT lower(l.address), coalesce(t.updated_at, x.created_at), t.id, t.status, t.total_required, x.amount
         FROM liquidation_transfers x JOIN liquidation_addresses l ON l.id = x.liquidation_address_id LEFT JOIN transactions t ON t.id = x.transaction_id
        WHERE l.environment = $1 AND l.chain = $2
       UNION ALL
       SELECT lower(i.deposit_address), i.updated_at, NULL, NULL, NULL, d.usdc_amount
         FROM treasury_deposits d JOIN payment_intents i ON i.id = d.payment_intent_id
        WHERE i.environment = $1 AND i.chain = $2 AND d.payment_method = 'stablecoin' AND d.status <> 'failed'
     ), addresses AS (
       SELECT p.address, max(p.updated_at) AS updated_at,
              (sum(p.received) * 1000000)::numeric(78, 0) AS received,
              (coalesce(sum(p.total_required) FILTER (WHERE p.status = 'completed'), 0) * 1000000)::numeric(78, 0) AS paid_out,
              (SELECT coalesce(sum(c.amount), 0) FROM chain_sends c
                WHERE c.environment = $1 AND c.chain = $2 AND c.from_address = $3 AND c.purpose = 'refund' AND c.asset = 'USDC' AND c.status IN ('sent', 'mined')
                  AND c.reference LIKE ANY (SELECT 'refund-' || q.transaction_id || '-%' FROM payments q WHERE q.address = p.address AND q.transaction_id IS NOT NULL)) AS refunded_from_hot_wallet
         FROM payments p GROUP BY p.address HAVING sum(p.received) > 0
     )
     SELECT a.address, a.received::text, a.paid_out::text, a.refunded_from_hot_wallet::text, a.updated_at,
            (SELECT coalesce(sum(c.amount), 0) FROM chain_sends c
              WHERE c.environment = $1 AND c.chain = $2 AND c.from_address = a.address AND c.asset = 'USDC' AND c.status IN ('sent', 'mined'))::text AS swept_out
       FROM addresses a`,
    [environment, chain, hot.toLowerCase()],
  ) as { address: string; received: string; paid_out: string; refunded_from_hot_wallet: string; swept_out: string; updated_at: Date }[])
    .filter((d) => BigInt(d.received) !== BigInt(d.swept_out) || d.updated_at.getTime() > Date.now() - DEPOSIT_RECENT_DAYS * 86_400_000);
}
