// The hosted pages' routes (src/pages/hosted.tsx has what they share). They sit outside the
// OpenAPI document, like the dashboard: a payer's browser opens them, not a client. Each page
// registers its routes here.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../context";
import { registerAuthenticationPage } from "./authenticate";
import { registerCheckoutPage } from "./checkout";
import { HOSTED_STYLES_PATH, hostedStyles } from "./hosted";
import { registerInvoicePage } from "./invoice";
import { registerPortalPage } from "./portal";

export function registerHostedPages(app: OpenAPIHono<AppEnv>) {
  app.get(HOSTED_STYLES_PATH, hostedStyles);
  registerInvoicePage(app);
  registerAuthenticationPage(app);
  registerCheckoutPage(app);
  registerPortalPage(app);
}
