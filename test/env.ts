// Tests never touch a running instance: their own database and a fresh Redis key prefix per run.
export function testDatabaseUrl(): string {
  return process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/rampway_test';
}

export function testRedisUrl(): string {
  return process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';
}
