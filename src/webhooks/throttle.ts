// An endpoint's delivery budget, kept in its Durable Object's SQLite (the WebhookRetryScheduler in
// src/webhooks/scheduler.ts calls it, one call at a time, so every isolate and queue consumer
// shares it). A permit is a slot for one attempt of one delivery (key: delivery id / attempt
// number): asking again with the same key answers the same slot, so a duplicated message never
// takes a second one. Slots follow src/domain/webhook-throttle.ts. A permit whose slot has passed
// is kept a while after it was used, as the record the next slots are measured against, and an
// unused one PERMIT_KEPT_MS after its slot (its message may come late).
import type { Bindings } from "../env";
import { NOT_SLOWED, type SlowdownState, SLOT_WINDOW_MS, effectiveRate, nextSlot, slowDown } from "../domain/webhook-throttle";

/** How long after its slot an unused permit is honoured (a late queue message still goes out). */
export const PERMIT_KEPT_MS = 10 * 60_000;

export interface Permit {
  /** True: send now. False: the delivery was scheduled for `at`, when its slot comes. */
  go: boolean;
  /** The permit's slot (epoch ms). */
  at: number;
  /** When this attempt first asked for a slot: the time it fell due. */
  askedAt: number;
}

export class Throttle {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(
      "CREATE TABLE IF NOT EXISTS throttle_permits (key TEXT PRIMARY KEY, at INTEGER NOT NULL, asked_at INTEGER NOT NULL, used INTEGER NOT NULL DEFAULT 0, used_at INTEGER)",
    );
    sql.exec("CREATE INDEX IF NOT EXISTS throttle_permits_at ON throttle_permits (at)");
    sql.exec("CREATE INDEX IF NOT EXISTS throttle_permits_used_at ON throttle_permits (used_at)");
    sql.exec(
      "CREATE TABLE IF NOT EXISTS throttle_state (id INTEGER PRIMARY KEY CHECK (id = 1), paused_until INTEGER NOT NULL, halvings INTEGER NOT NULL, slowed_until INTEGER NOT NULL)",
    );
  }

  state(): SlowdownState {
    const row = this.sql
      .exec<{ paused_until: number; halvings: number; slowed_until: number }>("SELECT paused_until, halvings, slowed_until FROM throttle_state WHERE id = 1")
      .toArray()[0];
    return row ? { pausedUntil: row.paused_until, halvings: row.halvings, slowedUntil: row.slowed_until } : NOT_SLOWED;
  }

  /**
   * A slot for `key` at `rateLimit` per second (null: none set, only an overload slows it). With
   * `notBefore` in the future (the attempt is not due yet) only a slot already held is answered;
   * otherwise the answer is to wait until `notBefore`, and no slot is taken.
   */
  acquire(key: string, rateLimit: number | null, now: number, notBefore: number | null = null): Permit {
    this.prune(now);
    const state = this.state();
    const held = this.sql.exec<{ at: number; asked_at: number; used: number }>("SELECT at, asked_at, used FROM throttle_permits WHERE key = ?", key).toArray()[0];
    if (!held && notBefore !== null && notBefore > now) return { go: false, at: notBefore, askedAt: now };
    if (held && held.at > now) return { go: false, at: held.at, askedAt: held.asked_at };
    if (held?.used === 1) return { go: true, at: held.at, askedAt: held.asked_at };
    const rate = effectiveRate(rateLimit, state, now);
    // Its slot has come: it goes, unless a Retry-After pauses the endpoint, or the permits used in
    // the last second (a late message's among them) already fill it.
    if (held && now >= state.pausedUntil && this.sentBefore(rate) <= now - SLOT_WINDOW_MS) {
      this.sql.exec("UPDATE throttle_permits SET used = 1, used_at = ? WHERE key = ?", now, key);
      return { go: true, at: held.at, askedAt: held.asked_at };
    }
    // No permit yet, or one that may not go now: a (new) slot, behind those already given.
    // Asking again keeps the time the attempt first asked.
    const askedAt = held?.asked_at ?? now;
    if (held) this.sql.exec("DELETE FROM throttle_permits WHERE key = ?", key);
    const at = this.slot(rate, state, now);
    const go = at <= now;
    this.sql.exec("INSERT INTO throttle_permits (key, at, asked_at, used, used_at) VALUES (?, ?, ?, ?, ?)", key, at, askedAt, go ? 1 : 0, go ? now : null);
    return { go, at, askedAt };
  }

  /**
   * The endpoint's rate_limit changed: every slot still to come is given again at the new rate,
   * in the same order, each keeping the time its attempt first asked. Answers the new slots.
   */
  rethrottle(rateLimit: number | null, now: number): { key: string; at: number }[] {
    this.prune(now);
    const state = this.state();
    const waiting = this.sql
      .exec<{ key: string; asked_at: number }>("SELECT key, asked_at FROM throttle_permits WHERE used = 0 AND at > ? ORDER BY at, key", now)
      .toArray();
    this.sql.exec("DELETE FROM throttle_permits WHERE used = 0 AND at > ?", now);
    const rate = effectiveRate(rateLimit, state, now);
    return waiting.map((w) => {
      const at = this.slot(rate, state, now);
      this.sql.exec("INSERT INTO throttle_permits (key, at, asked_at, used) VALUES (?, ?, ?, 0)", w.key, at, w.asked_at);
      return { key: w.key, at };
    });
  }

  private slot(rate: number, state: SlowdownState, now: number): number {
    const latest = this.sql.exec<{ at: number | null }>("SELECT MAX(at) AS at FROM throttle_permits").one().at ?? null;
    const rateth = this.sql.exec<{ at: number }>("SELECT at FROM throttle_permits ORDER BY at DESC LIMIT 1 OFFSET ?", rate - 1).toArray()[0]?.at ?? null;
    // Slots count when given; sends when made: a late permit's send counts where it happened.
    return Math.max(nextSlot({ now, pausedUntil: state.pausedUntil, latest, rateth }), this.sentBefore(rate) + SLOT_WINDOW_MS);
  }

  /** When the `rate`-th latest permit was used (-Infinity when fewer were). */
  private sentBefore(rate: number): number {
    const row = this.sql.exec<{ used_at: number }>("SELECT used_at FROM throttle_permits WHERE used_at IS NOT NULL ORDER BY used_at DESC LIMIT 1 OFFSET ?", rate - 1).toArray()[0];
    return row?.used_at ?? Number.NEGATIVE_INFINITY;
  }

  /** A receiver's overload answer (429, 502, 503, 504) at `now`, with its Retry-After if any. */
  slowDown(now: number, retryAfterMs: number | null): SlowdownState {
    const next = slowDown(this.state(), now, retryAfterMs);
    this.sql.exec(
      "INSERT INTO throttle_state (id, paused_until, halvings, slowed_until) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET paused_until = excluded.paused_until, halvings = excluded.halvings, slowed_until = excluded.slowed_until",
      next.pausedUntil,
      next.halvings,
      next.slowedUntil,
    );
    return next;
  }

  /**
   * The endpoint was enabled again: the slots not used yet were its ended deliveries' (disabling
   * ends every pending one), and are given up, so a new delivery does not wait behind them. A
   * delivery that asked since keeps its place in the queue of retries and asks again when it comes.
   */
  release(now: number): void {
    this.prune(now);
    this.sql.exec("DELETE FROM throttle_permits WHERE used = 0");
  }

  /** The slots given, oldest first (for tests and the operations page). */
  permits(): { key: string; at: number; used: boolean }[] {
    return this.sql
      .exec<{ key: string; at: number; used: number }>("SELECT key, at, used FROM throttle_permits ORDER BY at, key")
      .toArray()
      .map((p) => ({ key: p.key, at: p.at, used: p.used === 1 }));
  }

  private prune(now: number): void {
    // A slot used a second ago, and given a second ago, no longer counts against any later one.
    this.sql.exec("DELETE FROM throttle_permits WHERE (used = 1 AND at <= ? AND used_at <= ?) OR at <= ?", now - SLOT_WINDOW_MS, now - SLOT_WINDOW_MS, now - PERMIT_KEPT_MS);
  }
}

