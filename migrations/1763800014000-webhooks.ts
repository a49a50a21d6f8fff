import type { MigrationInterface, QueryRunner } from 'typeorm';

// Webhook endpoints, their signing secrets (sealed like beneficiary details; a rotated secret keeps signing until it
// expires), one message per (event, endpoint) that the webhooks pool delivers, and every delivery attempt.
export class Webhooks1763800014000 implements MigrationInterface {
  name = 'Webhooks1763800014000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE webhook_endpoints (
        id uuid PRIMARY KEY,
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        url text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
        description text CHECK (description IS NULL OR length(description) <= 500),
        events text[],
        status text NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'failing', 'disabled', 'deleted')),
        failing_since timestamptz,
        disabled_reason text,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        deleted_at timestamptz,
        CHECK ((status = 'deleted') = (deleted_at IS NOT NULL))
      )`);
    await q.query(`CREATE INDEX webhook_endpoints_scope_idx ON webhook_endpoints (business_id, environment, created_at DESC, id DESC)`);
    // Each event row looks here for whom to notify: only the endpoints that can still receive.
    await q.query(`CREATE INDEX webhook_endpoints_live_idx ON webhook_endpoints (business_id, environment) WHERE status IN ('enabled', 'failing')`);

    await q.query(`
      CREATE TABLE webhook_secrets (
        id uuid PRIMARY KEY,
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id),
        business_id uuid NOT NULL REFERENCES businesses(id),
        environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
        secret_key_id text NOT NULL,
        secret_wrapped_key bytea NOT NULL,
        secret_iv bytea NOT NULL,
        secret_tag bytea NOT NULL,
        secret_ciphertext bytea NOT NULL,
        expires_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX webhook_secrets_endpoint_idx ON webhook_secrets (endpoint_id)`);
    await q.query(`CREATE INDEX webhook_secrets_key_idx ON webhook_secrets (secret_key_id, id)`);

    await q.query(`
      CREATE TABLE webhook_messages (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        event_id uuid NOT NULL REFERENCES events(id),
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id),
        business_id uuid NOT NULL,
        environment text NOT NULL,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
        round integer NOT NULL DEFAULT 0,
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        delivered_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (event_id, endpoint_id)
      )`);
    await q.query(`CREATE INDEX webhook_messages_pending_idx ON webhook_messages (updated_at) WHERE status = 'pending'`);

    await q.query(`
      CREATE TABLE webhook_deliveries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        message_id uuid NOT NULL REFERENCES webhook_messages(id),
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id),
        event_id uuid NOT NULL,
        event_type text NOT NULL,
        business_id uuid NOT NULL,
        environment text NOT NULL,
        attempt integer NOT NULL CHECK (attempt > 0),
        status_code integer,
        latency_ms integer NOT NULL,
        error text,
        next_retry_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ['webhook_deliveries', 'webhook_messages', 'webhook_secrets', 'webhook_endpoints']) await q.query(`DROP TABLE ${table}`);
  }
}
