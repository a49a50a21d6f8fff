// app.json describes the app for a Heroku-style platform (issue 38). It is checked against the shape of Heroku's
// published app.json schema (Dev Center "app.json Schema", JSON Schema draft-07; restated here, no network), against
// the Procfile, and against the configuration the processes read, so none of them can drift from the others.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import formats from 'ajv-formats';
import { loadConfig } from '../../shared/config.js';
import { needsOf, PROCESSES, type ProcessName, type SettingName } from '../../shared/config-processes.js';

const root = join(import.meta.dirname, '..', '..');
const app = JSON.parse(readFileSync(join(root, 'app.json'), 'utf8'));
const procfile = readFileSync(join(root, 'Procfile'), 'utf8').trim().split('\n').map((l) => l.slice(0, l.indexOf(':')));

const DYNO_SIZES = ['eco', 'basic', 'standard-1x', 'standard-2x', 'performance-m', 'performance-l', 'performance-l-ram', 'performance-xl', 'performance-2xl',
  'private-s', 'private-m', 'private-l', 'shield-s', 'shield-m', 'shield-l'];
const APP_JSON_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 3, maxLength: 30 },
    description: { type: 'string', maxLength: 140 },
    keywords: { type: 'array', items: { type: 'string' } },
    website: { type: 'string', format: 'uri' },
    repository: { type: 'string', format: 'uri' },
    logo: { type: 'string', format: 'uri' },
    success_url: { type: 'string' },
    scripts: { type: 'object', properties: { postdeploy: { type: 'string' }, 'pr-predestroy': { type: 'string' } }, additionalProperties: false },
    env: {
      type: 'object',
      additionalProperties: false,
      patternProperties: {
        '^[A-Z][A-Z0-9_]*$': {
          type: 'object',
          additionalProperties: false,
          properties: { description: { type: 'string' }, value: { type: 'string' }, required: { type: 'boolean' }, generator: { enum: ['secret'] } },
        },
      },
    },
    formation: {
      type: 'object',
      additionalProperties: false,
      patternProperties: {
        '^[a-zA-Z0-9_-]+$': {
          type: 'object',
          required: ['quantity'],
          additionalProperties: false,
          properties: { quantity: { type: 'integer', minimum: 0 }, size: { enum: DYNO_SIZES } },
        },
      },
    },
    addons: {
      type: 'array',
      items: {
        oneOf: [
          { type: 'string' },
          { type: 'object', required: ['plan'], additionalProperties: false, properties: { plan: { type: 'string' }, as: { type: 'string' }, options: { type: 'object' } } },
        ],
      },
    },
    buildpacks: { type: 'array', items: { type: 'object', required: ['url'], additionalProperties: false, properties: { url: { type: 'string' } } } },
    environments: { type: 'object' },
    stack: { enum: ['heroku-22', 'heroku-24'] },
    image: { type: 'string' },
  },
};

/** Every variable the configuration reads, whichever process reads it. */
function variablesRead(): Set<string> {
  const read = new Set<string>();
  const env = new Proxy({} as NodeJS.ProcessEnv, { get: (_t, name) => (typeof name === 'string' && read.add(name), undefined) });
  loadConfig(env, { walletSeeds: true });
  loadConfig(env);
  return read;
}
// Set by the add-ons (Heroku Postgres as DATABASE, Heroku Redis as REDIS), not by the operator.
const FROM_ADDONS: Record<string, string> = { DATABASE_URL: 'heroku-postgresql', REDIS_URL: 'heroku-redis' };
// Read only by tests and local development; production refuses both, so a deployment never sets them.
const NEVER_IN_PRODUCTION = ['RAMPWAY_TEST_LIVE_CHAIN', 'WEBHOOKS_ALLOW_LOOPBACK'];
// Only the settlement pool reads them, and it may run as a second app (docs/deploying.md, Two apps).
const SECOND_APP_ONLY: SettingName[] = ['WALLET_SEED', 'WALLET_SEED_LIVE'];

// Heroku's own JSON Schema (draft-07) of app.json, copied unchanged from heroku/heroku-mcp-server
// (src/utils/app-json.schema.json, Apache License 2.0, Copyright (c) 2025 Heroku), which validates app.json with it.
const HEROKU_SCHEMA = JSON.parse(readFileSync(join(import.meta.dirname, 'heroku-app-json.schema.json'), 'utf8'));

