import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';

/** A business owns both environments; every row below it carries business_id and environment. */
@Entity({ name: 'businesses' })
export class Business {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ type: 'text' }) name: string;
  @Column({ type: 'text', default: 'active' }) status: string;
  @Column({ name: 'live_enabled', type: 'boolean', default: false }) liveEnabled: boolean;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}