/**
 * After a PATCH of rate_limit: the endpoint's waiting deliveries get their slots again at the new
 * rate. The change is committed already; should the object not answer, those deliveries keep the
 * slots they had (each still goes), so the failure is logged, not answered.
 */
export async function rethrottle(env: Bindings, endpointId: string, rateLimit: number | null): Promise<void> {
  try {
    await env.WEBHOOK_SCHEDULER.get(env.WEBHOOK_SCHEDULER.idFromName(endpointId)).rethrottle(rateLimit);
  } catch (error) {
    console.error(JSON.stringify({ message: "rate_limit change not applied to waiting deliveries", endpoint: endpointId, error: String(error) }));
  }
}

/**
 * After an endpoint is enabled again: the slots its ended deliveries held are given up. Enabling is
 * committed already; should the object not answer, new deliveries wait behind those slots (they
 * still go), so the failure is logged, not answered.
 */
export async function releaseSlots(env: Bindings, endpointId: string): Promise<void> {
  try {
    await env.WEBHOOK_SCHEDULER.get(env.WEBHOOK_SCHEDULER.idFromName(endpointId)).releaseSlots();
  } catch (error) {
    console.error(JSON.stringify({ message: "slots of an enabled endpoint not released", endpoint: endpointId, error: String(error) }));
  }
}
