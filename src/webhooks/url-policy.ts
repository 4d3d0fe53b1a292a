// Where Tender may send webhooks. https only; in development, http://localhost and
// http://127.0.0.1 too. Outside development, loopback, private and link-local targets are refused,
// so an endpoint cannot turn the delivery worker against internal services.
export type UrlCheck = { ok: true; url: string } | { ok: false; message: string };

const MAX_URL_LENGTH = 2048;

function ipv4(host: string): number[] | null {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return parts.map(Number);
}

function privateIpv4([a, b]: number[]): boolean {
  return (
    a === 0 || a === 10 || a === 127 || (a === 100 && b >= 64 && b <= 127) || (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 198 && (b === 18 || b === 19)) || a >= 224
  );
}

function privateIpv6(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "::1" || h === "::") return true;
  if (/^f[cd][0-9a-f]{2}:/.test(h) || /^fe[89ab][0-9a-f]:/.test(h)) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h);
  if (mapped) return privateIpv4(ipv4(mapped[1]) ?? [0]);
  if (/^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(h)) return true;
  return false;
}

export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".local") || host.endsWith(".internal")) return true;
  if (host.startsWith("[")) return privateIpv6(host);
  const v4 = ipv4(host);
  if (v4) return privateIpv4(v4);
  // Numeric forms other than dotted quads (e.g. 2130706433, 0x7f.1) resolve to addresses too.
  return /^[0-9.x]+$/i.test(host) && !/[a-wyz]/i.test(host);
}

export function checkWebhookUrl(raw: string, development: boolean): UrlCheck {
  if (raw.length > MAX_URL_LENGTH) return { ok: false, message: `The URL must be at most ${MAX_URL_LENGTH} characters.` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: "The URL is not a valid absolute URL." };
  }
  if (url.username || url.password) return { ok: false, message: "The URL must not carry credentials." };
  const localHttp = development && url.protocol === "http:" && (url.hostname === "localhost" || url.hostname === "127.0.0.1");
  if (url.protocol !== "https:" && !localHttp) {
    return {
      ok: false,
      message: development
        ? "The URL must use https (http is allowed only for localhost and 127.0.0.1 in development)."
        : "The URL must use https.",
    };
  }
  if (!development && isPrivateHost(url.hostname)) {
    return { ok: false, message: "The URL points to a private, loopback or link-local address; webhooks go to public hosts only." };
  }
  url.hash = "";
  return { ok: true, url: url.toString() };
}
