// GET /docs in a real browser (Debian's Chromium, driven by playwright-core): it renders every operation of
// /openapi.json, logs no error, fails no request and asks nothing of any host but ours.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { chromium, type Browser } from 'playwright-core';
import { startWebApi } from '../helpers/service.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const SCREENSHOT = join(import.meta.dirname, '..', 'artifacts', 'docs.png');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

interface Operation {
  label: string;
  operationId?: string;
  summary?: string;
}
type OpenApi = { paths: Record<string, Record<string, { operationId?: string; summary?: string }>> };

function operationsOf(doc: OpenApi): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((m) => ({ label: `${m.toUpperCase()} ${path}`, operationId: item[m].operationId, summary: item[m].summary })),
  );
}

describe('GET /docs: the API reference page', function () {
  this.timeout(90_000);
  let web: Awaited<ReturnType<typeof startWebApi>>;
  let origin: string;
  let browser: Browser;

  before(async () => {
    web = await startWebApi();
    origin = web.baseUrl;
  });

  after(async () => {
    await browser?.close();
    await web?.close();
  });

  it('answers without an API key, with a Content-Security-Policy that allows nothing outside the service', async () => {
    const res = await fetch(`${origin}/docs`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).to.include("default-src 'none'").and.include("script-src 'self'").and.include("connect-src 'self'");
    expect(csp).to.not.match(/unsafe-inline|unsafe-eval|https?:|\*/);
    for (const asset of ['/docs/assets/redoc.standalone.js']) {
      const js = await fetch(`${origin}${asset}`);
      expect(js.status, asset).to.equal(200);
      expect(js.headers.get('content-type'), asset).to.match(/^text\/javascript/);
    }
  });

  it('renders every operation of /openapi.json in Chromium, with no error, no failed request and no outside request', async () => {
    try {
      browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, timeout: 30_000 });
    } catch (err) {
      // A failure, never a skip: .ci/run installs Chromium, so a missing one is a broken machine.
      expect.fail(`cannot launch Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH): ${(err as Error).message}`);
    }
    const operations = operationsOf((await (await fetch(`${origin}/openapi.json`)).json()) as OpenApi);
    expect(operations.length, 'operations in /openapi.json').to.be.greaterThan(0);

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const problems: string[] = [];
    const outside: string[] = [];
    // Anything not ours is recorded and never sent, so the test neither leaks nor waits on a network it lacks.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (new URL(url).origin === origin) return route.continue();
      outside.push(url);
      return route.abort('blockedbyclient');
    });
    context.on('request', (req) => {
      const url = new URL(req.url());
      if (url.protocol !== 'data:' && url.origin !== origin) outside.push(req.url());
    });
    context.on('requestfailed', (req) => problems.push(`request failed: ${req.url()} (${req.failure()?.errorText})`));
    context.on('response', (res) => res.status() >= 400 && problems.push(`HTTP ${res.status()}: ${res.url()}`));
    context.on('weberror', (err) => problems.push(`page error: ${err.error().message}`));
    context.on('console', (msg) => msg.type() === 'error' && problems.push(`console error: ${msg.text()}`));
    // The CSP's own report, in case a blocked load ever stops being logged to the console.
    await context.exposeBinding('reportCspViolation', (_source, text: string) => problems.push(`CSP violation: ${text}`));
    await context.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (e) =>
        (window as unknown as { reportCspViolation(t: string): void }).reportCspViolation(`${e.effectiveDirective} blocked ${e.blockedURI}`),
      );
    });

    let missing: string[] = [];
    let sample = '';
    try {
      const page = await context.newPage();
      const response = await page.goto(`${origin}/docs`, { waitUntil: 'networkidle' });
      expect(response?.status()).to.equal(200);

      // Redoc gives each operation a section (data-section-id ending in operation/<operationId>) with its summary.
      const ids = operations.map((op) => op.operationId).filter((id): id is string => Boolean(id));
      await page
        .waitForFunction((n) => document.querySelectorAll('[data-section-id*="operation/"]').length >= n, ids.length, { timeout: 30_000 })
        .catch(() => undefined); // the comparison below names what is missing
      const rendered = await page.$$eval('[data-section-id*="operation/"]', (els) =>
        els.map((el) => ({ id: el.getAttribute('data-section-id')!.replace(/^.*operation\//, ''), text: el.textContent ?? '' })),
      );
      const byId = new Map<string, string>();
      for (const r of rendered) byId.set(r.id, `${byId.get(r.id) ?? ''}\n${r.text}`);
      missing = operations
        .filter((op) => {
          const text = op.operationId ? byId.get(op.operationId) : rendered.find((r) => op.summary && r.text.includes(op.summary))?.text;
          return text === undefined || (op.summary !== undefined && !text.includes(op.summary));
        })
        .map((op) => `${op.label} (${op.operationId ?? 'no operationId'}: ${op.summary ?? 'no summary'})`);
      // A transaction's response sample: the document's example of each direction.
      sample = byId.get('getTransaction') ?? '';

      // Search runs in Redoc's worker (worker-src blob:): it must answer under the CSP too.
      const probe = operations.find((op) => op.summary)?.summary;
      if (probe) {
        await page.fill('input[placeholder="Search..."]', probe);
        await page.locator('[data-role="search:results"] li, [role="search"] [data-item-id]').first().waitFor({ timeout: 10_000 });
      }

      mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
      await page.fill('input[placeholder="Search..."]', '');
      await page.screenshot({ path: SCREENSHOT });
    } finally {
      await context.close();
    }
    expect(outside, 'requests to hosts other than the service').to.deep.equal([]);
    expect(problems, 'console errors and failed requests').to.deep.equal([]);
    expect(missing, 'operations the page does not show').to.deep.equal([]);
    // Redoc offers both shapes (by direction) and shows the off-ramp example: real amounts, not "string".
    expect(sample).to.match(/Response samples[\s\S]*Example\s*offramp\s*onramp/);
    expect(sample).to.include('"total_required": "101.500000"').and.include('"amount": "12935.00"').and.not.include('"amount": "string"');
  });
});
