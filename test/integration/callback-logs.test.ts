// CONTRACT 18 (secrets): every provider callback token is masked in every log line, by one rule for every provider
// route, and every provider's callback routes count wrong tokens per address. Read from a real web process's log.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startProcess, stopProcess, type Started } from '../helpers/processes.js';
import { freePort, webEnv } from '../chaos/service.js';
import { darajaEnv, type FakeDaraja } from '../helpers/fake-daraja.js';
import { momoEnv, type FakeMomo } from '../helpers/fake-momo.js';

describe('provider callback tokens in the web process log, and the callback throttle', function () {
  this.timeout(60_000);
  const darajaToken = `cbtok${randomUUID().replace(/-/g, '')}`;
  const momoToken = `momotok${randomUUID().replace(/-/g, '')}`;
  const logFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'rampway-cblog-')), 'web.log');
  let web: Started;
  let base: string;
  let port: number;

  before(async () => {
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // Nothing is asked of the providers here: their addresses only have to parse.
    const nowhere = { url: 'http://127.0.0.1:9' };
    const env = {
      ...(process.env as Record<string, string>), LOG_LEVEL: 'info', PORT: String(port), TRUST_PROXY: '1',
      ...darajaEnv(nowhere as FakeDaraja, 'https://rampway.example', darajaToken), ...momoEnv(nowhere as FakeMomo, 'https://rampway.example', momoToken),
    };
    web = await startProcess('api/main.ts', webEnv(env), 'web listening', [], { logFile });
  });
  after(async () => {
    if (web) await stopProcess(web);
  });

  const call = (method: string, pathAndQuery: string, from = '198.51.100.7', body = '{"Body":{}}') =>
    fetch(`${base}${pathAndQuery}`, { method, headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': from }, body: method === 'GET' ? undefined : body });

  /** A request line in absolute form (`PUT http://host/path`), which Express routes like its path. */
  function absoluteForm(method: string, target: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write(`${method} http://127.0.0.1:${port}${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 198.51.100.8\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
      });
      let answer = '';
      socket.on('data', (d) => (answer += d));
      socket.on('end', () => resolve(answer));
      socket.on('error', reject);
    });
  }

  it('no log line carries a Daraja or MoMo token, whatever the route, method, case or request form', async () => {
    expect((await call('POST', `/providers/daraja/${darajaToken}/stk`)).status).to.equal(200);
    expect((await call('PUT', `/providers/momo/${momoToken}/collection?again=${momoToken}`, undefined, `{"n":"${randomUUID()}"}`)).status).to.equal(200);
    expect((await call('POST', `/providers/momo/${momoToken}/payout`, undefined, `{"n":"${randomUUID()}"}`)).status).to.equal(200);
    // Express matches paths in any letter case: so does the mask.
    expect((await call('PUT', `/PROVIDERS/MOMO/${momoToken}/collection`, undefined, `{"n":"${randomUUID()}"}`)).status).to.equal(200);
    expect(await absoluteForm('PUT', `/providers/momo/${momoToken}/collection`)).to.match(/^HTTP\/1\.1 200/);
    // The right token on a route that does not exist, a method the route does not take, a slash too many.
    expect((await call('PUT', `/providers/momo/${momoToken}/nothing`)).status).to.equal(404);
    expect((await call('GET', `/providers/momo/${momoToken}/collection`)).status).to.equal(404);
    expect((await call('POST', `/providers/daraja//${darajaToken}/stk`)).status).to.equal(404);
    // Let the log reach the file.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const log = readFileSync(logFile, 'utf8');
    const lines = log.split('\n').filter((l) => l.includes('"path"'));
    expect(lines.filter((l) => l.includes('/providers/momo/[token]') || l.includes('/PROVIDERS/MOMO/[token]')).length, log).to.be.at.least(6);
    expect(lines.some((l) => l.includes('/providers/daraja/[token]'))).to.equal(true);
    expect(log, 'a MoMo token in the log').not.to.contain(momoToken);
    expect(log, 'a Daraja token in the log').not.to.contain(darajaToken);
    // Every line is pino JSON.
    for (const line of log.split('\n').filter(Boolean)) expect(() => JSON.parse(line), line).not.to.throw();
  });

  it('20 wrong tokens per address per minute on any provider route, then 429 before the token is compared', async () => {
    const guesser = '2001:db8:77::1';
    for (let i = 0; i < 20; i++) {
      const route = i % 2 ? `/providers/daraja/guess${i}/stk` : `/providers/momo/guess${i}/collection`;
      expect((await call(i % 2 ? 'POST' : 'PUT', route, guesser)).status, `guess ${i}`).to.equal(404);
    }
    for (const [method, route] of [['PUT', `/providers/momo/guess/collection`], ['PUT', `/providers/momo/${momoToken}/collection`], ['POST', `/providers/daraja/${darajaToken}/stk`]]) {
      const res = await call(method, route, guesser, `{"n":"${randomUUID()}"}`);
      expect(res.status, route.replace(momoToken, '[token]').replace(darajaToken, '[token]')).to.equal(429);
      expect(Number(res.headers.get('retry-after'))).to.be.within(1, 60);
      expect((await res.json()).error.code).to.equal('rate_limited');
    }
    // The provider's own address is unaffected.
    expect((await call('PUT', `/providers/momo/${momoToken}/collection`, '198.51.100.9', `{"n":"${randomUUID()}"}`)).status).to.equal(200);
  });
});
