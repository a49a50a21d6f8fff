// A webhook receiver that verifies every delivery's signature (Standard Webhooks) before trusting it, and skips
// events it has already handled (delivery is at least once).
//   RAMPWAY_WEBHOOK_SECRET=whsec_... [PORT=4000] npx tsx examples/webhook-receiver.ts
// Register its URL with POST /api/v1/business/webhook-endpoints; the answer's `secret` is shown once.
import { pathToFileURL } from 'node:url';
import { createServer, type Server } from 'node:http';
import { Webhook } from 'standardwebhooks';

export interface RampwayEvent {
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown> & { id?: string; status?: string };
}

export function startReceiver(options: { secret: string; port?: number; host?: string; onEvent: (event: RampwayEvent) => void }): Promise<Server> {
  const webhook = new Webhook(options.secret);
  const seen = new Set<string>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let event: RampwayEvent;
      try {
        // The raw body, byte for byte: parsing and re-serialising would break the signature.
        event = webhook.verify(Buffer.concat(chunks).toString('utf8'), req.headers as Record<string, string>) as RampwayEvent;
      } catch {
        res.writeHead(400).end();
        return;
      }
      if (!seen.has(event.id)) {
        seen.add(event.id);
        options.onEvent(event);
      }
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) => server.listen(options.port ?? 4000, options.host ?? '127.0.0.1', () => resolve(server)));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const secret = process.env.RAMPWAY_WEBHOOK_SECRET;
  if (!secret) {
    console.error('Set RAMPWAY_WEBHOOK_SECRET to the endpoint\'s whsec_... secret.');
    process.exit(2);
  }
  const server = await startReceiver({ secret, port: Number(process.env.PORT ?? 4000), onEvent: (e) => console.log(e.created_at, e.type, e.data.id) });
  console.log(`listening on ${JSON.stringify(server.address())}`);
}
