// The seeded plan of a fault run: which lifecycles start when, and which faults land when. One seed, one plan: the
// plan is printed, and FAULT_SEED=n replays it. (What the service does between two planned moments depends on timing;
// per-request faults are decided by the seed and the request's place in its method's sequence, so they replay too.)

/** mulberry32: a small, fast, seedable PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A uniform draw in [0, 1) fixed by the seed and a name: the n-th request of a method always meets the same fate. */
export function draw(seed: number, name: string): number {
  let h = 2166136261 ^ seed;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return prng(h >>> 0)();
}

// MTN MoMo's kinds sit among the others (one in four), so any window of the list runs some of each rail.
export const LIFECYCLE_KINDS = [
  'offramp_external', 'offramp_external_partial', 'offramp_external_underpaid', 'momo_onramp',
  'offramp_external_late', 'offramp_external_refused', 'offramp_external_overpaid', 'momo_offramp_managed',
  'offramp_external_refund_requested', 'offramp_managed', 'offramp_managed_refused', 'momo_intent',
  'onramp', 'onramp_declined', 'intent_mpesa', 'momo_offramp_external_refused',
  'intent_mpesa_declined_then_paid', 'intent_mpesa_and_usdc', 'intent_usdc', 'momo_intent_payout',
  'intent_usdc_partial', 'intent_payout', 'sandbox_offramp', 'momo_onramp_declined', 'treasury_withdrawal',
] as const;
export type LifecycleKind = (typeof LIFECYCLE_KINDS)[number];

export type FaultEvent =
  | { at: number; kind: 'reorg'; depth: number }
  | { at: number; kind: 'redis_flush' }
  | { at: number; kind: 'kill_workers' }
  | { at: number; kind: 'rpc_outage'; ms: number }
  | { at: number; kind: 'daraja_outage'; ms: number }
  | { at: number; kind: 'momo_outage'; ms: number };

export interface Plan {
  seed: number;
  lifecycles: { at: number; kind: LifecycleKind; n: number }[];
  events: FaultEvent[];
  /** Per-request fault rates (each request draws once). */
  rpc: { http5xx: number; rpcError: number; rateLimit: number; timeout: number; lag: number; lagBlocks: number };
  daraja: { http5xx: number; timeout: number; executedNoAnswer: number };
  momo: { http5xx: number; timeout: number; executedNoAnswer: number };
  callbacks: { lost: number; duplicate: number; late: number; outOfOrder: number; contradicting: number };
  /** How long faults are injected (ms); lifecycles start within it. */
  faultMs: number;
}

/**
 * `lifecycles` lifecycles: a window of the kinds that moves on with the seed (seed n takes the next `lifecycles` kinds
 * after seed n - 1's, round the list), so every kind runs once in any run of at least as many lifecycles as kinds, and
 * in any two consecutive seeds of fewer; beyond the list's length, the rest drawn. Starts spread over the
 * first two thirds of the fault window. Reorgs stay shallower than `confirmations`: a deeper reorg would take back what
 * the configured depth promises, and that would be the harness's fault, not the service's.
 */
export function makePlan(seed: number, options: { lifecycles: number; faultMs: number; confirmations: number }): Plan {
  const rnd = prng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const kinds: LifecycleKind[] = [];
  const first = (seed * options.lifecycles) % LIFECYCLE_KINDS.length;
  for (let i = 0; i < options.lifecycles; i++) kinds.push(i < LIFECYCLE_KINDS.length ? LIFECYCLE_KINDS[(first + i) % LIFECYCLE_KINDS.length] : LIFECYCLE_KINDS[int(0, LIFECYCLE_KINDS.length - 1)]);
  const window = Math.floor(options.faultMs * 0.66);
  const lifecycles = kinds.map((kind, n) => ({ at: int(0, window), kind, n })).sort((a, b) => a.at - b.at || a.n - b.n);
  const events: FaultEvent[] = [];
  const span = options.faultMs;
  const reorgs = Math.max(1, Math.round(span / 20_000));
  for (let i = 0; i < reorgs; i++) events.push({ at: int(3_000, span - 3_000), kind: 'reorg', depth: int(1, Math.max(1, options.confirmations - 1)) });
  events.push({ at: int(span * 0.3, span * 0.7), kind: 'redis_flush' });
  const kills = Math.max(1, Math.round(span / 25_000));
  for (let i = 0; i < kills; i++) events.push({ at: int(2_000, span - 2_000), kind: 'kill_workers' });
  events.push({ at: int(2_000, span - 5_000), kind: 'rpc_outage', ms: int(1_000, 4_000) });
  events.push({ at: int(2_000, span - 5_000), kind: 'daraja_outage', ms: int(1_000, 4_000) });
  events.push({ at: int(2_000, span - 5_000), kind: 'momo_outage', ms: int(1_000, 4_000) });
  events.sort((a, b) => a.at - b.at);
  return {
    seed, lifecycles, events, faultMs: span,
    rpc: { http5xx: 0.03, rpcError: 0.03, rateLimit: 0.03, timeout: 0.01, lag: 0.15, lagBlocks: int(1, 3) },
    daraja: { http5xx: 0.08, timeout: 0.04, executedNoAnswer: 0.08 },
    momo: { http5xx: 0.08, timeout: 0.04, executedNoAnswer: 0.08 },
    callbacks: { lost: 0.1, duplicate: 0.15, late: 0.15, outOfOrder: 0.1, contradicting: 0.1 },
  };
}

export function describePlan(plan: Plan): string {
  const kinds = new Map<string, number>();
  for (const l of plan.lifecycles) kinds.set(l.kind, (kinds.get(l.kind) ?? 0) + 1);
  return [
    `seed ${plan.seed}: ${plan.lifecycles.length} lifecycles over ${plan.faultMs} ms (${[...kinds].map(([k, n]) => `${k} x${n}`).join(', ')})`,
    `events: ${plan.events.map((e) => `${e.kind}${'depth' in e ? `(${e.depth})` : 'ms' in e ? `(${e.ms} ms)` : ''}@${e.at}`).join(', ')}`,
    `rates: rpc ${JSON.stringify(plan.rpc)}; daraja ${JSON.stringify(plan.daraja)}; momo ${JSON.stringify(plan.momo)}; callbacks ${JSON.stringify(plan.callbacks)}`,
  ].join('\n');
}
