import { erc20Abi, getAddress, type Address } from 'viem';
import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Chain, Environment } from '../domain/chains.js';
import { chainDrift, chainDriftAddresses } from '../metrics.js';
import { scanClientFor } from './clients.js';

// The ledger and the chain, compared: each managed wallet's on-chain USDC against its ledger account (credited by
// deliveries, refunds and the watcher's record of outside funding; debited by the transfers it sent), and the treasury
// hot wallet's against what our records say it holds (sweeps and outside funding in, deliveries and refunds out).
// A difference is logged per address and exposed as a metric: an operator sees drift before a customer does.

export interface AddressDrift {
  kind: 'managed_wallet' | 'treasury';
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
  const subjects = [
    ...wallets.map((w) => ({ kind: 'managed_wallet' as const, address: getAddress(w.address), wallet_id: w.id, ledger: BigInt(w.balance) })),
    { kind: 'treasury' as const, address: hot, wallet_id: null, ledger: BigInt(expected) },
  ];
  const client = scanClientFor(deps.config, chain);
  const token = getAddress(deps.config.chains[chain].usdcAddress);
  const out: AddressDrift[] = [];
  for (let i = 0; i < subjects.length; i += CONCURRENCY) {
    const batch = subjects.slice(i, i + CONCURRENCY);
    const balances = await Promise.all(batch.map((s) => client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [s.address] })));
    batch.forEach((s, j) => out.push({ kind: s.kind, address: s.address, wallet_id: s.wallet_id, chain_balance: balances[j], ledger_balance: s.ledger, drift: balances[j] - s.ledger }));
  }
  for (const kind of ['managed_wallet', 'treasury'] as const) {
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
