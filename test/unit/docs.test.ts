import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { DOCS_DIR, GENERATED_FILES, generatedBlocks, render } from '../../scripts/docs-generate.js';
import { ERROR_CODES } from '../../shared/errors.js';
import { guideDescription } from '../../api/openapi/descriptions.js';

const ROOT = resolve(DOCS_DIR, '..');
const markdown = [join(ROOT, 'README.md'), ...readdirSync(DOCS_DIR).filter((f) => f.endsWith('.md')).map((f) => join(DOCS_DIR, f))];

describe('docs/ (the API guide)', () => {
  it('states the code as it is: every generated block (state machines, corridors, error statuses) is current', async () => {
    const blocks = await generatedBlocks();
    for (const f of GENERATED_FILES) {
      const text = readFileSync(join(DOCS_DIR, f), 'utf8');
      expect(text, `docs/${f} has generated blocks`).to.match(/<!-- generated:/);
      expect(render(text, blocks) === text, `docs/${f} is stale: run npm run docs:generate`).to.equal(true);
    }
  });

  it('explains every error code the service has', () => {
    const errors = readFileSync(join(DOCS_DIR, 'errors.md'), 'utf8');
    const explained = new Set([...errors.matchAll(/^\| `([a-z_]+)` \| /gm)].map((m) => m[1]));
    expect([...explained].sort()).to.deep.equal([...ERROR_CODES].sort());
  });

  it('links only to files inside the repository, each of which exists', () => {
    for (const file of markdown) {
      for (const [, target] of readFileSync(file, 'utf8').matchAll(/\]\(([^)\s]+)\)/g)) {
        expect(target, `${file} links outside the repository`).to.not.match(/^[a-z]+:/i);
        const path = resolve(dirname(file), target!.split('#')[0]!);
        expect(path.startsWith(ROOT + '/'), `${file}: ${target} leaves the repository`).to.equal(true);
        expect(existsSync(path), `${file}: ${target} does not exist`).to.equal(true);
      }
      expect(readFileSync(file, 'utf8'), file).to.not.include('shared/SPEC.md').and.not.include('CONTRACT.md');
    }
  });

  it('carries the chapters that concern every operation into the OpenAPI description', () => {
    const description = guideDescription();
    for (const title of ['# Authentication, environments and keys', '# Idempotency', '# Rate limits', '# Errors', '# Money and amounts', '# Pagination', '# Sandbox: controls, magic values and rates']) {
      expect(description).to.include(title);
    }
    // Links between guide files mean nothing inside the reference page.
    expect(description).to.not.match(/\]\([a-z-]+\.md\)/);
  });
});
