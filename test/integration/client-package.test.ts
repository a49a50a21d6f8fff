// The typed client as an integrator gets it: `npm pack` in clients/typescript, the tarball installed into a scratch
// project outside the repository, then plain `node` (no tsx, no TypeScript) importing and requiring it against the
// running service, and a consumer's TypeScript checked against the emitted declarations only.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { startWebApi } from '../helpers/service.js';
import { bearer, makeBusiness } from '../helpers/factories.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const CLIENT = join(ROOT, 'clients', 'typescript');
// No loader inherited from the test process: the scratch project runs as an integrator's would.
const PLAIN_ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !k.startsWith('npm_')));

const ESM_SCRIPT = `
import { createRampwayClient, idempotencyKey, isRampwayError, paginate, unwrap } from '@rampway/client';
const api = createRampwayClient({ baseUrl: process.env.RAMPWAY_BASE_URL, apiKey: process.env.RAMPWAY_KEY });
const account = unwrap(await api.GET('/api/v1/business/account'));
const created = [];
for (const n of [1, 2]) {
  const body = { external_reference: 'scratch-' + n + '-' + Date.now(), display_name: 'Scratch ' + n };
  created.push(unwrap(await api.POST('/api/v1/business/customers', { params: { header: { 'Idempotency-Key': idempotencyKey('customer') } }, body })));
}
const listed = [];
for await (const c of paginate((starting_after) => api.GET('/api/v1/business/customers', { params: { query: { limit: 1, starting_after } } }).then(unwrap))) listed.push(c.id);
let error;
try {
  unwrap(await api.GET('/api/v1/business/customers/{id}', { params: { path: { id: '00000000-0000-4000-8000-000000000000' } } }));
} catch (err) {
  error = { rampway: isRampwayError(err), status: err.status, code: err.code, requestId: err.requestId };
}
console.log(JSON.stringify({ account: { id: account.id, environment: account.environment }, created: created.map((c) => ({ id: c.id, wallet: c.wallet.address })), listed, error }));
`;

const CJS_SCRIPT = `
const { createRampwayClient, unwrap } = require('@rampway/client');
createRampwayClient({ baseUrl: process.env.RAMPWAY_BASE_URL, apiKey: process.env.RAMPWAY_KEY })
  .GET('/api/v1/business/account').then(unwrap).then((account) => console.log(JSON.stringify({ id: account.id })));
`;

// Types only: narrowing on direction, and a wrong body that must not compile (the types are not any).
const CONSUMER_TS = `
import { createRampwayClient, idempotencyKey, unwrap, type RampwayError, type Schemas } from '@rampway/client';
const api = createRampwayClient({ baseUrl: 'http://localhost:3000', apiKey: 'svc_test_x' });
export function describe(t: Schemas['Transaction']): string {
  return t.direction === 'offramp' ? t.source.asset + ' on ' + t.source.chain + ' to ' + t.destination.currency : t.source.currency + ' to ' + t.destination.wallet_address;
}
export async function make(): Promise<string> {
  const customer = unwrap(await api.POST('/api/v1/business/customers', { params: { header: { 'Idempotency-Key': idempotencyKey() } }, body: { external_reference: 'x' } }));
  // @ts-expect-error external_reference is required
  await api.POST('/api/v1/business/customers', { params: { header: { 'Idempotency-Key': idempotencyKey() } }, body: { display_name: 'x' } });
  return customer.wallet.address;
}
export const code = (e: RampwayError): string | undefined => e.code;
`;
const CONSUMER_CTS = `
import client = require('@rampway/client');
export const api: client.RampwayClient = client.createRampwayClient({ baseUrl: 'http://localhost:3000', apiKey: 'svc_test_x' });
`;

/** Installs the tarball from the npm cache (the registry only for what it lacks); failing that, lays out the packed files and the repository's copy of its dependencies. */
async function install(app: string, tarball: string): Promise<string> {
  try {
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: app, env: PLAIN_ENV, timeout: 120_000 });
    return 'npm install';
  } catch {
    const target = join(app, 'node_modules', '@rampway', 'client');
    mkdirSync(target, { recursive: true });
    await run('tar', ['xzf', tarball, '-C', target, '--strip-components=1']);
    const fromClient = createRequire(join(CLIENT, 'package.json'));
    for (const dep of ['openapi-fetch', 'openapi-typescript-helpers']) {
      cpSync(dirname(fromClient.resolve(`${dep}/package.json`)), join(app, 'node_modules', dep), { recursive: true, dereference: true });
    }
    return 'copied (no registry)';
  }
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name)));
}

