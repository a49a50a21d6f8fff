// M-Pesa prompts played against the kernel's STK rules (stkResult, onrampAfterUnpaidPrompt, intentAfterUnpaidPrompt):
// an on-ramp's prompt and a payment intent's prompts answered with every published code (and unpublished ones),
// by callback and by STK Query, late, twice and out of order, the intent collected again and expiring meanwhile.
// Every prompt ends; each payment is credited once, however late; nothing is funded that nobody paid.
import { intentAfterUnpaidPrompt, onrampAfterUnpaidPrompt, PROMPT_ENDED_CODES, stkResult } from '../../shared/kernel/stk-results.js';
import type { Dice, Model } from './runner.js';

const CODES = ['0', '1', '17', '26', '1001', '1019', '1025', '1032', '1036', '1037', '2001', '9999', '4242'];

interface Prompt {
  /** What the payer's phone did: a ResultCode, '0' paid; null while the prompt is still on the phone. */
  truth: string | null;
}

interface World {
  onramp: { status: 'awaiting_funds' | 'funded' | 'failed'; failure: string | null; prompt: Prompt; credits: number };
  intent: { status: 'awaiting_payment' | 'processing' | 'completed' | 'expired'; attempts: number; expired: boolean; deposits: Set<number> };
  prompts: Prompt[];
}

type Fact =
  | { kind: 'payer'; target: 'onramp' | number; code: string }
  | { kind: 'result'; target: 'onramp' | number }
  | { kind: 'collect' }
  | { kind: 'expire' };

function onrampResult(w: World): void {
  const o = w.onramp;
  const verdict = stkResult(o.prompt.truth!);
  if (verdict.paid) {
    // A success funds it from awaiting_funds, or from failed after any ended prompt (CONTRACT §14, §18); credited once.
    if (o.status === 'awaiting_funds' || (o.status === 'failed' && PROMPT_ENDED_CODES.includes(o.failure as never))) {
      o.status = 'funded';
      o.credits += 1;
    }
    return;
  }
  if (onrampAfterUnpaidPrompt(o.status) === 'failed') {
    o.status = 'failed';
    o.failure = verdict.code;
  }
}

function intentResult(w: World, attempt: number): void {
  const i = w.intent;
  const verdict = stkResult(w.prompts[attempt].truth!);
  const current = i.status === 'processing' && i.attempts === attempt + 1;
  if (verdict.paid) {
    // One deposit per payment, late or not (receipts are unique); the current attempt completes the intent.
    i.deposits.add(attempt);
    if (current) i.status = 'completed';
    return;
  }
  const to = intentAfterUnpaidPrompt({ status: i.status, current, fullyPaid: false, expiresAt: new Date(i.expired ? 0 : 8.64e15) }, new Date(1));
  if (to) i.status = to;
}

export const collectionsModel: Model<World, Fact> = {
  name: 'M-Pesa prompts',
  budget: 30,
  init() {
    return {
      onramp: { status: 'awaiting_funds', failure: null, prompt: { truth: null }, credits: 0 },
      intent: { status: 'processing', attempts: 1, expired: false, deposits: new Set() },
      prompts: [{ truth: null }],
    };
  },
  next(w, d, draining) {
    const options: (() => Fact)[] = [];
    const onPhone: ('onramp' | number)[] = [];
    if (w.onramp.prompt.truth === null) onPhone.push('onramp');
    w.prompts.forEach((p, i) => p.truth === null && onPhone.push(i));
    if (onPhone.length) options.push(() => ({ kind: 'payer', target: d.pick(onPhone), code: d.pick(CODES) }));
    const answered: ('onramp' | number)[] = [];
    if (w.onramp.prompt.truth !== null) answered.push('onramp');
    w.prompts.forEach((p, i) => p.truth !== null && answered.push(i));
    // A result is delivered at least once; while not draining, any number of times more.
    const undelivered = answered.filter((t) => (t === 'onramp' ? w.onramp.status === 'awaiting_funds' : w.intent.status === 'processing' && w.intent.attempts === t + 1));
    if (undelivered.length) options.push(() => ({ kind: 'result', target: d.pick(undelivered) }));
    if (!draining && answered.length) options.push(() => ({ kind: 'result', target: d.pick(answered) }));
    if (!draining && w.intent.status === 'awaiting_payment') options.push(() => ({ kind: 'collect' }));
    if (!draining && !w.intent.expired) options.push(() => ({ kind: 'expire' }));
    return options.length ? d.pick(options)() : null;
  },
  step(w, fact) {
    switch (fact.kind) {
      case 'payer':
        if (fact.target === 'onramp') w.onramp.prompt.truth = fact.code;
        else w.prompts[fact.target].truth = fact.code;
        return;
      case 'result':
        return fact.target === 'onramp' ? onrampResult(w) : intentResult(w, fact.target);
      case 'collect':
        w.intent.status = 'processing';
        w.intent.attempts += 1;
        w.prompts.push({ truth: null });
        return;
      case 'expire':
        w.intent.expired = true;
        if (w.intent.status === 'awaiting_payment') w.intent.status = 'expired';
    }
  },
  check(w, final) {
    const broken: string[] = [];
    const onrampPaid = w.onramp.prompt.truth === '0';
    if (w.onramp.credits > 1) broken.push('the on-ramp was credited twice');
    if (w.onramp.status === 'funded' && !onrampPaid) broken.push('the on-ramp was funded though nobody paid');
    const paidPrompts = w.prompts.map((p, i) => [p, i] as const).filter(([p]) => p.truth === '0').map(([, i]) => i);
    if ([...w.intent.deposits].some((a) => !paidPrompts.includes(a))) broken.push('a deposit for a prompt nobody paid');
    if (final) {
      if (w.onramp.status === 'awaiting_funds') broken.push('the on-ramp still awaits funds after its prompt ended: no exit');
      if (onrampPaid && w.onramp.status !== 'funded') broken.push('the payer paid the on-ramp, which was never funded');
      if (w.intent.status === 'processing') broken.push('the intent is still processing after every prompt ended: no exit');
      if (w.intent.deposits.size !== paidPrompts.length) broken.push(`${paidPrompts.length} prompts paid, ${w.intent.deposits.size} deposits`);
    }
    return broken;
  },
  describe(fact) {
    return JSON.stringify(fact);
  },
};
