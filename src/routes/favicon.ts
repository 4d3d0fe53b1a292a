// GET /favicon.ico: Tender's icon (a white T on the dashboard's indigo, 32×32), served by the Worker
// so browsers find it on /docs and /dashboard without a 404 and without another origin. An ICO
// holding one PNG image (169 bytes), which every current browser reads.
import type { Context } from "hono";

const FAVICON_BASE64 =
  "AAABAAEAICAAAAEAIACTAAAAFgAAAIlQTkcNChoKAAAADUlIRFIAAAAgAAAAIAgGAAAAc3p69AAAAFpJREFUeNpjYEADzhan/tMSM+ADtLYcryPoZTlWR9DbchRHDJTlcEeMOmDQO4BSMOqAoe8AYh1G91ww6oBRB4w6YNQBow4YdcBom3BY9A0GT9dsUHROB6p7DgCtO31Isf8otAAAAABJRU5ErkJggg==";

export const FAVICON = Uint8Array.from(atob(FAVICON_BASE64), (ch) => ch.charCodeAt(0));

export function favicon(c: Context) {
  return c.body(FAVICON, 200, { "Content-Type": "image/x-icon", "Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff" });
}
