// Secrets Tender must use again later (a processor's API key, its webhook signing secrets) are
// stored encrypted: AES-256-GCM (Web Crypto), a fresh 96-bit IV each time, and additional
// authenticated data naming what the value is (its account and field), so a ciphertext copied to
// another row or field does not decrypt. Each sealed value names the key that sealed it:
//
//   <key id>:<base64 IV>:<base64 ciphertext and tag>
//
// A key ring is `<key id>:<base64 of 32 bytes>[,<key id>:<base64 of 32 bytes>…]`: the first key
// seals, and every key opens what names its id, so a key can rotate (add the new key first, let
// the old values be sealed again, then drop the old key).
import { fromBase64, toBase64 } from "./crypto";

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const IV_BYTES = 12;
const encoder = new TextEncoder();

export interface KeyRing {
  /** The id of the key that seals. */
  currentId: string;
  keys: ReadonlyMap<string, CryptoKey>;
}

/** The ring's text is malformed: says what, never the key material. */
export class KeyRingInvalid extends Error {
  constructor(detail: string) {
    super(`The encryption key ring is malformed: ${detail}. Expected <key id>:<base64 of 32 bytes>[,<key id>:<base64 of 32 bytes>…]`);
    this.name = "KeyRingInvalid";
  }
}

/** A sealed value that does not open: another key, another account or field, or tampered with. */
export class SealedValueInvalid extends Error {
  constructor(detail: string) {
    super(`A stored secret cannot be decrypted: ${detail}`);
    this.name = "SealedValueInvalid";
  }
}

const rings = new Map<string, Promise<KeyRing>>();

/** Parses and imports a key ring, once per isolate for each text. */
export function keyRing(text: string): Promise<KeyRing> {
  let ring = rings.get(text);
  if (!ring) {
    if (rings.size > 8) rings.clear();
    ring = importRing(text);
    // A malformed ring is not cached: the next call says so again.
    ring.catch(() => rings.delete(text));
    rings.set(text, ring);
  }
  return ring;
}

async function importRing(text: string): Promise<KeyRing> {
  const entries = text.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "");
  if (entries.length === 0) throw new KeyRingInvalid("it holds no key");
  const keys = new Map<string, CryptoKey>();
  for (const [index, entry] of entries.entries()) {
    const colon = entry.indexOf(":");
    const id = colon < 0 ? "" : entry.slice(0, colon);
    if (!KEY_ID.test(id)) throw new KeyRingInvalid(`entry ${index + 1} has no key id of 1 to 32 letters, digits, - or _ before its colon`);
    if (keys.has(id)) throw new KeyRingInvalid(`key id ${id} appears twice`);
    let raw: Uint8Array;
    try {
      raw = fromBase64(entry.slice(colon + 1));
    } catch {
      throw new KeyRingInvalid(`key ${id} is not base64`);
    }
    if (raw.byteLength !== 32) throw new KeyRingInvalid(`key ${id} is ${raw.byteLength} bytes, not 32`);
    keys.set(id, await crypto.subtle.importKey("raw", raw, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]));
  }
  return { currentId: entries[0].slice(0, entries[0].indexOf(":")), keys };
}

/** Seals `plaintext` under the ring's current key, bound to `context` (e.g. "processor_connections:acct_1:secret_key"). */
export async function seal(ring: KeyRing, plaintext: string, context: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const key = ring.keys.get(ring.currentId)!;
  const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(context) }, key, encoder.encode(plaintext));
  return `${ring.currentId}:${toBase64(iv)}:${toBase64(new Uint8Array(sealed))}`;
}

/** The id of the key that sealed a value. */
export function sealedKeyId(sealed: string): string {
  return sealed.slice(0, Math.max(0, sealed.indexOf(":")));
}

/** Opens a sealed value with the ring's key of the id it names, checking it was sealed for `context`. */
export async function open(ring: KeyRing, sealed: string, context: string): Promise<string> {
  const [id, iv, data, ...rest] = sealed.split(":");
  if (!id || !iv || !data || rest.length > 0) throw new SealedValueInvalid("it is not <key id>:<iv>:<ciphertext>");
  const key = ring.keys.get(id);
  if (!key) throw new SealedValueInvalid(`it was encrypted with key ${id}, which the key ring does not hold`);
  try {
    const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData: encoder.encode(context) }, key, fromBase64(data));
    return new TextDecoder().decode(plain);
  } catch {
    throw new SealedValueInvalid(`key ${id} does not open it for ${context} (another account or field, or altered)`);
  }
}