describe('the typed client as a package (npm pack, installed outside the repository, plain node)', function () {
  this.timeout(240_000);
  let web: Awaited<ReturnType<typeof startWebApi>>;
  let baseUrl: string;
  let scratch: string;
  let app: string;

  before(async () => {
    web = await startWebApi();
    baseUrl = web.baseUrl;
    scratch = mkdtempSync(join(tmpdir(), 'rampway-client-'));
    app = join(scratch, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-integrator', version: '1.0.0', private: true, type: 'module' }));

    // prepack builds dist/ with the package's own TypeScript.
    const packed = await run('npm', ['pack', '--pack-destination', scratch, '--json'], { cwd: CLIENT, env: PLAIN_ENV, timeout: 120_000 });
    const tarball = join(scratch, (JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string }[])[0]!.filename);
    console.log(`      client package: ${await install(app, tarball)}`);
  });

  after(async () => {
    await web?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('ships JavaScript, declarations and its README, and no TypeScript source', () => {
    const files = filesUnder(join(app, 'node_modules', '@rampway', 'client'));
    expect(files).to.include.members(['package.json', 'README.md', 'dist/esm/index.js', 'dist/esm/index.d.ts', 'dist/esm/schema.d.ts', 'dist/cjs/index.js', 'dist/cjs/index.d.ts']);
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')), 'TypeScript sources').to.deep.equal([]);
    expect(existsSync(join(app, 'node_modules', 'openapi-fetch', 'package.json')), 'its dependency is installed beside it').to.equal(true);
  });

  it('plain node imports it (ESM) and talks to the service: account, customers, pages, an error', async () => {
    const business = await makeBusiness();
    writeFileSync(join(app, 'smoke.mjs'), ESM_SCRIPT);
    const { stdout } = await run(process.execPath, ['smoke.mjs'], { cwd: app, env: { ...PLAIN_ENV, RAMPWAY_BASE_URL: baseUrl, RAMPWAY_KEY: business.sandboxKey }, timeout: 60_000 });
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(out.account).to.deep.equal({ id: business.businessId, environment: 'sandbox' });
    expect(out.created).to.have.length(2);
    for (const c of out.created) {
      const res = await web.api.http.get(`/api/v1/business/customers/${c.id}`).set(bearer(business.sandboxKey));
      expect(res.status, 'the customer the client created exists').to.equal(200);
      expect(res.body.wallet.address).to.equal(c.wallet);
    }
    // Two pages of one, newest first: the pagination helper followed next_cursor.
    expect(out.listed).to.deep.equal(out.created.map((c: { id: string }) => c.id).reverse());
    expect(out.error).to.include({ rampway: true, status: 404, code: 'not_found' });
    expect(out.error.requestId).to.match(/^[0-9a-f-]{36}$/);
  });

  it('plain node requires it (CommonJS) too', async () => {
    const business = await makeBusiness();
    writeFileSync(join(app, 'smoke.cjs'), CJS_SCRIPT);
    const { stdout } = await run(process.execPath, ['smoke.cjs'], { cwd: app, env: { ...PLAIN_ENV, RAMPWAY_BASE_URL: baseUrl, RAMPWAY_KEY: business.sandboxKey }, timeout: 60_000 });
    expect(JSON.parse(stdout.trim())).to.deep.equal({ id: business.businessId });
  });

  it('a consumer\'s TypeScript (ESM and CommonJS) type-checks against the emitted declarations, with the repository\'s tsc and TypeScript 5', async () => {
    writeFileSync(join(app, 'consumer.ts'), CONSUMER_TS);
    writeFileSync(join(app, 'consumer-cjs.cts'), CONSUMER_CTS);
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'], types: [], strict: true, noEmit: true, skipLibCheck: false },
      files: ['consumer.ts', 'consumer-cjs.cts'],
    }));
    // The repository's (native) tsc also checks the declarations themselves; TypeScript 5 checks the consumer against them (skipLibCheck: 4 s, not 17).
    const typescript5 = createRequire(join(CLIENT, 'package.json')).resolve('typescript/bin/tsc');
    for (const [command, args] of [[join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', app]], [process.execPath, [typescript5, '-p', app, '--skipLibCheck']]] as const) {
      const result = await run(command, [...args], { cwd: app, env: PLAIN_ENV, timeout: 120_000 }).catch((err: { stdout: string; stderr: string }) => expect.fail(`${command} ${args.join(' ')}:\n${err.stdout}${err.stderr}`));
      expect(result.stdout, command).to.equal('');
    }
  });
});
