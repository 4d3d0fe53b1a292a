import { describe, expect, it } from "vitest";
import { checkWebhookUrl, isPrivateHost } from "../../src/webhooks/url-policy";

const PRIVATE_MESSAGE = "The URL points to a private, loopback or link-local address; webhooks go to public hosts only.";

// Every form below must be refused in production. Checked through checkWebhookUrl with full URLs,
// so the WHATWG URL parser's normalisation of the host is part of what is tested.
const REFUSED: [string, string][] = [
  // Names
  ["https://localhost/h", "localhost"],
  ["https://localhost./h", "localhost, trailing dot"],
  ["https://foo.localhost/h", "*.localhost"],
  ["https://printer.local/h", "*.local"],
  ["https://metadata.google.internal/h", "*.internal"],
  ["https://metadata.google.internal./h", "*.internal, trailing dot"],
  // IPv4, including the spellings the URL parser normalises to dotted quads
  ["https://0.0.0.0/h", "0/8"],
  ["https://0.1.2.3/h", "0/8"],
  ["https://10.1.2.3/h", "10/8"],
  ["https://100.64.0.1/h", "100.64/10"],
  ["https://100.127.255.255/h", "100.64/10, top"],
  ["https://127.0.0.1/h", "127/8"],
  ["https://127.1.2.3/h", "127/8"],
  ["https://127.0.0.1./h", "127/8, trailing dot"],
  ["https://2130706433/h", "127.0.0.1 as a single number"],
  ["https://0x7f.0.0.1/h", "127.0.0.1 with a hex octet"],
  ["https://0x7f.1/h", "127.0.0.1 short hex form"],
  ["https://127.1/h", "127.0.0.1 short form"],
  ["https://0177.0.0.1/h", "127.0.0.1 with an octal octet"],
  ["https://169.254.169.254/latest/meta-data", "metadata service"],
  ["https://169.254.0.1/h", "169.254/16"],
  ["https://172.16.0.1/h", "172.16/12"],
  ["https://172.31.255.255/h", "172.16/12, top"],
  ["https://192.0.0.8/h", "192.0.0/24"],
  ["https://192.0.2.1/h", "192.0.2/24 documentation"],
  ["https://192.168.1.1/h", "192.168/16"],
  ["https://198.18.0.1/h", "198.18/15"],
  ["https://198.19.255.255/h", "198.18/15, top"],
  ["https://198.51.100.7/h", "198.51.100/24 documentation"],
  ["https://203.0.113.7/h", "203.0.113/24 documentation"],
  ["https://224.0.0.1/h", "224/4 multicast"],
  ["https://239.255.255.250/h", "224/4 multicast"],
  ["https://240.0.0.1/h", "240/4 reserved"],
  ["https://255.255.255.255/h", "broadcast"],
  // IPv6: unspecified, loopback, and every form that embeds or translates to IPv4 (refused wholesale)
  ["https://[::]/h", "unspecified"],
  ["https://[::1]/h", "loopback"],
  ["https://[0:0:0:0:0:0:0:1]/h", "loopback, uncompressed"],
  ["https://[::7f00:1]/h", "IPv4-compatible 127.0.0.1"],
  ["https://[::127.0.0.1]/h", "IPv4-compatible, dotted"],
  ["https://[::a9fe:a9fe]/h", "IPv4-compatible metadata"],
  ["https://[::808:808]/h", "IPv4-compatible, public v4 (refused wholesale)"],
  ["https://[::ffff:127.0.0.1]/h", "IPv4-mapped 127.0.0.1"],
  ["https://[::ffff:7f00:1]/h", "IPv4-mapped, hex"],
  ["https://[::ffff:a9fe:a9fe]/h", "IPv4-mapped metadata"],
  ["https://[::ffff:8.8.8.8]/h", "IPv4-mapped, public v4 (refused wholesale)"],
  ["https://[::ffff:0:7f00:1]/h", "IPv4-translated 127.0.0.1"],
  ["https://[::ffff:0:808:808]/h", "IPv4-translated, public v4 (refused wholesale)"],
  ["https://[64:ff9b::7f00:1]/h", "NAT64 127.0.0.1"],
  ["https://[64:ff9b::127.0.0.1]/h", "NAT64, dotted"],
  ["https://[64:ff9b::a9fe:a9fe]/h", "NAT64 metadata"],
  ["https://[64:ff9b::808:808]/h", "NAT64, public v4 (refused wholesale)"],
  ["https://[64:ff9b:1::a9fe:a9fe]/h", "NAT64 local-use /48"],
  ["https://[64:ff9b:1:ffff::1]/h", "NAT64 local-use /48, anywhere in it"],
  ["https://[2002:7f00:1::]/h", "6to4 127.0.0.1"],
  ["https://[2002:a9fe:a9fe::]/h", "6to4 metadata"],
  ["https://[2002:808:808::1]/h", "6to4, public v4 (refused wholesale)"],
  ["https://[2001::1]/h", "Teredo"],
  ["https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/h", "Teredo, full"],
  // IPv6: non-public ranges
  ["https://[fc00::1]/h", "ULA fc00::/7"],
  ["https://[fd00::1]/h", "ULA fd00::/8"],
  ["https://[fd00:ec2::254]/h", "AWS metadata (ULA)"],
  ["https://[fe80::1]/h", "link-local"],
  ["https://[febf:ffff::1]/h", "link-local, top of fe80::/10"],
  ["https://[fec0::1]/h", "site-local"],
  ["https://[feff::1]/h", "site-local, top of fec0::/10"],
  ["https://[ff02::1]/h", "multicast"],
  ["https://[ff0e::101]/h", "multicast, global scope"],
  ["https://[100::1]/h", "discard-only 100::/64"],
  ["https://[2001:db8::1]/h", "documentation 2001:db8::/32"],
  ["https://[2001:db8:ffff::1]/h", "documentation 2001:db8::/32"],
  ["https://[3fff::1]/h", "documentation 3fff::/20"],
  ["https://[1::1]/h", "outside global unicast 2000::/3"],
  ["https://[4000::1]/h", "outside global unicast 2000::/3"],
  // Not parseable at all: refused before the host is even looked at
  ["https://[fe80::1%25eth0]/h", "zone id"],
];

