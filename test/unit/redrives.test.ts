import { expect } from 'chai';
import { TRANSACTION_MACHINE, TRANSACTION_STATUSES } from '../../shared/domain/machines.js';
import { STUCK_RULES, TRANSACTION_REDRIVES } from '../../shared/domain/stuck.js';

describe('the sweeper\'s table: every transaction status that is not terminal has a way on', () => {
  // Waits on a person, never on a job: the business retries or refunds.
  const PERSON = ['action_required'];

  it('each non-terminal status, for each direction and environment, is re-driven by exactly one row', () => {
    const open = TRANSACTION_STATUSES.filter((s) => TRANSACTION_MACHINE.moves[s] && s !== 'failed' && !PERSON.includes(s));
    expect(open).to.have.members(['created', 'awaiting_funds', 'funded', 'signing', 'submitting', 'processing']);
    for (const status of open) {
      for (const direction of ['offramp', 'onramp'] as const) {
        for (const environment of ['sandbox', 'live'] as const) {
          const rows = TRANSACTION_REDRIVES.filter((r) => r.statuses.includes(status) && (!r.direction || r.direction === direction) && (!r.environment || r.environment === environment));
          expect(rows, `${environment} ${direction} ${status}`).to.have.length(1);
        }
      }
    }
  });

  it('a row names the job that moves its state on, under the id the step\'s own job had', () => {
    const tx = { id: '00000000-0000-4000-8000-000000000001', retry_count: 2, environment: 'live' as const, funding_type: 'managed_wallet' };
    const jobOf = (status: (typeof TRANSACTION_STATUSES)[number], direction: 'offramp' | 'onramp') =>
      TRANSACTION_REDRIVES.find((r) => r.statuses.includes(status) && (!r.direction || r.direction === direction) && (!r.environment || r.environment === 'live'))!
        .job({ ...tx, status, direction })?.name;
    expect(jobOf('signing', 'offramp')).to.equal('offramp.submit');
    expect(jobOf('submitting', 'offramp')).to.equal('offramp.submit');
    expect(jobOf('awaiting_funds', 'offramp')).to.equal('settlement.confirm');
    expect(jobOf('funded', 'offramp')).to.equal('payout.send');
    expect(jobOf('processing', 'offramp')).to.equal('provider.check');
    expect(jobOf('created', 'onramp')).to.equal('collection.request');
    expect(jobOf('awaiting_funds', 'onramp')).to.equal('provider.check');
    expect(jobOf('funded', 'onramp')).to.equal('onramp.deliver');
    expect(jobOf('processing', 'onramp')).to.equal('onramp.deliver');
  });

  it('money owed after a transaction ended is re-driven too: refunds, and sweeps in flight', () => {
    expect(STUCK_RULES.map((r) => r.name)).to.include.members(['refund sends still pending', 'sweeps sent and not yet mined']);
  });
});
