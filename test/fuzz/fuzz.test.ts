// Hostile input, generated from the OpenAPI document the service serves: every operation in it is fuzzed.
// `npm test` runs a bounded pass (every operation x every kind of input); `npm run test:fuzz` a long one.
// FUZZ_SEED replays a run; FUZZ_REQUESTS sets the long run's size; FUZZ_PER_KIND the bounded run's repeats.
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { startApi, type ApiHarness } from '../helpers/harness.js';
import { makeBusiness, makeKey } from '../helpers/factories.js';
import { httpServer } from '../../api/http-server.js';
import { BUSINESS_BASE } from '../../api/routes/route.js';
import { reproduction, runFuzz, type FuzzReport } from './runner.js';
import { kindsFor } from './kinds.js';
import type { OpenApi } from './operations.js';
import { startAnvil, type Anvil } from '../helpers/chain.js';
import { CHAIN_IDS, CHAINS } from '../../shared/domain/chains.js';
import { getConfig } from '../../shared/config.js';
import { startPools, type RunningPools } from '../helpers/workers.js';

const LONG = process.env.FUZZ_MODE === 'long';
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31);
// Operations whose success needs a resource in one particular state (an unused quote of the right direction, an
// off-ramp rather than an on-ramp, a transaction waiting for a transfer, stalled in action_required or holding USDC) or a proof no
// generator can make up (a wallet's signature). The fuzz still requires them to reach their handler; their 2xx paths
// have their own integration tests.
const NEEDS_STATE_OR_PROOF = new Set([
  'verifyWallet', 'createOfframp', 'createOnramp', 'getTransactionSettlement', 'retryTransaction', 'refundTransaction', 'confirmTransaction', 'sandboxTransfer', 'sandboxSimulateTransaction',
  // An intent still awaiting payment (and accepting the method): other fuzzed requests cancel, collect and pay them first.
  'collectPaymentIntent', 'cancelPaymentIntent', 'sandboxPayPaymentIntent',
  // A withdrawal goes only to a wallet whose ownership was proven (a signature), from a funded treasury.
  'createTreasuryWithdrawal', 'getTreasuryWithdrawal',
  // A payout batch is paid from a treasury holding every item's USDC, to beneficiaries the items must all name rightly.
  'createPayoutBatch', 'getPayoutBatch',
]);
// Codes answered before an operation's handler runs: an answer with only these never reached the handler.
const BEFORE_HANDLER = new Set(['invalid_request', 'idempotency_key_required', 'invalid_idempotency_key', 'idempotency_key_reused', 'idempotency_key_in_use',
  'unauthorized', 'insufficient_scope', 'payload_too_large', 'rate_limited']);

describe(`hostile input fuzzed from the OpenAPI document (${LONG ? 'long' : 'bounded'}, seed ${SEED})`, function () {
  this.timeout(LONG ? 0 : 240_000);
  let api: ApiHarness;
  let server: ReturnType<typeof httpServer>;
  let url: URL;
  let report: FuzzReport;
  let key: string;
  let anvils: Anvil[] = [];
  let pools: RunningPools | undefined;

  before(async () => {
    // Real chains behind every RPC the service may call (a contract-wallet signature check), each with its chain's id.
    anvils = await Promise.all(CHAINS.map((chain) => startAnvil({ chainId: CHAIN_IDS[chain] })));
    const rpc = Object.fromEntries(CHAINS.map((chain, i) => [`RPC_URL_${chain.toUpperCase()}`, anvils[i].rpcUrl]));
    // Failed authentication is part of the fuzz: the per-IP limit on it is tested on its own (auth tests), and the
    // fuzz's failures are counted under its own Redis prefix so they never lock other test files out.
    const env = { ...rpc, AUTH_FAIL_LIMIT: '100000000', REDIS_PREFIX: `${getConfig().redisPrefix}-fuzz`, WEBHOOKS_ALLOW_LOOPBACK: 'true' };
    api = await startApi({ env });
    // Every pool runs beside the web process, as in production: quotes get priced, transactions move.
    pools = await startPools(['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'], { env });
    server = httpServer(api.app, api.deps.log);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const business = await makeBusiness();
    key = (await makeKey(business.businessId, { environment: 'sandbox', rateLimit: 2_000_000_000 })).key;
    console.log(`      fuzz seed ${SEED}: replay with FUZZ_SEED=${SEED} ${LONG ? 'npm run test:fuzz' : 'npx mocha test/fuzz/fuzz.test.ts'}`);
  });

  after(async () => {
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    await pools?.close();
    await api?.close();
    await Promise.all(anvils.map((a) => a.stop()));
  });

  it('answers every generated request without a 5xx, an undeclared status, a broken envelope or a hang', async () => {
    const doc = (await (await fetch(new URL('/openapi.json', url))).json()) as OpenApi;
    const started = Date.now();
    report = await runFuzz({
      doc,
      base: BUSINESS_BASE,
      url,
      key,
      seed: SEED,
      mode: LONG ? 'long' : 'bounded',
      perKind: Number(process.env.FUZZ_PER_KIND ?? 3),
      requests: Number(process.env.FUZZ_REQUESTS ?? 100_000),
      timeoutMs: 15_000,
      onProgress: LONG ? (n) => n % 1000 === 0 && console.log(`      ${n} requests, ${Math.round((Date.now() - started) / 1000)} s`) : undefined,
    });
    if (process.env.FUZZ_DEBUG) for (const [id, c] of report.coverage) console.log(id, JSON.stringify([...c.statuses]), [...c.codes].join(','));
    console.log(`      ${report.sent} requests over ${report.operations.length} operations in ${Math.round((Date.now() - started) / 1000)} s`);
    if (report.findings.length) {
      const shown = report.findings.slice(0, 10).map((f, i) =>
        `#${i + 1} ${f.request.op.id} [${f.request.kind}] -> ${f.answer.status}: ${f.problems.join('; ')}\n    answer: ${f.answer.body.slice(0, 300)}\n    ${reproduction(url, f.request, key)}`,
      );
      expect.fail(`${report.findings.length} findings (seed ${SEED}; replay with FUZZ_SEED=${SEED}):\n${shown.join('\n\n')}`);
    }
  });

  it('reached every operation in the document with every kind of input it admits', () => {
    expect(report, 'the fuzz ran').to.not.equal(undefined);
    for (const op of report.operations) {
      const seen = report.coverage.get(op.id)!;
      if (!LONG) expect([...seen.kinds].sort(), `${op.id}: kinds sent`).to.deep.equal(kindsFor(op).map((k) => k.name).sort());
      if (LONG) continue;
      const succeeded = [...seen.statuses.keys()].some((s) => s >= 200 && s < 300);
      const handled = succeeded || [...seen.codes].some((c) => !BEFORE_HANDLER.has(c));
      expect(handled, `${op.id} never reached its handler (statuses: ${JSON.stringify([...seen.statuses])}, codes: ${[...seen.codes]})`).to.equal(true);
      if (!NEEDS_STATE_OR_PROOF.has(op.id)) expect(succeeded, `${op.id} never answered 2xx (statuses: ${JSON.stringify([...seen.statuses])})`).to.equal(true);
    }
  });

  it('is still ready afterwards', async () => {
    const res = await fetch(new URL('/ready', url));
    expect(res.status).to.equal(200);
  });
});
