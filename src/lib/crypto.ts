// Small Web Crypto helpers: hashing, HMAC, random secrets and constant-time comparison.
const encoder = new TextEncoder();

/** Each byte's two hex digits. */
const HEX_BYTES = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

export function toHex(buffer: ArrayBuffer | Uint8Array): string {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  let hex = "";
  for (let i = 0; i < bytes.length; i++) hex += HEX_BYTES[bytes[i]];
  return hex;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));
}

export async function sha256Hex(text: string): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/** Imported HMAC keys for string secrets (fingerprint and signing secrets), reused per isolate. */
const importedKeys = new Map<string, Promise<CryptoKey>>();
const MAX_IMPORTED_KEYS = 1000;

async function hmacKey(key: Uint8Array | string): Promise<CryptoKey> {
  const importKey = (raw: Uint8Array) => crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  if (typeof key !== "string") return importKey(key);
  let imported = importedKeys.get(key);
  if (!imported) {
    if (importedKeys.size >= MAX_IMPORTED_KEYS) importedKeys.clear();
    importedKeys.set(key, (imported = importKey(encoder.encode(key))));
  }
  return imported;
}

export async function hmacSha256(key: Uint8Array | string, message: Uint8Array | string): Promise<Uint8Array> {
  const data = typeof message === "string" ? encoder.encode(message) : message;
  return new Uint8Array(await crypto.subtle.sign("HMAC", await hmacKey(key), data));
}

export async function hmacSha256Hex(key: Uint8Array | string, message: Uint8Array | string): Promise<string> {
  return toHex(await hmacSha256(key, message));
}

export const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A random string of base62 characters, with rejection sampling so every character is uniform. */
export function randomToken(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const b of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

/** Compares two strings without an early exit, so timing does not reveal where they differ. */
export function timingSafeEqual(a: string, b: string): boolean {
  const left = encoder.encode(a);
  const right = encoder.encode(b);
  if (left.length !== right.length) return false;
  return crypto.subtle.timingSafeEqual(left, right);
}

/** A uniform number in [0, 1) from the CSPRNG, for jitter. */
export function randomUnit(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0] / 2 ** 32;
}
