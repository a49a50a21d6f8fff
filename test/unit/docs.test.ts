import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { DOCS_DIR, generatedBlocks, generatedFiles, render } from '../../scripts/docs-generate.js';
import { ERROR_CODES } from '../../shared/errors.js';
import { guideDescription } from '../../api/openapi/descriptions.js';

const ROOT = resolve(DOCS_DIR, '..');
const markdown = [join(ROOT, 'README.md'), ...readdirSync(DOCS_DIR).filter((f) => f.endsWith('.md')).map((f) => join(DOCS_DIR, f))];

describe('docs/ (the API guide)', () => {
  it('states the code as it is: every generated block (state machines, corridors, error statuses) in every chapter is current', async () => {
    const blocks = await generatedBlocks();
    const files = generatedFiles();
    expect(files, 'the generator finds each chapter with generated blocks').to.include.members(['corridors.md', 'errors.md', 'lifecycles.md', 'webhooks.md']);
    for (const f of files) {
      const text = readFileSync(join(DOCS_DIR, f), 'utf8');
      expect(render(text, blocks) === text, `docs/${f} is stale: run npm run docs:generate`).to.equal(true);
      // An empty block is one the generator never filled.
      for (const [, name, body] of text.matchAll(/<!-- generated:([a-z-]+) -->\n([\s\S]*?)<!-- \/generated -->/g)) {
        expect(body!.trim(), `docs/${f}: block ${name} is empty`).to.not.equal('');
      }
    }
    // Markers the generator's pattern would not match (a typo, a missing newline) are caught too.
    for (const f of readdirSync(DOCS_DIR).filter((n) => n.endsWith('.md'))) {
      const text = readFileSync(join(DOCS_DIR, f), 'utf8');
      const opened = text.match(/<!-- generated:/g)?.length ?? 0;
      const matched = text.match(/<!-- generated:[a-z-]+ -->\n[\s\S]*?<!-- \/generated -->/g)?.length ?? 0;
      expect(matched, `docs/${f}: every generated marker is a well-formed block`).to.equal(opened);
    }
  });

  it('fills a generated block in any chapter, with no list of files to keep', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docs-'));
    try {
      writeFileSync(join(dir, 'new-chapter.md'), '# New\n\n<!-- generated:webhook-endpoint-machine -->\n<!-- /generated -->\n');
      writeFileSync(join(dir, 'plain.md'), '# Plain\n');
      expect(generatedFiles(dir)).to.deep.equal(['new-chapter.md']);
      const filled = render(readFileSync(join(dir, 'new-chapter.md'), 'utf8'), await generatedBlocks());
      expect(filled).to.include('stateDiagram-v2').and.include('[*] --> enabled');
    } finally {
      rmSync(dir, { recursive: true, force: true });
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
      // Nor an address a Markdown renderer would turn into a link by itself (outside code, where addresses are values).
      const prose = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
      expect(prose.match(/(https?:\/\/|www\.)\S+/g), `${file} links outside the repository`).to.equal(null);
    }
  });

  it('README reads in a newcomer\'s order, and what it moved out lives in docs/ chapters it points to', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const sections = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(sections.slice(0, 4)).to.deep.equal(['The two commands', 'Try it with curl', 'How the API behaves', 'Read on']);
    // Nothing stale: the live rails exist, and the walkthrough says how long the off-ramp takes.
    expect(readme).to.not.match(/next parts/);
    expect(readme).to.match(/completed after\s+#?\s*about 14 s/);
    expect(readme).to.include('npm start: ready');
    // The figures moved to their chapters, each linked from README.
    const moved: [string, RegExp][] = [['performance.md', /^\| GET \/account \| \d+ \| 0\.\d+ \|/m], ['reliability.md', /^## The fault-injection run$/m], ['fuzz.md', /FUZZ_SEED=1234 npm run test:fuzz/]];
    for (const [chapter, marker] of moved) {
      expect(readFileSync(join(DOCS_DIR, chapter), 'utf8'), chapter).to.match(marker);
      expect(readme, `README no longer holds ${chapter}'s text`).to.not.match(marker);
      expect(readme, `README points at docs/${chapter}`).to.include(`](docs/${chapter})`);
      expect(readFileSync(join(DOCS_DIR, 'README.md'), 'utf8'), `docs/README.md lists ${chapter}`).to.include(`](${chapter})`);
    }
    expect(readme).to.not.match(/^#+ (Reliability|Performance|Benchmark|Hostile input)/m);
  });

  it('README stays within 400 lines: the live rails moved to docs/going-live.md, operating and every variable to docs/operating.md', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme.trimEnd().split('\n').length).to.be.at.most(400);
    const moved: [string, RegExp][] = [
      ['going-live.md', /^## Live chain$/m], ['going-live.md', /^## Live mobile money \(M-Pesa Daraja\)$/m], ['going-live.md', /^## Live mobile money \(MTN MoMo\)$/m],
      ['operating.md', /^## Configuration$/m], ['operating.md', /^\| `DARAJA_BASE_URL` \|/m], ['operating.md', /rotate-encryption-key/], ['operating.md', /^## Layout$/m],
      ['deploying.md', /^## A Heroku-style app from app\.json$/m], ['deploying.md', /^### Two apps, to keep the seeds off web dynos$/m],
      ['deploying.md', /^## Scaling$/m],
    ];
    for (const [chapter, marker] of moved) {
      expect(readFileSync(join(DOCS_DIR, chapter), 'utf8'), chapter).to.match(marker);
      expect(readme, `README no longer holds ${chapter}'s ${marker}`).to.not.match(marker);
      expect(readme, `README points at docs/${chapter}`).to.include(`](docs/${chapter}`);
      expect(readFileSync(join(DOCS_DIR, 'README.md'), 'utf8'), `docs/README.md lists ${chapter}`).to.include(`](${chapter})`);
    }
  });

  it('every link to a heading (#anchor) names a heading of its file', () => {
    const anchors = (file: string) => new Set([...readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '').matchAll(/^#+ (.+)$/gm)]
      .map((m) => m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-')));
    for (const file of markdown) {
      for (const [, target] of readFileSync(file, 'utf8').matchAll(/\]\(([^)\s]*#[^)\s]+)\)/g)) {
        const [path, anchor] = target!.split('#');
        const linked = path ? resolve(dirname(file), path) : file;
        expect(anchors(linked).has(anchor!), `${file}: ${target} names no heading`).to.equal(true);
      }
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
