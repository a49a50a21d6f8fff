import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { Environment } from '../../domain/chains.js';

/** An append-only record of a state change, written in the transaction that made the change. */
@Entity({ name: 'events' })
export class EventRecord {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ name: 'business_id', type: 'uuid' }) businessId: string;
  @Column({ type: 'text' }) environment: Environment;
  @Column({ type: 'text' }) type: string;
  @Column({ type: 'jsonb' }) data: Record<string, unknown>;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
