import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');
const read = (file: string) => JSON.parse(readFileSync(join(root, file), 'utf8'));

// npm 11 lists every dependency whose install script package.json's `allowScripts` does not cover (and npm 12 skips
// them). Each one in the lockfile is decided here, so `npm install` prints no such warning and runs what it needs.
describe('install scripts (package.json allowScripts)', () => {
  const allow: Record<string, boolean> = read('package.json').allowScripts;
  const lock: { packages: Record<string, { hasInstallScript?: boolean }> } = read('package-lock.json');
  const withScripts = Object.entries(lock.packages)
    .filter(([path, p]) => path !== '' && p.hasInstallScript)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));

  it('decides every dependency with an install script, by name, and names none that has left the lockfile', () => {
    expect(withScripts, 'the lockfile has install scripts').to.not.be.empty;
    expect([...new Set(withScripts)].sort()).to.deep.equal(Object.keys(allow).sort());
    for (const [name, allowed] of Object.entries(allow)) expect(allowed, name).to.be.a('boolean');
  });

  it('runs only the scripts that put binaries in place: esbuild (tsx) and Anvil (the test chain)', () => {
    expect(Object.keys(allow).filter((name) => allow[name]).sort()).to.deep.equal(['@foundry-rs/anvil', 'esbuild']);
  });
});
