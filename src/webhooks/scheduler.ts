// One Durable Object per webhook endpoint. It keeps the endpoint's due retries in its own
// SQLite and arms its single alarm for the earliest. When retries fall due it puts them back on
// the delivery queue. A retry leaves its table only after the enqueue succeeded, so an alarm
// that throws, or a crash half-way, loses nothing: the alarm is re-armed and runs again.
import { DurableObject } from "cloudflare:workers";
import type { Bindings } from "../env";
import { clock } from "../lib/clock";
import { enqueueDeliveries } from "./outbox";

/** How long to wait before trying again when the queue refused an enqueue. */
const REARM_AFTER_FAILURE_MS = 10_000;
const MAX_PER_ALARM = 500;

export class WebhookRetryScheduler extends DurableObject<Bindings> {
  private readonly sql: SqlStorage;

  constructor(state: DurableObjectState, env: Bindings) {
    super(state, env);
    this.sql = state.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS retries (delivery_id TEXT PRIMARY KEY, due_at INTEGER NOT NULL)");
    this.sql.exec("CREATE INDEX IF NOT EXISTS retries_due ON retries (due_at)");
  }

  /** Schedules (or moves) a delivery's next attempt. Idempotent. */
  async schedule(deliveryId: string, dueAt: number): Promise<void> {
    this.sql.exec(
      "INSERT INTO retries (delivery_id, due_at) VALUES (?, ?) ON CONFLICT (delivery_id) DO UPDATE SET due_at = excluded.due_at",
      deliveryId,
      dueAt,
    );
    await this.arm();
  }

  /** Drops a delivery's pending retry, e.g. when it was redelivered by hand and succeeded. */
  async cancel(deliveryId: string): Promise<void> {
    this.sql.exec("DELETE FROM retries WHERE delivery_id = ?", deliveryId);
    await this.arm();
  }

  pending(): { deliveryId: string; dueAt: number }[] {
    return this.sql
      .exec<{ delivery_id: string; due_at: number }>("SELECT delivery_id, due_at FROM retries ORDER BY due_at")
      .toArray()
      .map((r) => ({ deliveryId: r.delivery_id, dueAt: r.due_at }));
  }

  private earliest(): number | null {
    const row = this.sql.exec<{ due_at: number | null }>("SELECT MIN(due_at) AS due_at FROM retries").one();
    return row.due_at ?? null;
  }

  private async arm(): Promise<void> {
    const next = this.earliest();
    if (next === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(next);
  }

  async alarm(): Promise<void> {
    // An alarm fires at or after the earliest due time; treat that retry as due even if the
    // clock reads slightly earlier (tests run alarms ahead of time on purpose).
    const horizon = Math.max(clock.now(), this.earliest() ?? 0);
    const due = this.sql
      .exec<{ delivery_id: string }>("SELECT delivery_id FROM retries WHERE due_at <= ? ORDER BY due_at LIMIT ?", horizon, MAX_PER_ALARM)
      .toArray()
      .map((r) => r.delivery_id);
    try {
      if (due.length > 0) {
        await enqueueDeliveries(this.env.DELIVERY_QUEUE, due);
        for (const id of due) this.sql.exec("DELETE FROM retries WHERE delivery_id = ? AND due_at <= ?", id, horizon);
      }
      await this.arm();
    } catch (error) {
      console.error(JSON.stringify({ message: "retry enqueue failed; re-arming", retries: due.length, error: String(error) }));
      await this.ctx.storage.setAlarm(clock.now() + REARM_AFTER_FAILURE_MS);
    }
  }
}

export function schedulerFor(env: Bindings, endpointId: string) {
  return env.WEBHOOK_SCHEDULER.get(env.WEBHOOK_SCHEDULER.idFromName(endpointId));
}
