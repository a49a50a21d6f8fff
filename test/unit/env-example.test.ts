import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');

describe('.env.example', () => {
  it('names every variable shared/config.ts reads (per-chain ones by their BASE form)', () => {
    const config = readFileSync(join(root, 'shared', 'config.ts'), 'utf8');
    const example = readFileSync(join(root, '.env.example'), 'utf8');
    const read = new Set<string>();
    for (const m of config.matchAll(/env\.([A-Z][A-Z0-9_]+)|int\(env, '([A-Z][A-Z0-9_]+)'|(?:env\[`|`)([A-Z_]+)_\$\{upper\}/g)) read.add(m[1] ?? m[2] ?? `${m[3]}_BASE`);
    expect(read.size, 'the scan found the variables').to.be.greaterThan(40);
    const missing = [...read].filter((name) => !new RegExp(`^# ${name}=`, 'm').test(example));
    expect(missing).to.deep.equal([]);
  });
});
