import { describe, expect, it } from "vitest";
import { checkWebhookUrl, isPrivateHost } from "../../src/webhooks/url-policy";

describe("webhook URL policy", () => {
  it("refuses private, loopback and link-local targets in production", () => {
    for (const url of [
      "https://localhost/h", "https://127.0.0.1/h", "https://10.1.2.3/h", "https://172.16.0.1/h", "https://192.168.1.1/h",
      "https://169.254.169.254/latest/meta-data", "https://[::1]/h", "https://[fd00::1]/h", "https://[fe80::1]/h",
      "https://[::ffff:127.0.0.1]/h", "https://2130706433/h", "https://0x7f.0.0.1/h", "https://foo.localhost/h", "https://100.64.0.1/h",
    ]) {
      expect(checkWebhookUrl(url, false).ok, url).toBe(false);
    }
  });
  it("accepts public https targets", () => {
    for (const url of ["https://example.com/hooks", "https://8.8.8.8/h", "https://[2606:4700::1111]/h", "https://hooks.example.co.uk:8443/x?y=1"]) {
      expect(checkWebhookUrl(url, false), url).toMatchObject({ ok: true });
    }
  });
  it("allows http only to localhost and 127.0.0.1, only in development", () => {
    expect(checkWebhookUrl("http://127.0.0.1:3000/h", true).ok).toBe(true);
    expect(checkWebhookUrl("http://localhost:3000/h", true).ok).toBe(true);
    expect(checkWebhookUrl("http://127.0.0.1:3000/h", false).ok).toBe(false);
    expect(checkWebhookUrl("http://example.com/h", true).ok).toBe(false);
    expect(checkWebhookUrl("http://10.0.0.1/h", true).ok).toBe(false);
  });
  it("classifies hosts", () => {
    expect(isPrivateHost("example.com")).toBe(false);
    expect(isPrivateHost("127.1.2.3")).toBe(true);
    expect(isPrivateHost("172.32.0.1")).toBe(false);
  });
});
