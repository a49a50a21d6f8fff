import net from 'node:net';
import { testRedisUrl } from '../env.js';

export interface RedisProxy {
  url: string;
  /** Stops relaying in both directions, connections left open: Redis stalls (failover, partition, a blocked server). */
  stall(): void;
  /** Drops every connection, and with it whatever the stall held back; refuses new ones until resume(). */
  cut(): void;
  resume(): void;
  close(): Promise<void>;
}

/** A TCP relay in front of the test Redis that a test can stall and resume, without touching Redis itself. */
export async function startRedisProxy(target = testRedisUrl()): Promise<RedisProxy> {
  return startTcpRelay(target, 6379);
}

/**
 * The same relay in front of any TCP service named by a URL (PostgreSQL too): `url` is the target's URL with the
 * relay's port in its place, so credentials, database and options carry over.
 */
export async function startTcpRelay(target: string, defaultPort: number): Promise<RedisProxy> {
  const upstreamUrl = new URL(target);
  const sockets = new Set<net.Socket>();
  let stalled = false;
  let down = false;
  const server = net.createServer((client) => {
    if (down) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(upstreamUrl.port || defaultPort), upstreamUrl.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      if (stalled) s.pause();
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const relayed = new URL(target);
  relayed.hostname = '127.0.0.1';
  relayed.port = String(port);
  return {
    url: relayed.toString(),
    stall() {
      stalled = true;
      for (const s of sockets) s.pause();
    },
    cut() {
      down = true;
      for (const s of sockets) s.destroy();
    },
    resume() {
      stalled = false;
      down = false;
      for (const s of sockets) s.resume();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
