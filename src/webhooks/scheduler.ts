// One Durable Object per webhook endpoint. It keeps the endpoint's due retries in its own
// SQLite and arms its single alarm for the earliest. When retries fall due it puts them back on
// the delivery queue. A retry leaves its table only after the enqueue succeeded, so an alarm
// that throws, or a crash half-way, loses nothing: the alarm is re-armed and runs again. Each retry
// keeps the shard its delivery lives on (src/db/shards.ts), and goes back on the queue tagged with it.
// On a throttled endpoint it also holds the delivery budget (src/webhooks/throttle.ts): a delivery
// that must wait for its slot is kept here like a retry, and put back on the queue when it comes.
import { DurableObject } from "cloudflare:workers";
import type { Bindings, RuntimeBindings } from "../env";
import { shardEnv } from "../db/shards";
import { clock } from "../lib/clock";
import { enqueueDeliveries } from "./outbox";
import { type Permit, Throttle } from "./throttle";

/** How long to wait before trying again when the queue refused an enqueue. */
const REARM_AFTER_FAILURE_MS = 10_000;
const MAX_PER_ALARM = 500;

export class WebhookRetryScheduler extends DurableObject<RuntimeBindings> {
  private readonly sql: SqlStorage;
  private readonly throttle: Throttle;

  constructor(state: DurableObjectState, env: RuntimeBindings) {
    super(state, env);
    this.sql = state.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS retries (delivery_id TEXT PRIMARY KEY, due_at INTEGER NOT NULL, shard INTEGER NOT NULL DEFAULT 0)");
    this.sql.exec("CREATE INDEX IF NOT EXISTS retries_due ON retries (due_at)");
    // A scheduler made before shards has no shard column: its retries are DB_0's.
    const columns = this.sql.exec<{ name: string }>("SELECT name FROM pragma_table_info('retries')").toArray();
    if (!columns.some((c) => c.name === "shard")) this.sql.exec("ALTER TABLE retries ADD COLUMN shard INTEGER NOT NULL DEFAULT 0");
    this.throttle = new Throttle(this.sql);
  }

  /**
   * A slot for attempt `attempt` of a delivery, at `rateLimit` per second (null: only a receiver's
   * overload slows the endpoint). When it must wait, the delivery is scheduled for its slot.
   */
  async acquire(deliveryId: string, attempt: number, rateLimit: number | null, shard = 0, notBefore: number | null = null): Promise<Permit> {
    const permit = this.throttle.acquire(`${deliveryId}/${attempt}`, rateLimit, clock.now(), notBefore);
    if (!permit.go) await this.schedule(deliveryId, permit.at, shard);
    return permit;
  }

  /** The endpoint's rate_limit changed: the deliveries waiting for a slot get one at the new rate. */
  async rethrottle(rateLimit: number | null): Promise<number> {
    const moved = this.throttle.rethrottle(rateLimit, clock.now());
    for (const { key, at } of moved) {
      const deliveryId = key.slice(0, key.lastIndexOf("/"));
      this.sql.exec("UPDATE retries SET due_at = ? WHERE delivery_id = ?", at, deliveryId);
    }
    await this.arm();
    return moved.length;
  }

  /** The endpoint was enabled again: the slots its ended deliveries held are given up. */
  releaseSlots(): void {
    this.throttle.release(clock.now());
  }

  /** A receiver answered 429, 502, 503 or 504: slow the endpoint, and pause it for a Retry-After. */
  slowDown(retryAfterMs: number | null) {
    return this.throttle.slowDown(clock.now(), retryAfterMs);
  }

  permits() {
    return this.throttle.permits();
  }

  throttleState() {
    return this.throttle.state();
  }

  /** Schedules (or moves) a delivery's next attempt. Idempotent. */
  async schedule(deliveryId: string, dueAt: number, shard = 0): Promise<void> {
    this.sql.exec(
      "INSERT INTO retries (delivery_id, due_at, shard) VALUES (?, ?, ?) ON CONFLICT (delivery_id) DO UPDATE SET due_at = excluded.due_at, shard = excluded.shard",
      deliveryId,
      dueAt,
      shard,
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
      .exec<{ delivery_id: string; shard: number }>("SELECT delivery_id, shard FROM retries WHERE due_at <= ? ORDER BY due_at LIMIT ?", horizon, MAX_PER_ALARM)
      .toArray();
    try {
      for (const shard of new Set(due.map((r) => r.shard))) {
        const ids = due.filter((r) => r.shard === shard).map((r) => r.delivery_id);
        await enqueueDeliveries(shardEnv(this.env, shard).DELIVERY_QUEUE, ids);
        for (const id of ids) this.sql.exec("DELETE FROM retries WHERE delivery_id = ? AND due_at <= ?", id, horizon);
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
