import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, ServerResponse, STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { errorEnvelope } from '../shared/errors.js';

/**
 * What Node refuses before Express ever sees a request (headers over 16 KB, broken HTTP): still the error
 * envelope with an X-Request-Id, never a bare status line.
 */
export function clientErrorResponder(log: Logger) {
  return (err: Error & { code?: string }, socket: Duplex): void => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const requestId = randomUUID();
    const message = err.code === 'HPE_HEADER_OVERFLOW' ? 'Request headers are too large (16 KB at most in all).' : 'Malformed HTTP request.';
    const body = JSON.stringify(errorEnvelope('invalid_request', message, requestId));
    log.warn({ requestId, code: err.code, status: 400 }, 'request refused before parsing');
    socket.end(
      `HTTP/1.1 400 ${STATUS_CODES[400]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  };
}

/**
 * A constructor that builds what `base` builds, born with `prototype`. Express gives every request and response its
 * own prototype (app.request, app.response) as it starts on them: an object whose prototype changes takes a new hidden
 * class, so the property reads of Node's HTTP code and ours met objects of two shapes and missed their inline caches
 * (a sixth of the web process's samples under load). Born with it, the change is a no-op and every shape stays one.
 */
function bornWith(base: typeof IncomingMessage | typeof ServerResponse, prototype: object) {
  function Born(this: object, ...args: unknown[]) {
    (base as unknown as (...a: unknown[]) => void).apply(this, args);
  }
  Born.prototype = prototype;
  return Born as unknown as typeof base;
}

/** The web server: the app, keep-alive tuned for Heroku's router, and the envelope for what Node refuses itself. */
export function httpServer(app: Express, log: Logger): Server {
  const server = createServer({
    IncomingMessage: bornWith(IncomingMessage, app.request) as typeof IncomingMessage,
    ServerResponse: bornWith(ServerResponse, app.response) as typeof ServerResponse,
  }, app);
  // Heroku's router keeps connections for up to 55 s; stay longer than it so it never reuses a closed socket.
  server.keepAliveTimeout = 65_000;
  server.on('clientError', clientErrorResponder(log));
  // Node would answer an Expect other than 100-continue with a bare 417; the app answers it in the envelope instead.
  server.on('checkExpectation', app);
  return server;
}
