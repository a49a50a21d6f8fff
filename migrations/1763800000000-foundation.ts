import type { MigrationInterface, QueryRunner } from 'typeorm';

export class Foundation1763800000000 implements MigrationInterface {
  name = 'Foundation1763800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE EXTENSION IF NOT EXISTS pgcrypto`);
    await q.query(`
      CREATE TABLE businesses (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
        status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
        live_enabled boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE api_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        prefix text NOT NULL,
        key_hash text NOT NULL UNIQUE,
        scopes text[] NOT NULL,
        allowed_ips text[] NOT NULL DEFAULT '{}' CHECK (cardinality(allowed_ips) <= 10),
        rate_limit integer NOT NULL CHECK (rate_limit > 0),
        rate_window_seconds integer NOT NULL CHECK (rate_window_seconds > 0),
        revoked_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX api_keys_business_idx ON api_keys (business_id, environment)`);
    await q.query(`
      CREATE TABLE outbox_jobs (
        id bigserial PRIMARY KEY,
        business_id uuid,
        environment text,
        queue text NOT NULL,
        job_name text NOT NULL,
        job_id text NOT NULL,
        payload jsonb NOT NULL,
        delay_ms integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        dispatched_at timestamptz,
        attempts integer NOT NULL DEFAULT 0,
        last_error text
      )`);
    // The relay only ever scans the undispatched rows.
    await q.query(`CREATE INDEX outbox_jobs_pending_idx ON outbox_jobs (created_at) WHERE dispatched_at IS NULL`);
    await q.query(`CREATE INDEX outbox_jobs_dispatched_idx ON outbox_jobs (dispatched_at) WHERE dispatched_at IS NOT NULL`);
    await q.query(`
      CREATE TABLE events (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        type text NOT NULL,
        data jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX events_scope_idx ON events (business_id, environment, created_at DESC, id DESC)`);
    // Events are history: never rewritten.
    await q.query(`
      CREATE FUNCTION forbid_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION '% rows are append-only', TG_TABLE_NAME;
      END $$`);
    await q.query(`CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events FOR EACH ROW EXECUTE FUNCTION forbid_mutation()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE events`);
    await q.query(`DROP FUNCTION forbid_mutation()`);
    await q.query(`DROP TABLE outbox_jobs`);
    await q.query(`DROP TABLE api_keys`);
    await q.query(`DROP TABLE businesses`);
  }
}
