// Where Tender may send webhooks. https only; in development, http://localhost and
// http://127.0.0.1 too. Outside development, loopback, private, link-local, metadata and other
// non-public targets are refused, so an endpoint cannot turn the delivery worker against internal
// services.
//
// IP literals are parsed to bits and matched against CIDR tables below, never by regex on the
// text, so that every spelling of an address is judged the same. The WHATWG URL parser has already
// normalised IPv4 (0x7f.1, 2130706433, 127.1 all become 127.0.0.1) and IPv6 (compressed, lower
// case, an embedded dotted IPv4 rewritten as hex) in `url.hostname`; the parsers here still accept
// the textual forms so that `isPrivateHost` is safe on its own.
//
// IPv6 forms that embed or translate to an IPv4 address (IPv4-compatible ::/96, IPv4-mapped
// ::ffff:0:0/96, IPv4-translated ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
// 2002::/16, Teredo 2001::/32) are refused WHOLESALE, whatever IPv4 they carry: a public webhook
// host never needs them, and checking the embedded address would leave us trusting whichever
// gateway does the translation. Beyond the named ranges, any IPv6 address outside global unicast
// (2000::/3) is refused too. A literal that does not parse (e.g. one carrying a zone id such as
// fe80::1%eth0) is refused.
export type UrlCheck = { ok: true; url: string } | { ok: false; message: string };

const MAX_URL_LENGTH = 2048;

/** Four octets of a canonical dotted quad (no leading zeros), or null. */
function parseIpv4(text: string): number[] | null {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return null;
  return parts.map(Number);
}

/** Sixteen bytes of an IPv6 literal (without brackets), or null. Zone ids (`%eth0`) are refused. */
function parseIpv6(text: string): number[] | null {
  if (!/^[0-9a-f:.]+$/i.test(text)) return null;
  const halves = text.split("::");
  if (halves.length > 2) return null;
  // 16-bit groups; the last group of the address may be a dotted IPv4, which fills two groups.
  const groups = (part: string, endsAddress: boolean): number[] | null => {
    const out: number[] = [];
    const pieces = part === "" ? [] : part.split(":");
    for (const [i, piece] of pieces.entries()) {
      if (endsAddress && i === pieces.length - 1 && piece.includes(".")) {
        const v4 = parseIpv4(piece);
        if (!v4) return null;
        out.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
      } else if (/^[0-9a-f]{1,4}$/i.test(piece)) {
        out.push(parseInt(piece, 16));
      } else {
        return null;
      }
    }
    return out;
  };
  const head = groups(halves[0], halves.length === 1);
  const tail = halves.length === 2 ? groups(halves[1], true) : [];
  if (!head || !tail) return null;
  let words: number[];
  if (halves.length === 1) {
    if (head.length !== 8) return null;
    words = head;
  } else {
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return null; // `::` stands for at least one zero group
    words = [...head, ...Array<number>(missing).fill(0), ...tail];
  }
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

type Cidr = { net: number[]; bits: number };

function cidrs(list: string[], parse: (text: string) => number[] | null): Cidr[] {
  return list.map((entry) => {
    const [addr, bits] = entry.split("/");
    const net = parse(addr);
    if (!net) throw new Error(`bad CIDR ${entry}`);
    return { net, bits: Number(bits) };
  });
}

/** Whether the first `bits` bits of `addr` equal those of `net` (both as byte arrays). */
function inCidr(addr: number[], { net, bits }: Cidr): boolean {
  for (let i = 0; i < bits; i++) {
    const mask = 0x80 >> (i & 7);
    if ((addr[i >> 3] & mask) !== (net[i >> 3] & mask)) return false;
  }
  return true;
}

const REFUSED_V4 = cidrs(
  [
    "0.0.0.0/8", // "this network"
    "10.0.0.0/8", // private
    "100.64.0.0/10", // carrier-grade NAT
    "127.0.0.0/8", // loopback
    "169.254.0.0/16", // link-local, including the 169.254.169.254 metadata service
    "172.16.0.0/12", // private
    "192.0.0.0/24", // IETF protocol assignments
    "192.0.2.0/24", // documentation (TEST-NET-1)
    "192.168.0.0/16", // private
    "198.18.0.0/15", // benchmarking
    "198.51.100.0/24", // documentation (TEST-NET-2)
    "203.0.113.0/24", // documentation (TEST-NET-3)
    "224.0.0.0/4", // multicast
    "240.0.0.0/4", // reserved, and 255.255.255.255 broadcast
  ],
  parseIpv4,
);

const GLOBAL_UNICAST_V6 = cidrs(["2000::/3"], parseIpv6)[0];

const REFUSED_V6 = cidrs(
  [
    "::/96", // unspecified (::), loopback (::1), IPv4-compatible
    "::ffff:0:0/96", // IPv4-mapped
    "::ffff:0:0:0/96", // IPv4-translated
    "64:ff9b::/96", // NAT64, well-known prefix
    "64:ff9b:1::/48", // NAT64, local use
    "100::/64", // discard-only
    "2001::/32", // Teredo
    "2001:db8::/32", // documentation
    "2002::/16", // 6to4
    "3fff::/20", // documentation (RFC 9637)
    "fc00::/7", // unique local, including AWS's fd00:ec2::254 metadata service
    "fe80::/10", // link-local
    "fec0::/10", // site-local (deprecated)
    "ff00::/8", // multicast
  ],
  parseIpv6,
);

function privateIpv4(addr: number[]): boolean {
  return REFUSED_V4.some((range) => inCidr(addr, range));
}

function privateIpv6(addr: number[]): boolean {
  return !inCidr(addr, GLOBAL_UNICAST_V6) || REFUSED_V6.some((range) => inCidr(addr, range));
}

/**
 * Whether the host names something other than a public address: a reserved name, an IP literal
 * in a refused range, an unparseable IPv6 literal, or a numeric host that is not a canonical dotted
 * quad (a URL parser or resolver would read it as an address).
 */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.+$/, "");
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".local") || host.endsWith(".internal")) return true;
  if (host.startsWith("[") || host.includes(":")) {
    const literal = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
    const v6 = parseIpv6(literal);
    return v6 === null || privateIpv6(v6);
  }
  const v4 = parseIpv4(host);
  if (v4) return privateIpv4(v4);
  // Numeric forms other than canonical dotted quads (2130706433, 0x7f.1, 127.1, 0177.0.0.1) resolve
  // to addresses too; so does any host whose last label is a number (the WHATWG rule).
  const lastLabel = host.slice(host.lastIndexOf(".") + 1);
  return /^[0-9.x]+$/.test(host) || /^(\d+|0x[0-9a-f]*)$/.test(lastLabel);
}

export function checkWebhookUrl(raw: string, development: boolean): UrlCheck {
  if (raw.length > MAX_URL_LENGTH) return { ok: false, message: `The URL must be at most ${MAX_URL_LENGTH} characters.` };
  // "localhost:3000/hooks" parses as a URL whose scheme is "localhost:", and "example.com/hooks"
  // not at all: both were typed without one.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) && URL.canParse(`https://${raw}`) && !/\s/.test(raw)) {
    const local = /^(localhost|127\.0\.0\.1)(:\d+)?(\/|$)/i.test(raw);
    const meant = `${development && local ? "http" : "https"}://${raw}`;
    return { ok: false, message: `The URL has no scheme: did you mean ${JSON.stringify(meant)}?` };
  }
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
