import type { MoneyClaim } from "./processor/in-flight";
import type { Bindings } from "./env";
import type { D1Usage, Db } from "./db/client";

export interface Auth {
  /** The shard the account lives on (src/db/shards.ts): every query of the request goes there. */
  shard: number;
  accountId: string;
  /** The API key behind the credential; access tokens carry the key they were minted from. */
  keyId: string;
  mode: "test" | "live";
  /** `mode === "live"`, as rows store it: the caller is a tenant (src/db/scope.ts) of this account and mode. */
  livemode: boolean;
  scopes: string[];
  credential: "secret_key" | "restricted_key" | "access_token";
  /** The API version the account is pinned to; a request's Tender-Version header may ask for another. */
  apiVersion: string;
  /**
   * In process only (the hosted checkout page in payment or subscription mode): the card this
   * request saves is charged at once, and that charge sets it up for later, so saving it in live
   * mode confirms no SetupIntent of its own.
   */
  chargesSavedCardNow?: true;
  /** In process only (a setup checkout session's page): the session the saved card's SetupIntent is for (its metadata, for setup_intent.succeeded). */
  setupForCheckoutSession?: string;
}

export interface IdempotencyClaim {
  key: string;
  claimToken: string;
  /**
   * `claimed`: the record was inserted `in_flight` before the route ran (routes where money moves
   * before the commit). `in_batch`: no record yet; the route's own write batch inserts it,
   * completed, and a duplicate meets the (account, key) primary key there.
   */
  mode: "claimed" | "in_batch";
  /** Reads made in the claim's own batch, for the ids they were made for (src/middleware/idempotency.ts, ClaimReads). */
  preread?: { ids: unknown; rows: unknown };
  requestHash: string;
  /**
   * `completed` once the record is completed inside the route's own write batch; `unknown` when
   * that batch failed in a way that does not say whether it committed (the answer was lost).
   */
  state: "open" | "completed" | "unknown";
  /**
   * When this use of the key began: kept when the same request takes over a stale claim, new once
   * the record expired. A first charge's processor reference is made of the key and this.
   */
  since: string;
  /** This request took over a stale claim of the same request: an earlier run may have charged. */
  takeover: boolean;
}

export type AppEnv = {
  Bindings: Bindings;
  Variables: {
    requestId: string;
    db: Db;
    /** D1 round trips made while serving this request, counted by the instrumented binding. */
    d1RoundTrips: D1Usage;
    auth: Auth;
    /** The parsed JSON body, before validation; see middleware/body.ts. */
    jsonBody: unknown;
    idempotency?: IdempotencyClaim;
    /** The claim of money this request moves at the processor before its commit (src/processor/in-flight.ts). */
    moneyClaim?: MoneyClaim;
    /** The API version this request is answered in (src/middleware/version.ts). */
    apiVersion: string;
  };
};
