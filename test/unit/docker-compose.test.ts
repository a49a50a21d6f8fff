import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { WEB_NODE_FLAGS } from '../../shared/web-flags.js';

// No Docker engine here: the file is checked as data (what `docker compose config` would read), nothing is run.
const root = join(import.meta.dirname, '..', '..');
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, any> };
const { services } = compose;
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');

describe('docker-compose.yml', () => {
  it('restarts every long-running service and health-checks each of them', () => {
    for (const name of ['postgres', 'redis', 'web', 'workers']) expect(services[name]?.restart, name).to.equal('unless-stopped');
    for (const name of ['postgres', 'redis', 'web', 'workers']) expect(services[name]?.healthcheck?.test, name).to.be.an('array');
    expect(services.web.healthcheck.test.join(' ')).to.include('/ready');
    expect(services.workers.healthcheck.test.join(' ')).to.include(`:${services.workers.environment.WORKER_METRICS_PORT}/health`);
    expect(services.web.depends_on.redis.condition).to.equal('service_healthy');
    expect(services.web.depends_on.migrate.condition).to.equal('service_completed_successfully');
  });

  it('builds one image with its dependencies inside, and mounts no source tree', () => {
    for (const name of ['migrate', 'web', 'workers', 'admin']) {
      expect(services[name].build, name).to.equal('.');
      expect(services[name].volumes ?? [], name).to.deep.equal([]);
      expect(JSON.stringify(services[name].command ?? ''), name).to.not.include('npm install');
    }
    expect(dockerfile).to.match(/RUN npm install/);
    expect(readFileSync(join(root, '.dockerignore'), 'utf8')).to.match(/^node_modules$/m);
  });

  it('passes ADMIN_USER and ADMIN_PASSWORD to web, and runs the admin CLI with docker compose run', () => {
    expect(services.web.environment).to.include.keys('ADMIN_USER', 'ADMIN_PASSWORD');
    expect(services.admin.profiles).to.deep.equal(['tools']);
    expect(services.admin.entrypoint).to.deep.equal(['node', '--enable-source-maps', 'dist/scripts/admin.js']);
    // Exec form: node is PID 1 and receives SIGTERM itself; compiled JavaScript, never tsx.
    for (const name of ['web', 'workers', 'migrate']) expect(services[name].command, name).to.be.an('array').and.include('--enable-source-maps');
    expect(services.web.command).to.deep.equal(['node', '--enable-source-maps', ...WEB_NODE_FLAGS, 'dist/api/main.js']);
    for (const name of ['web', 'workers', 'migrate', 'admin']) expect(JSON.stringify([services[name].command, services[name].entrypoint]), name).to.not.include('tsx');
  });

  it('runs migrate once, to completion, before web and the workers start', () => {
    expect(services.migrate.restart).to.equal('no');
    expect(services.migrate.command.join(' ')).to.include('dist/scripts/migrate.js');
    for (const name of ['web', 'workers']) expect(services[name].depends_on.migrate.condition, name).to.equal('service_completed_successfully');
    // The web process gets the public keys alone; the seeds go to the workers (the settlement pool signs).
    expect(Object.keys(services.web.environment).filter((k) => k.startsWith('WALLET_SEED'))).to.deep.equal([]);
    expect(services.workers.environment).to.include.keys('WALLET_SEED', 'WALLET_SEED_LIVE');
  });
});

// Issue 37 item 5 and issue 38: the image is production. Read as text: no Docker engine runs here.
describe('Dockerfile', () => {
  const stages = dockerfile.split(/^FROM /m).slice(1).map((s) => ({ head: s.split('\n')[0], body: s }));
  const final = stages.at(-1)!;

  it('is built in stages, and the last one holds compiled dist/ and production dependencies only', () => {
    expect(stages.length).to.be.at.least(2);
    expect(stages.find((s) => /npm run build/.test(s.body)), 'a stage runs npm run build').to.not.equal(undefined);
    expect(final.body).to.match(/COPY --from=\w+ \/app\/dist \.\/dist/);
    const nodeModules = /COPY --from=(\w+) \/app\/node_modules/.exec(final.body)?.[1];
    const depsStage = stages.find((s) => s.head.includes(` AS ${nodeModules}`))!;
    expect(depsStage.body).to.match(/npm install --omit=dev/);
    expect(final.body).to.not.match(/npm install(?! --omit=dev)/);
    expect(final.body).to.not.match(/^COPY \. /m);
  });

  it('runs with NODE_ENV=production as a user that is not root, compiled JavaScript, with a health check on the web process', () => {
    expect(final.body).to.match(/^ENV NODE_ENV=production$/m);
    expect(dockerfile).to.not.match(/NODE_ENV=development/);
    const user = [...final.body.matchAll(/^USER (\S+)$/gm)].at(-1)?.[1];
    expect(user).to.be.a('string').and.not.oneOf(['root', '0']);
    const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(final.body)![1]) as string[];
    expect(cmd).to.deep.equal(['node', '--enable-source-maps', ...WEB_NODE_FLAGS, 'dist/api/main.js']);
    expect(final.body).to.match(/^HEALTHCHECK [^\n]*\\\n\s+CMD \[.*\/health/m);
    expect(dockerfile.replace(/^#.*$/gm, '')).to.not.match(/tsx/);
  });
});
