// The dashboard's Hono environment: the API's (request id, database) plus the signed-in session,
// the parsed form of a POST, and the in-process API client.
import type { AppEnv } from "../context";
import type { Api } from "./api";
import type { DashboardSession } from "./session";

export type DashEnv = {
  Bindings: AppEnv["Bindings"];
  Variables: AppEnv["Variables"] & {
    session?: DashboardSession;
    /** A POST's form fields (application/x-www-form-urlencoded or multipart), read once. */
    form: Record<string, string | string[]>;
    api: Api;
    /** The D1 bookmark to read at least as fresh as (the session's last action). */
    bookmark?: string;
  };
};
