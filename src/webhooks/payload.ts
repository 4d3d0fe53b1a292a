// The body delivered for an event, from the payload its batch stored (src/webhooks/outbox.ts).
// An event's `data` that the batch stored as a committed row (a subscription notification's
// subscription) is serialized here, by that object's one serializer, so the webhook shows the
// object exactly as the API returns it; any other payload is delivered as stored, byte for byte.
import { isStoredRow, serializeStoredRow } from "../middleware/stored-answers";

/** The event as delivered, as an object. */
export function deliveredEvent(payload: string): Record<string, unknown> {
  const event = JSON.parse(payload) as Record<string, unknown>;
  return isStoredRow(event.data) ? { ...event, data: serializeStoredRow(event.data) } : event;
}

/** The exact body delivered (and signed). */
export function deliveredBody(payload: string): string {
  const event = JSON.parse(payload) as Record<string, unknown>;
  return isStoredRow(event.data) ? JSON.stringify({ ...event, data: serializeStoredRow(event.data) }) : payload;
}
