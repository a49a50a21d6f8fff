// chain.send jobs played against the kernel's rule (decideChainSend): deciding units plan sends (withdrawals,
// deliveries, refunds), and jobs run for them late and twice, while anyone with access to Redis or the queue board
// adds jobs of their own, naming no send, a send of another purpose, or a real send with their own address and
// amount. What leaves the hot wallet is exactly what was planned, each send once.
import { decideChainSend, type RecordedSend } from '../../shared/kernel/chain-send.js';
import type { Dice, Model } from './runner.js';

const THIEF = '0x000000000000000000000000000000000000dead';

interface World {
  planned: Map<string, RecordedSend>;
  /** What the hot wallet signed, by reference: to whom, how much. */
  signed: Map<string, { to: string; amount: bigint }>;
  jobs: { reference: string; payload: Record<string, unknown> }[];
  made: number;
}

type Fact =
  | { kind: 'plan'; purpose: 'withdrawal' | 'onramp_delivery' | 'refund' | 'sweep'; amount: bigint }
  | { kind: 'run'; job: number }
  | { kind: 'forge'; reference: string; to: string; amount: bigint };

export const chainSendsModel: Model<World, Fact> = {
  name: 'hot-wallet sends',
  budget: 30,
  init() {
    return { planned: new Map(), signed: new Map(), jobs: [], made: 0 };
  },
  next(w, d, draining) {
    const options: (() => Fact)[] = [];
    if (!draining) {
      options.push(() => ({ kind: 'plan', purpose: d.pick(['withdrawal', 'onramp_delivery', 'refund', 'sweep'] as const), amount: BigInt(d.int(3)) * 1_000_000n + BigInt(d.int(1000)) }));
      const references = [...w.planned.keys(), 'refund-unplanned', 'withdrawal-unknown'];
      options.push(() => ({ kind: 'forge', reference: d.pick(references), to: THIEF, amount: 10_000_000_000n }));
    }
    if (w.jobs.length) options.push(() => ({ kind: 'run', job: d.int(w.jobs.length) }));
    return options.length ? d.pick(options)() : null;
  },
  step(w, fact) {
    switch (fact.kind) {
      case 'plan': {
        const reference = `${fact.purpose}-${++w.made}`;
        const subject = fact.purpose === 'withdrawal' ? { withdrawal_id: `w${w.made}`, transaction_id: null } : { withdrawal_id: null, transaction_id: fact.purpose === 'sweep' ? null : `t${w.made}` };
        w.planned.set(reference, { purpose: fact.purpose, status: 'planned', to_address: `0x${String(w.made).padStart(40, '0')}`, amount: fact.amount.toString(), asset: 'USDC', hd_index: null, refund_total: null, ...subject });
        w.jobs.push({ reference, payload: {} });
        return;
      }
      case 'forge':
        w.jobs.push({ reference: fact.reference, payload: { to: fact.to, amount: fact.amount.toString() } });
        return;
      case 'run': {
        const [job] = w.jobs.splice(fact.job, 1);
        const decision = decideChainSend(w.planned.get(job.reference));
        if (decision.kind === 'nothing') return;
        // Signed once per reference (chain_sends is unique on it): a second job settles the same send.
        if (!w.signed.has(job.reference)) w.signed.set(job.reference, { to: decision.to, amount: decision.amount });
      }
    }
  },
  check(w) {
    const broken: string[] = [];
    for (const [reference, sent] of w.signed) {
      const plan = w.planned.get(reference);
      if (!plan) broken.push(`${reference}: sent with no plan`);
      else if (sent.to !== plan.to_address || sent.amount !== BigInt(plan.amount)) broken.push(`${reference}: sent ${sent.amount} to ${sent.to}, planned ${plan.amount} to ${plan.to_address}`);
      if (sent.to === THIEF) broken.push(`${reference}: the hot wallet paid a forged job's address`);
      if (plan && !['withdrawal', 'onramp_delivery', 'refund'].includes(plan.purpose)) broken.push(`${reference}: a ${plan.purpose} send made by a chain.send job`);
    }
    return broken;
  },
  describe(fact) {
    return JSON.stringify(fact, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  },
};
