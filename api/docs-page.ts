import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Express } from 'express';

// The API reference: Redoc's standalone bundle, served from node_modules, rendering the document at /openapi.json.
export const DOCS_PATH = '/docs';
export const DOCS_ASSETS = '/docs/assets';
const BUNDLE_FILE = 'redoc.standalone.js';

// Two exact rewrites of the bundle, so that it asks nothing of any other host and needs no 'unsafe-inline':
const REWRITES: Array<[string, string]> = [
  // The sidebar's "API docs by Redocly" logo is the one outside URL it loads. An empty src fetches nothing and makes
  // Redoc drop the image (its onError), leaving the link text.
  ['src:"https://cdn.redoc.ly/redoc/logo-mini.svg"', 'src:""'],
  // Webpack's CSP nonce for the <style> elements the bundle injects, read from the bundle's own <script nonce>. Redoc's
  // `nonce` option sets it only once Redoc starts, after the bundle has already injected perfect-scrollbar's CSS.
  ['r.nc=void 0;', 'r.nc=(document.currentScript||{}).nonce||void 0;'],
];

let bundle: Buffer | undefined;
/**
 * Read once, on first use: buildApp runs many times in tests and most of them never open the docs. A rewrite whose
 * text a newer Redoc no longer has is skipped; test/integration/docs-page.test.ts then fails on what it let through.
 */
function redocBundle(): Buffer {
  if (!bundle) {
    const file = createRequire(import.meta.url).resolve(`redoc/bundles/${BUNDLE_FILE}`);
    bundle = Buffer.from(REWRITES.reduce((text, [from, to]) => text.replace(from, to), readFileSync(file, 'utf8')));
  }
  return bundle;
}

/**
 * default-src 'none': nothing loads unless listed. script-src 'self': the bundle, from us; no inline script.
 * style-src 'self' 'nonce-...': Redoc (styled-components, perfect-scrollbar) injects its CSS as <style> elements, which
 * carry this response's nonce; no 'unsafe-inline'. connect-src 'self': the bundle fetches /openapi.json.
 * img-src 'self' data:: Redoc's icons are SVGs inlined in its CSS as data: URLs (nothing is fetched).
 * worker-src blob:: Redoc's search runs in a worker whose code ships inside the bundle and starts from a blob: URL the
 * page makes itself (memory of this page, never a host); without it search finds nothing.
 * The rest shuts what the page never uses (forms, <base>, framing by other sites).
 */
function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    `style-src 'self' 'nonce-${nonce}'`,
    "img-src 'self' data:",
    "connect-src 'self'",
    'worker-src blob:',
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

// Redoc starts itself on the <redoc> element (options as attributes): no inline script. The nonce on the bundle's tag
// is what its <style> elements carry (see REWRITES).
function page(title: string, specUrl: string, nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style nonce="${nonce}">body { margin: 0; }</style>
</head>
<body>
<div><redoc spec-url="${specUrl}" expand-responses="200,201,202"></redoc></div>
<script src="${DOCS_ASSETS}/${BUNDLE_FILE}" nonce="${nonce}"></script>
</body>
</html>
`;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** GET /docs (no API key, like /openapi.json) and the Redoc bundle it loads, rendering the document at `specUrl`. */
export function mountDocsPage(app: Express, options: { title: string; specUrl: string }): void {
  const title = escapeHtml(`${options.title} reference`);
  const specUrl = escapeHtml(options.specUrl);
  app.get(DOCS_PATH, (_req, res) => {
    const nonce = randomBytes(16).toString('base64');
    res.setHeader('Content-Security-Policy', contentSecurityPolicy(nonce));
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.type('html').send(page(title, specUrl, nonce));
  });
  app.get(`${DOCS_ASSETS}/${BUNDLE_FILE}`, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.type('text/javascript').send(redocBundle());
  });
}
