// Webhook signatures. Two schemes sign every delivery:
//  - X-Signature: lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the UTF-8 bytes
//    of the whole secret string (whsec_…), as the interface document's receivers compute it.
//  - Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature "v1,<base64>" over
//    "id.timestamp.body", keyed with the base64-decoded part of the secret after whsec_.
import { fromBase64, hmacSha256, hmacSha256Hex, toBase64 } from "../lib/crypto";

const SECRET_PREFIX = "whsec_";

export function generateSecret(): string {
  return SECRET_PREFIX + toBase64(crypto.getRandomValues(new Uint8Array(32)));
}

export async function xSignature(secret: string, body: string): Promise<string> {
  return hmacSha256Hex(secret, body);
}

export async function standardSignature(secret: string, id: string, timestampSeconds: number, body: string): Promise<string> {
  const key = fromBase64(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret);
  return `v1,${toBase64(await hmacSha256(key, `${id}.${timestampSeconds}.${body}`))}`;
}

export interface SigningSecrets {
  current: string;
  /** The secret before the last rotation, still signing until its expiry. */
  previous: string | null;
}

export async function signatureHeaders(
  secrets: SigningSecrets,
  eventId: string,
  body: string,
  nowMs: number,
): Promise<Record<string, string>> {
  const timestamp = Math.floor(nowMs / 1000);
  const signatures = [await standardSignature(secrets.current, eventId, timestamp, body)];
  if (secrets.previous) signatures.push(await standardSignature(secrets.previous, eventId, timestamp, body));
  return {
    "X-Signature": await xSignature(secrets.current, body),
    "webhook-id": eventId,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signatures.join(" "),
  };
}
