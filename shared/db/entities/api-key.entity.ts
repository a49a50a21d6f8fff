import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { Environment } from '../../domain/chains.js';

@Entity({ name: 'api_keys' })
export class ApiKey {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ name: 'business_id', type: 'uuid' }) businessId: string;
  @Column({ type: 'text' }) environment: Environment;
  /** What may be shown: `svc_test_AbCd12`. The key itself is never stored. */
  @Column({ type: 'text' }) prefix: string;
  /** SHA-256 (hex) of the whole key; high-entropy keys need no slow hash. */
  @Column({ name: 'key_hash', type: 'text' }) keyHash: string;
  @Column({ type: 'text', array: true }) scopes: string[];
  @Column({ name: 'allowed_ips', type: 'text', array: true, default: () => "'{}'" }) allowedIps: string[];
  @Column({ name: 'rate_limit', type: 'integer' }) rateLimit: number;
  @Column({ name: 'rate_window_seconds', type: 'integer' }) rateWindowSeconds: number;
  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true }) revokedAt: Date | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
