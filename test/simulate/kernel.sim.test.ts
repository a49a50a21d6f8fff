// npm run test:simulate (and npm test): every model of the kernel's decisions over SIM_ORDERS seeded fact orders
// (default 10,000 in all), from SIM_SEED (default 1). A failure prints its replayable trace.
import { expect } from 'chai';
import { formatFailure, playMany, type Model } from './runner.js';
import { withdrawalsModel } from './withdrawals.model.js';
import { liquidationModel } from './liquidation.model.js';
import { refundsModel } from './refunds.model.js';
import { collectionsModel } from './collections.model.js';
import { chainSendsModel } from './chain-sends.model.js';
import { payoutsModel } from './payouts.model.js';
import { intentsModel } from './intents.model.js';
import { settlementsModel } from './settlements.model.js';
import { applyInModel, ModelLedger } from './ledger-model.js';
import { plan } from '../../shared/kernel/plan.js';
import { TRANSACTION_MACHINE } from '../../shared/domain/machines.js';

const MODELS: Model<any, any>[] = [withdrawalsModel, liquidationModel, refundsModel, collectionsModel, chainSendsModel, payoutsModel, intentsModel, settlementsModel];
const ORDERS = Number(process.env.SIM_ORDERS ?? 10_000);
const FIRST = Number(process.env.SIM_SEED ?? 1);

describe('kernel simulator: seeded fact orders against the pure decisions', function () {
  this.timeout(120_000);
  const per = Math.max(1, Math.ceil(ORDERS / MODELS.length));
  for (const model of MODELS) {
    it(`${model.name}: ${per} orders from seed ${FIRST} hold every invariant`, () => {
      const failure = playMany(model, FIRST, per);
      if (failure) expect.fail(formatFailure(failure));
    });
  }
});

describe('kernel simulator: the model applies a plan as apply() does', () => {
  it('a row moving along a path: each move from where the one before left it; a move from elsewhere is stale', () => {
    const scope = { businessId: 'b', environment: 'sandbox' as const };
    const move = (from: string, to: string) => ({ machine: TRANSACTION_MACHINE, id: 't1', from, to });
    const path = plan(scope, 'path', { moves: [move('funded', 'processing'), move('processing', 'completed')] });
    const statuses = new Map([['transaction:t1', 'funded']]);
    expect(applyInModel(path, statuses, new ModelLedger(), () => {})).to.equal('applied');
    expect(statuses.get('transaction:t1')).to.equal('completed');
    const fromElsewhere = new Map([['transaction:t1', 'processing']]);
    expect(applyInModel(path, fromElsewhere, new ModelLedger(), () => {})).to.equal('stale');
    expect(fromElsewhere.get('transaction:t1')).to.equal('processing');
  });
});
