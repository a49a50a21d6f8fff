import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** A job written in the same transaction as the row it works on; the relay enqueues what never reached Redis. */
@Entity({ name: 'outbox_jobs' })
export class OutboxJob {
  @PrimaryGeneratedColumn({ type: 'bigint' }) id: string;
  @Column({ name: 'business_id', type: 'uuid', nullable: true }) businessId: string | null;
  @Column({ type: 'text', nullable: true }) environment: string | null;
  @Column({ type: 'text' }) queue: string;
  @Column({ name: 'job_name', type: 'text' }) jobName: string;
  @Column({ name: 'job_id', type: 'text' }) jobId: string;
  @Column({ type: 'jsonb' }) payload: Record<string, unknown>;
  @Column({ name: 'delay_ms', type: 'integer', default: 0 }) delayMs: number;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @Column({ name: 'dispatched_at', type: 'timestamptz', nullable: true }) dispatchedAt: Date | null;
  @Column({ type: 'integer', default: 0 }) attempts: number;
  @Column({ name: 'last_error', type: 'text', nullable: true }) lastError: string | null;
  /** Set when the queue refused the job: the relay waits until then (growing with each attempt) before trying again. */
  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true }) nextAttemptAt: Date | null;
}
