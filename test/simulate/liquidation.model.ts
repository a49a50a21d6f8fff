// Transfers to a liquidation address played against the kernel's rules (nextPricingStep, priceLiquidation): the rate
// source comes and goes, the pricing job runs early, late and twice, time passes, and transfers of any size arrive,
// some to an archived address. Each transfer is priced to exactly what arrived, or goes back; none waits for ever.
import { nextPricingStep, priceLiquidation, RATE_SCALE } from '../../shared/kernel/liquidation.js';
import type { Dice, Model } from './runner.js';

const RETURN_AFTER_S = 900;
const LIMITS = { min: 100n * 100n, max: 150_000n * 100n };

interface Transfer {
  received: bigint;
  recordedAtMs: number;
  rejected: boolean;
  /** What happened to it: still unpriced, an off-ramp of `paid` fiat with `total` USDC, or returned. */
  end: { kind: 'waiting' } | { kind: 'priced'; total: bigint; source: bigint; fees: bigint; destination: bigint } | { kind: 'returned'; reason: string };
  /** When the pricing job will run again (its delayed retry), or null: no job. */
  jobAtMs: number | null;
  lastRunAtMs: number | null;
}

interface World {
  nowMs: number;
  rate: bigint | null;
  transfers: Transfer[];
}

type Fact =
  | { kind: 'arrive'; received: bigint; rejected: boolean }
  | { kind: 'rate'; rate: bigint | null }
  | { kind: 'time'; ms: number }
  | { kind: 'job'; transfer: number; duplicate: boolean };

/** A quote's fees for what arrived: a flat provider fee and 50 bps (at least 0.5 USDC), rounded up. */
function fees(received: bigint) {
  const platform = (received * 50n + 9_999n) / 10_000n;
  return { provider: 250_000n, platform: platform < 500_000n ? 500_000n : platform };
}

function runJob(w: World, t: Transfer): void {
  if (t.end.kind !== 'waiting') return;
  t.lastRunAtMs = w.nowMs;
  const step = nextPricingStep({ rejected: t.rejected, rateAvailable: w.rate !== null, recordedAtMs: t.recordedAtMs, nowMs: w.nowMs, returnAfterSeconds: RETURN_AFTER_S });
  if (step.kind === 'wait_for_rate') {
    if (step.retryInMs <= 0) throw new Error('a wait of no time');
    t.jobAtMs = w.nowMs + step.retryInMs;
    return;
  }
  t.jobAtMs = null;
  if (step.kind === 'return') {
    t.end = { kind: 'returned', reason: step.reason };
    return;
  }
  const f = fees(t.received);
  const priced = priceLiquidation({ received: t.received, fees: f, rate: w.rate!, fiatScale: 2, fiatStep: 100n, limits: LIMITS });
  t.end = priced.kind === 'priced'
    ? { kind: 'priced', total: priced.price.totalRequired, source: priced.price.source, fees: priced.price.fees.provider + priced.price.fees.platform, destination: priced.price.destination }
    : { kind: 'returned', reason: 'out_of_range' };
}

export const liquidationModel: Model<World, Fact> = {
  name: 'liquidation transfers',
  budget: 40,
  init(d: Dice) {
    return { nowMs: 1_700_000_000_000, rate: d.chance(0.5) ? 12_935_000_000n : null, transfers: [] };
  },
  next(w, d, draining) {
    const options: (() => Fact)[] = [];
    if (!draining) {
      options.push(() => ({ kind: 'arrive', received: BigInt(d.pick([1, 100, 999_999, 1_000_000, 5_000_000, 37_000_000, 999_000_000, 2_000_000_000])) + BigInt(d.int(1_000_000)), rejected: d.chance(0.1) }));
      options.push(() => ({ kind: 'rate', rate: d.chance(0.5) ? null : BigInt(100 + d.int(20_000)) * 10n ** BigInt(RATE_SCALE - 2) }));
    }
    options.push(() => ({ kind: 'time', ms: d.pick([10, 1_000, 5_000, 60_000, 300_000]) }));
    const due = w.transfers.map((t, i) => [t, i] as const).filter(([t]) => t.jobAtMs !== null && t.jobAtMs <= w.nowMs);
    if (due.length) options.push(() => ({ kind: 'job', transfer: d.pick(due)[1], duplicate: false }));
    if (!draining && w.transfers.length) options.push(() => ({ kind: 'job', transfer: d.int(w.transfers.length), duplicate: true }));
    // Drained once nothing waits: time only matters while a transfer is still unpriced.
    if (draining && !w.transfers.some((t) => t.end.kind === 'waiting')) return null;
    return d.pick(options)();
  },
  step(w, fact) {
    switch (fact.kind) {
      case 'arrive':
        w.transfers.push({ received: fact.received, recordedAtMs: w.nowMs, rejected: fact.rejected, end: { kind: 'waiting' }, jobAtMs: w.nowMs, lastRunAtMs: null });
        return;
      case 'rate':
        w.rate = fact.rate;
        return;
      case 'time':
        w.nowMs += fact.ms;
        return;
      case 'job':
        return runJob(w, w.transfers[fact.transfer]);
    }
  },
  check(w, final) {
    const broken: string[] = [];
    w.transfers.forEach((t, i) => {
      if (t.end.kind === 'priced') {
        if (t.end.total !== t.received) broken.push(`transfer ${i}: total_required ${t.end.total} != received ${t.received}`);
        if (t.end.source + t.end.fees !== t.received) broken.push(`transfer ${i}: source + fees != received`);
        if (t.end.destination < LIMITS.min || t.end.destination > LIMITS.max) broken.push(`transfer ${i}: paid outside the corridor's limits`);
        if (t.rejected) broken.push(`transfer ${i}: paid out though it arrived after the address was archived`);
      }
      if (t.end.kind === 'waiting' && t.jobAtMs === null) broken.push(`transfer ${i}: unpriced with no job to move it`);
      const deadline = t.recordedAtMs + RETURN_AFTER_S * 1000;
      if (t.end.kind === 'waiting' && t.jobAtMs !== null && t.jobAtMs > deadline) broken.push(`transfer ${i}: its next try is past its deadline`);
      if (t.end.kind === 'waiting' && t.lastRunAtMs !== null && t.lastRunAtMs >= deadline) broken.push(`transfer ${i}: still waiting after a try past its deadline`);
      if (final && t.end.kind === 'waiting') broken.push(`transfer ${i}: still waiting at quiescence`);
    });
    return broken;
  },
  describe(fact) {
    return JSON.stringify(fact, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  },
};
