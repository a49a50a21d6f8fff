import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

// No Docker engine here: the file is checked as data (what `docker compose config` would read), nothing is run.
const root = join(import.meta.dirname, '..', '..');
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, any> };
const { services } = compose;

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
    expect(readFileSync(join(root, 'Dockerfile'), 'utf8')).to.match(/RUN npm install/);
    expect(readFileSync(join(root, '.dockerignore'), 'utf8')).to.match(/^node_modules$/m);
  });

  it('passes ADMIN_USER and ADMIN_PASSWORD to web, and runs the admin CLI with docker compose run', () => {
    expect(services.web.environment).to.include.keys('ADMIN_USER', 'ADMIN_PASSWORD');
    expect(services.admin.profiles).to.deep.equal(['tools']);
    expect(services.admin.entrypoint).to.deep.equal(['node', '--import', 'tsx', 'scripts/admin.ts']);
    // Exec form: node is PID 1 and receives SIGTERM itself.
    for (const name of ['web', 'workers', 'migrate']) expect(services[name].command, name).to.be.an('array').and.include('--import');
  });
});
