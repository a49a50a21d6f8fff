import type { Express } from 'express';
import supertest from 'supertest';
import type { Logger } from 'pino';
import { buildApp, type BuiltApp } from '../../api/app.js';
import type { AppDeps } from '../../api/context.js';
import type { RouteDef } from '../../api/routes/route.js';
import { closeAppDeps, createAppDeps } from '../../api/deps.js';
import { httpServer } from '../../api/http-server.js';
import { getConfig, loadConfig, type Config } from '../../shared/config.js';
import { getDs } from './shared.js';

export interface ApiHarness extends BuiltApp {
  deps: AppDeps;
  http: ReturnType<typeof supertest>;
  close(): Promise<void>;
}

/** A real app on the test database and Redis. `env` overrides configuration for this harness only. */
export async function startApi(options: { env?: Record<string, string>; log?: Logger; extraRoutes?: RouteDef[] } = {}): Promise<ApiHarness> {
  const config: Config = options.env ? loadConfig({ ...process.env, ...options.env }) : getConfig();
  const deps = await createAppDeps({ config, ds: await getDs() });
  if (options.log) deps.log = options.log;
  const built = buildApp(deps, { extraRoutes: options.extraRoutes });
  return {
    ...built,
    deps,
    // The real HTTP server (what Node answers before Express, such as Expect, goes through it too).
    http: supertest(httpServer(built.app as Express, deps.log)),
    close: () => closeAppDeps(deps, { keepDataSource: true }),
  };
}