describe('app.json', () => {
  it("has the shape of Heroku's published app.json schema", () => {
    const ajv = new Ajv({ allErrors: true, strict: true });
    formats.default(ajv);
    const valid = ajv.validate(APP_JSON_SCHEMA, app);
    expect(valid, ajv.errorsText()).to.equal(true);
  });

  it("validates against Heroku's own app.json JSON Schema, which refuses what the platform would", () => {
    const ajv = new Ajv({ allErrors: true, strict: true });
    formats.default(ajv);
    const validate = ajv.compile(HEROKU_SCHEMA);
    expect(validate(app), ajv.errorsText(validate.errors)).to.equal(true);
    // The schema has teeth: a formation without a quantity, an unknown dyno size, a variable entry with a field the
    // platform does not know, and an add-on object without its plan are each refused.
    const broken = (change: (a: typeof app) => void) => {
      const copy = structuredClone(app);
      change(copy);
      return validate(copy);
    };
    expect(broken((a) => delete a.formation.web.quantity)).to.equal(false);
    expect(broken((a) => (a.formation.web.size = 'huge'))).to.equal(false);
    expect(broken((a) => (a.env.NODE_ENV.default = 'production'))).to.equal(false);
    expect(broken((a) => a.addons.push({ as: 'CACHE' }))).to.equal(false);
  });

  it('scales every Procfile process (the release phase runs on each deploy, it is no dyno)', () => {
    expect(Object.keys(app.formation).sort()).to.deep.equal(procfile.filter((p) => p !== 'release').sort());
    // Every pool once: the separate pools, or `worker` (all of them in one dyno), never both.
    const running = (p: string) => app.formation[p].quantity > 0;
    expect(running('worker') ? PROCESSES.filter((p) => p !== 'web' && p !== 'release' && running(p)) : [], 'worker beside its pools').to.deep.equal([]);
    expect(running('web')).to.equal(true);
  });

  it('adds Heroku Postgres and Heroku Redis, which set DATABASE_URL and REDIS_URL', () => {
    const plans = app.addons.map((a: string | { plan: string; as?: string }) => (typeof a === 'string' ? { plan: a } : a));
    for (const [variable, plan] of Object.entries(FROM_ADDONS)) {
      const addon = plans.find((a: { plan: string }) => a.plan.split(':')[0] === plan);
      expect(addon, plan).to.not.equal(undefined);
      expect(`${addon.as ?? plan.replace('heroku-', '').toUpperCase()}_URL`).to.equal(variable);
    }
  });

  it('describes every variable the processes read, and nothing they do not', () => {
    const read = variablesRead();
    const described = new Set([...Object.keys(app.env), ...Object.keys(FROM_ADDONS), ...NEVER_IN_PRODUCTION]);
    expect([...read].filter((n) => !described.has(n)), 'read but not in app.json').to.deep.equal([]);
    expect([...described].filter((n) => !read.has(n)), 'in app.json but never read').to.deep.equal([]);
    for (const [name, entry] of Object.entries(app.env) as [string, { description?: string }][]) expect(entry.description, name).to.be.a('string').and.not.equal('');
  });

  it('requires exactly what config-check names for the processes it scales, with a generated secret where one fits', () => {
    // Heroku requires an env entry that does not say (app-setups, "required by default"): each one says.
    for (const [name, entry] of Object.entries(app.env) as [string, { required?: unknown }][]) expect(entry.required, name).to.be.a('boolean');
    const scaled = Object.entries(app.formation).filter(([, f]) => (f as { quantity: number }).quantity > 0).map(([p]) => (p === 'worker' ? PROCESSES.filter((x) => x !== 'web' && x !== 'release') : [p]));
    const needed = new Set([...needsOf(['release']), ...scaled.flatMap((ps) => ps.flatMap((p) => needsOf([p as ProcessName])))].filter((n) => !(n in FROM_ADDONS)));
    // The seeds are the settlement pool's alone, and the API app of docs/deploying.md's two-app split is created from
    // this app.json without them (settlement runs in the second app): a required seed would make the platform demand
    // one there. The settlement dyno still refuses to start without them, and config-check names them.
    for (const seed of SECOND_APP_ONLY) {
      expect(needed.has(seed), `${seed}: the settlement pool needs it`).to.equal(true);
      needed.delete(seed);
      expect(app.env[seed].description, seed).to.match(/second app|see WALLET_SEED/);
    }
    const required = Object.entries(app.env).filter(([, e]) => (e as { required?: boolean }).required).map(([n]) => n);
    expect(required.sort()).to.deep.equal([...needed].sort());
    expect(app.env.NODE_ENV.value).to.equal('production');
    expect(app.env.IDEMPOTENCY_SECRET.generator).to.equal('secret');
  });
});