const ACCEPTED = [
  "https://example.com/",
  "https://example.com/hooks",
  "https://hooks.example.co.uk:8443/x?y=1",
  "https://1.1.1.1/",
  "https://8.8.8.8/h",
  "https://172.32.0.1/h",
  "https://100.128.0.1/h",
  "https://198.20.0.1/h",
  "https://223.255.255.255/h",
  "https://[2606:4700::1111]/",
  "https://[2606:4700:4700::1111]/h",
  "https://[2001:4860:4860::8888]/h", // 2001:4860::/32 is not Teredo (2001::/32)
  "https://[2a00:1450:4001:80b::200e]/h",
  "https://[2003::1]/h", // just past 6to4 (2002::/16)
  "https://[2001:db9::1]/h", // just past documentation (2001:db8::/32)
];

describe("webhook URL policy", () => {
  it.each(REFUSED)("refuses %s (%s) in production", (url) => {
    const result = checkWebhookUrl(url, false);
    expect(result.ok, url).toBe(false);
  });

  it("refuses private targets with the private-host message", () => {
    for (const [url, label] of REFUSED) {
      if (label === "zone id") continue;
      expect(checkWebhookUrl(url, false), `${url} (${label})`).toEqual({ ok: false, message: PRIVATE_MESSAGE });
    }
    expect(checkWebhookUrl("https://[fe80::1%25eth0]/h", false)).toEqual({ ok: false, message: "The URL is not a valid absolute URL." });
  });

  it.each(ACCEPTED)("accepts public %s", (url) => {
    expect(checkWebhookUrl(url, false), url).toMatchObject({ ok: true });
  });

  it("judges the host after the URL parser has normalised it", () => {
    expect(new URL("https://[::ffff:127.0.0.1]/").hostname).toBe("[::ffff:7f00:1]");
    expect(new URL("https://[64:ff9b::169.254.169.254]/").hostname).toBe("[64:ff9b::a9fe:a9fe]");
    expect(new URL("https://0x7f.1/").hostname).toBe("127.0.0.1");
    expect(new URL("https://2130706433/").hostname).toBe("127.0.0.1");
    expect(isPrivateHost("[::ffff:7f00:1]")).toBe(true);
    expect(isPrivateHost("[64:ff9b::a9fe:a9fe]")).toBe(true);
  });

  it("allows http only to localhost and 127.0.0.1, only in development", () => {
    expect(checkWebhookUrl("http://127.0.0.1:3000/h", true).ok).toBe(true);
    expect(checkWebhookUrl("http://localhost:3000/h", true).ok).toBe(true);
    expect(checkWebhookUrl("http://127.0.0.1:3000/h", false).ok).toBe(false);
    expect(checkWebhookUrl("http://example.com/h", true).ok).toBe(false);
    expect(checkWebhookUrl("http://10.0.0.1/h", true).ok).toBe(false);
  });

  it("says which scheme to add to a URL typed without one", () => {
    expect(checkWebhookUrl("localhost:3000/hooks", true)).toEqual({ ok: false, message: 'The URL has no scheme: did you mean "http://localhost:3000/hooks"?' });
    expect(checkWebhookUrl("127.0.0.1:3000", true)).toEqual({ ok: false, message: 'The URL has no scheme: did you mean "http://127.0.0.1:3000"?' });
    expect(checkWebhookUrl("localhost:3000/hooks", false)).toEqual({ ok: false, message: 'The URL has no scheme: did you mean "https://localhost:3000/hooks"?' });
    expect(checkWebhookUrl("example.com/hooks", true)).toEqual({ ok: false, message: 'The URL has no scheme: did you mean "https://example.com/hooks"?' });
    // One with a scheme keeps the scheme's own message.
    expect(checkWebhookUrl("ftp://example.com/hooks", false)).toEqual({ ok: false, message: "The URL must use https." });
  });

  it("keeps its other messages", () => {
    expect(checkWebhookUrl("https://example.com/" + "a".repeat(2048), false)).toEqual({ ok: false, message: "The URL must be at most 2048 characters." });
    expect(checkWebhookUrl("not a url", false)).toEqual({ ok: false, message: "The URL is not a valid absolute URL." });
    expect(checkWebhookUrl("https://u:p@example.com/", false)).toEqual({ ok: false, message: "The URL must not carry credentials." });
    expect(checkWebhookUrl("http://example.com/", false)).toEqual({ ok: false, message: "The URL must use https." });
    expect(checkWebhookUrl("https://example.com/h#frag", false)).toEqual({ ok: true, url: "https://example.com/h" });
  });

  it("classifies hosts given directly, in any spelling", () => {
    expect(isPrivateHost("example.com")).toBe(false);
    expect(isPrivateHost("127.1.2.3")).toBe(true);
    expect(isPrivateHost("172.32.0.1")).toBe(false);
    expect(isPrivateHost("[2606:4700::1111]")).toBe(false);
    expect(isPrivateHost("2606:4700::1111")).toBe(false);
    // IPv6 spellings the URL parser would have rewritten
    expect(isPrivateHost("[::FFFF:127.0.0.1]")).toBe(true);
    expect(isPrivateHost("[0000:0000:0000:0000:0000:0000:0000:0001]")).toBe(true);
    expect(isPrivateHost("::1")).toBe(true);
    expect(isPrivateHost("[64:ff9b::169.254.169.254]")).toBe(true);
    // Zone ids and malformed literals are refused rather than guessed at
    expect(isPrivateHost("[fe80::1%eth0]")).toBe(true);
    expect(isPrivateHost("[2606:4700::1111%eth0]")).toBe(true);
    expect(isPrivateHost("[1::2::3]")).toBe(true);
    expect(isPrivateHost("[1:2:3:4:5:6:7:8:9]")).toBe(true);
    expect(isPrivateHost("[1:2:3:4:5:6:7]")).toBe(true);
    expect(isPrivateHost("[::1.2.3.4.5]")).toBe(true);
    expect(isPrivateHost("[2606:4700::1111")).toBe(true);
    // Numeric IPv4 spellings other than a canonical dotted quad
    expect(isPrivateHost("2130706433")).toBe(true);
    expect(isPrivateHost("0x7f.1")).toBe(true);
    expect(isPrivateHost("012.0.0.1")).toBe(true);
    expect(isPrivateHost("1.2.3")).toBe(true);
    expect(isPrivateHost("foo.0x7f")).toBe(true);
    // Several trailing dots
    expect(isPrivateHost("foo.localhost..")).toBe(true);
  });
});
