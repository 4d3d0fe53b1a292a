// GET /docs/scalar.js: the pinned @scalar/api-reference script that /docs loads (src/routes/docs-page.ts),
// bundled into the Worker gzipped (generated/scalar.js.gz, made by scripts/copy-assets.mjs; a Data
// module, wrangler.toml [[rules]]). A browser that accepts gzip gets the packed bytes as they are;
// any other client gets them unpacked on the way out.
import type { Context } from "hono";
import packed from "../../generated/scalar.js.gz";

const HEADERS = {
  "Content-Type": "text/javascript; charset=utf-8",
  "Cache-Control": "public, max-age=3600",
  "X-Content-Type-Options": "nosniff",
  Vary: "Accept-Encoding",
};

export function docsScript(c: Context): Response {
  const acceptsGzip = /\bgzip\b/i.test(c.req.header("accept-encoding") ?? "");
  if (acceptsGzip) {
    // `manual`: the body is already gzip; the runtime sends it as it is, under this Content-Encoding.
    return new Response(packed, { headers: { ...HEADERS, "Content-Encoding": "gzip" }, encodeBody: "manual" });
  }
  return new Response(new Response(packed).body!.pipeThrough(new DecompressionStream("gzip")), { headers: HEADERS });
}
