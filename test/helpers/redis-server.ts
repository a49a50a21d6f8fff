// A throwaway Redis of our own on a spare port, no persistence: a test may restart it empty (SHUTDOWN NOSAVE) without
// touching the shared Redis other runs use.
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './processes.js';

export interface OwnRedis {
  url: string;
  /** SHUTDOWN NOSAVE, then a new, empty server on the same port. Answers how many keys were lost. */
  restartEmpty(): Promise<number>;
  stop(): Promise<void>;
}

export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', '/tmp'], { stdio: 'ignore' });
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined);
    for (let i = 0; ; i++) {
      try {
        await probe.connect();
        await probe.ping();
        break;
      } catch (err) {
        if (i > 100) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    probe.disconnect();
  };
  const stopped = () => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
  await start();
  return {
    url,
    async restartEmpty() {
      const admin = new Redis(url, { maxRetriesPerRequest: 0 });
      const keys = await admin.dbsize();
      await admin.call('SHUTDOWN', 'NOSAVE').catch(() => undefined); // the connection closes as it answers
      admin.disconnect();
      await stopped();
      await start();
      return keys;
    },
    async stop() {
      child.kill('SIGTERM');
      await stopped();
    },
  };
}
