/// <reference types="vite/client" />
// Fault injection at every boundary of a money path, against the real local bindings: a D1 that
// fails before a commit, commits and loses the answer, or is slow; queues that throw, repeat or
// lag; a processor that keeps a ledger (idempotent by reference, as a real one is) and can time
// out after it moved the money, decline, or be slow; and webhook receivers that hang, fail, or
// answer only after the sender gave up. Each wrapper records what it saw, so invariants
// (test/support/invariants.ts) can be checked against it afterwards.
import { vi } from "vitest";
import { useProcessor } from "../../src/processor";
import type { AuthorizationOutcome, CancelOutcome, CaptureOutcome, CardDetails, Outcome, Processor, SettlementOutcome } from "../../src/processor/types";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// D1

export type D1FaultKind = "fail_before_commit" | "commit_then_throw" | "slow";

/** One round trip to D1 as the wrapper saw it: a batch, or one prepared statement run alone. */
export interface D1Op {
  /** Position among every op this wrapper saw. */
  index: number;
  kind: "batch" | "statement";
  /** `batch`, or the statement method: run, all, first, raw. */
  method: string;
  /** The SQL text of each statement (one for a statement op). */
  sql: string[];
}

export interface D1FaultRule {
  kind: D1FaultKind;
  /** Which round trips the rule looks at (default: batches only). */
  on?: "batch" | "statement" | "any";
  /** Further selects the round trips, e.g. only the batch that contains `insert into "payouts"`. */
  when?: (op: D1Op) => boolean;
  /** The rule fires on the nth (0-based) round trip it selects... */
  nth?: number;
  /** ...and on the `times - 1` selected ones after it (default 1). */
  times?: number;
  /** For `slow`: how long to wait before the real call (default 50 ms). */
  delayMs?: number;
  /** The error thrown (default D1's own "Network connection lost"). */
  error?: () => Error;
}

export interface FaultyD1 extends D1Database {
  /** Every round trip, in order. */
  readonly ops: D1Op[];
  /** The round trips a rule fired on. */
  readonly fired: { rule: D1FaultRule; op: D1Op }[];
}

export const d1ConnectionLost = () => new Error("D1_ERROR: Network connection lost.");

/** SQL text helpers for `when` predicates. Drizzle quotes table names: `insert into "payouts"`. */
export const sqlMatches = (op: D1Op, pattern: RegExp) => op.sql.some((s) => pattern.test(s));
export const writesTo = (op: D1Op, table: string) =>
  sqlMatches(op, new RegExp(`^\\s*(insert\\s+into|update|delete\\s+from)\\s+"?${table}"?[\\s(]`, "i"));
/** Whether the round trip writes anything (an INSERT, UPDATE or DELETE statement). */
export const isWrite = (op: D1Op) => sqlMatches(op, /^\s*(insert|update|delete|replace)\b/i);

const QUERY_METHODS = new Set(["run", "all", "first", "raw"]);

/**
 * A Proxy over a D1 binding whose batches (and, with `on: "statement" | "any"`, single
 * statements) fail, commit then throw, or wait, as the plan says. Everything else is the real
 * binding: a `commit_then_throw` really commits. Pass it as `DB` in an env override.
 */
export function faultyD1(
  real: D1Database,
  plan: D1FaultRule | D1FaultRule[] = [],
  options: {
    /** Awaited before every round trip: an interleaving scheduler (fc.scheduler) decides when it proceeds. */
    gate?: (op: D1Op) => Promise<unknown>;
  } = {},
): FaultyD1 {
  const rules = Array.isArray(plan) ? plan : [plan];
  const seen = rules.map(() => 0);
  const ops: D1Op[] = [];
  const fired: { rule: D1FaultRule; op: D1Op }[] = [];
  const realOf = new WeakMap<object, D1PreparedStatement>();
  const sqlOf = new WeakMap<object, string>();

  async function intercept<T>(partial: Omit<D1Op, "index">, perform: () => Promise<T>): Promise<T> {
    const op: D1Op = { index: ops.length, ...partial };
    ops.push(op);
    if (options.gate) await options.gate(op);
    let fault: D1FaultRule | undefined;
    rules.forEach((rule, i) => {
      const on = rule.on ?? "batch";
      if (on !== "any" && on !== op.kind) return;
      if (rule.when && !rule.when(op)) return;
      const k = seen[i]++;
      const from = rule.nth ?? 0;
      if (!fault && k >= from && k < from + (rule.times ?? 1)) fault = rule;
    });
    if (!fault) return perform();
    fired.push({ rule: fault, op });
    const error = fault.error ?? d1ConnectionLost;
    switch (fault.kind) {
      case "fail_before_commit":
        throw error();
      case "commit_then_throw":
        await perform();
        throw error();
      case "slow":
        await sleep(fault.delayMs ?? 50);
        return perform();
    }
  }

  const wrapStatement = (statement: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => wrapStatement(target.bind(...values), sql);
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        if (typeof prop === "string" && QUERY_METHODS.has(prop)) {
          return (...args: unknown[]) => intercept({ kind: "statement", method: prop, sql: [sql] }, () => value.apply(target, args));
        }
        return value.bind(target);
      },
    });
    realOf.set(proxy, statement);
    sqlOf.set(proxy, sql);
    return proxy;
  };

  const wrapDatabase = <D extends object>(target: D): D =>
    new Proxy(target, {
      get(inner, prop) {
        if (prop === "ops") return ops;
        if (prop === "fired") return fired;
        if (prop === "prepare") return (query: string) => wrapStatement((inner as unknown as D1Database).prepare(query), query);
        if (prop === "batch") {
          return (statements: D1PreparedStatement[]) =>
            intercept({ kind: "batch", method: "batch", sql: statements.map((s) => sqlOf.get(s) ?? "<unknown statement>") }, () =>
              (inner as unknown as D1Database).batch(statements.map((s) => realOf.get(s) ?? s)),
            );
        }
        if (prop === "withSession") {
          return (...args: unknown[]) => wrapDatabase((inner as unknown as { withSession: (...a: unknown[]) => object }).withSession(...args));
        }
        const value = Reflect.get(inner, prop, inner);
        return typeof value === "function" ? value.bind(inner) : value;
      },
    });

  return wrapDatabase(real) as FaultyD1;
}

// ---------------------------------------------------------------------------------------------
// Queues

export interface QueueLog {
  /** Every message body handed to the wrapper, in order (a sendBatch adds each of its messages). */
  readonly sent: unknown[];
}

/** A queue that refuses every send, as an outage does. */
export function throwingQueue(message = "queue unavailable"): Queue & QueueLog {
  const sent: unknown[] = [];
  return {
    sent,
    async send(body: unknown) {
      sent.push(body);
      throw new Error(message);
    },
    async sendBatch(messages: Iterable<MessageSendRequest>) {
      for (const m of messages) sent.push(m.body);
      throw new Error(message);
    },
  } as unknown as Queue & QueueLog;
}

/** A queue that delivers every message twice (at-least-once, at its worst). */
export function duplicatingQueue(real: Queue): Queue & QueueLog {
  const sent: unknown[] = [];
  return {
    sent,
    async send(body: unknown, options?: QueueSendOptions) {
      sent.push(body, body);
      await real.send(body, options);
      await real.send(body, options);
    },
    async sendBatch(messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) {
      const list = [...messages];
      for (const m of list) sent.push(m.body, m.body);
      await real.sendBatch(list, options);
      await real.sendBatch(list, options);
    },
  } as unknown as Queue & QueueLog;
}

/** A queue whose sends take `ms` before they reach the real queue. */
export function delayingQueue(real: Queue, ms: number): Queue & QueueLog {
  const sent: unknown[] = [];
  return {
    sent,
    async send(body: unknown, options?: QueueSendOptions) {
      sent.push(body);
      await sleep(ms);
      await real.send(body, options);
    },
    async sendBatch(messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) {
      const list = [...messages];
      for (const m of list) sent.push(m.body);
      await sleep(ms);
      await real.sendBatch(list, options);
    },
  } as unknown as Queue & QueueLog;
}

/** A queue that keeps its messages (nothing reaches a consumer), so a test can run them by hand. */
export function recordingQueue(): Queue & QueueLog {
  const sent: unknown[] = [];
  return {
    sent,
    async send(body: unknown) {
      sent.push(body);
    },
    async sendBatch(messages: Iterable<MessageSendRequest>) {
      for (const m of messages) sent.push(m.body);
    },
  } as unknown as Queue & QueueLog;
}

// ---------------------------------------------------------------------------------------------
// The processor

export type ProcessorMethod = "chargeCard" | "chargeToken" | "tokenizeDestination" | "sendPayout" | "refund" | "authorizeCard" | "capturePayment" | "cancelPayment";
export type ProcessorFaultKind = "timeout_after_success" | "decline" | "slow";

export interface ProcessorFault {
  kind: ProcessorFaultKind;
  /** The methods it applies to (default: every money-moving method). */
  method?: ProcessorMethod | ProcessorMethod[];
  /** Further selects the calls, e.g. by reference. */
  when?: (call: LedgerCall) => boolean;
  /** Fires on the nth (0-based) selected call and the `times - 1` after it (default: every one). */
  nth?: number;
  times?: number;
  /** For `slow` (default 30 ms). */
  ms?: number;
}

export interface LedgerCall {
  seq: number;
  method: ProcessorMethod;
  /** The processor's idempotency key ("" for tokenizeDestination, which takes none). */
  reference: string;
  amount: number | null;
  currency: string | null;
  /** Another call with the same method and reference was still in flight when this one started. */
  overlapped: boolean;
  /** A previous call with this reference had finished: this one was answered from it. */
  replay: boolean;
  /** This call moved money (the first to execute for its reference, and it succeeded). */
  moved: boolean;
  outcome: "pending" | "succeeded" | "failed" | "requires_action" | "timeout" | "error";
  faults: ProcessorFaultKind[];
  /** The processor's own reference of a successful charge (what payments.processor_reference keeps). */
  processorReference: string | null;
  done: boolean;
}

export const processorTimeout = () => Object.assign(new Error("processor timeout: no answer within 30 s"), { name: "TimeoutError" });

type Stored = { outcome: SettlementOutcome | AuthorizationOutcome; token?: string | null };

export interface Ledger {
  readonly calls: LedgerCall[];
  /** Wraps a processor (pass `ledger.wrap` to useProcessor, or call `ledger.install()`). */
  wrap(inner: Processor): Processor;
  install(): void;
  uninstall(): void;
  /** Faults for the calls to come (replaces the previous ones). */
  inject(...faults: ProcessorFault[]): void;
  /** Calls that moved money, one per reference, optionally for some methods and from a checkpoint. */
  moneyMoved(methods?: ProcessorMethod | ProcessorMethod[], since?: number): LedgerCall[];
  /** The index of the next call: pass it as `since` to look only at what follows. */
  checkpoint(): number;
  /** Resolves once no call is in flight. */
  idle(): Promise<void>;
}

const MONEY_METHODS: ProcessorMethod[] = ["chargeCard", "chargeToken", "sendPayout", "refund", "authorizeCard", "capturePayment", "cancelPayment"];
const asList = <T>(value: T | T[] | undefined, fallback: T[]): T[] => (value === undefined ? fallback : Array.isArray(value) ? value : [value]);

const declined = (): Outcome => ({ status: "failed", code: "card_declined", message: "The card was declined." });

/**
 * A processor that behaves as a real one does with idempotency keys: the first call for a
 * (method, reference) executes; a later call returns the first outcome and moves no money; a
 * call made while the first is still in flight waits for it (and is marked `overlapped`, which
 * the invariants treat as a defect of the caller). Every call is recorded.
 */
export function ledgerProcessor(initial: ProcessorFault[] = []): Ledger {
  const calls: LedgerCall[] = [];
  const stored = new Map<string, Stored>();
  const inFlight = new Map<string, Promise<void>>();
  let faults: { fault: ProcessorFault; seen: number }[] = initial.map((fault) => ({ fault, seen: 0 }));
  const running = new Set<Promise<unknown>>();

  function faultsFor(call: LedgerCall): ProcessorFault[] {
    const hit: ProcessorFault[] = [];
    for (const entry of faults) {
      const { fault } = entry;
      if (!asList(fault.method, MONEY_METHODS).includes(call.method)) continue;
      if (fault.when && !fault.when(call)) continue;
      const k = entry.seen++;
      const from = fault.nth ?? 0;
      if (k >= from && (fault.times === undefined || k < from + fault.times)) hit.push(fault);
    }
    return hit;
  }

  async function run(
    method: ProcessorMethod,
    reference: string,
    amount: number | null,
    currency: string | null,
    execute: (decline: boolean) => Promise<Stored>,
  ): Promise<Stored> {
    const key = `${method}:${reference}`;
    const call: LedgerCall = {
      seq: calls.length,
      method,
      reference,
      amount,
      currency,
      overlapped: reference !== "" && inFlight.has(key),
      replay: false,
      moved: false,
      outcome: "pending",
      faults: [],
      processorReference: null,
      done: false,
    };
    calls.push(call);
    const hit = faultsFor(call);
    call.faults = hit.map((f) => f.kind);
    const slow = hit.find((f) => f.kind === "slow");
    const timeout = hit.some((f) => f.kind === "timeout_after_success");
    const decline = hit.some((f) => f.kind === "decline");
    const work = (async () => {
      try {
        if (slow) await sleep(slow.ms ?? 30);
        let result: Stored;
        while (reference !== "" && inFlight.has(key)) await inFlight.get(key);
        const previous = reference === "" ? undefined : stored.get(key);
        if (previous) {
          call.replay = true;
          result = previous;
        } else {
          let release!: () => void;
          if (reference !== "") inFlight.set(key, new Promise<void>((resolve) => (release = resolve)));
          try {
            result = await execute(decline);
            if (reference !== "") stored.set(key, result);
            call.moved = result.outcome.status === "succeeded" && method !== "tokenizeDestination";
          } finally {
            if (reference !== "") {
              inFlight.delete(key);
              release();
            }
          }
        }
        call.outcome = result.outcome.status;
        call.processorReference = result.outcome.status === "succeeded" ? result.outcome.reference : null;
        if (timeout) {
          call.outcome = "timeout";
          throw processorTimeout();
        }
        return result;
      } catch (error) {
        if (call.outcome === "pending") call.outcome = "error";
        throw error;
      } finally {
        call.done = true;
      }
    })();
    running.add(work);
    work.then(
      () => running.delete(work),
      () => running.delete(work),
    );
    return work;
  }

  const ledger: Ledger = {
    calls,
    wrap(inner: Processor): Processor {
      return {
        async chargeCard(args: { card: CardDetails; amount: number; currency: string; reference: string }) {
          const result = await run("chargeCard", args.reference, args.amount, args.currency, async (decline) => {
            const made = await inner.chargeCard(args);
            return { token: made.token, outcome: decline ? declined() : made.outcome };
          });
          return { token: result.token as string, outcome: result.outcome as Outcome };
        },
        async chargeToken(args) {
          return (await run("chargeToken", args.reference, args.amount, args.currency, async (decline) => ({ outcome: decline ? declined() : await inner.chargeToken(args) }))).outcome as Outcome;
        },
        async tokenizeDestination(card) {
          const result = await run("tokenizeDestination", "", null, null, async () => {
            const token = await inner.tokenizeDestination(card);
            return { token, outcome: { status: "succeeded", reference: token } };
          });
          return result.token as string;
        },
        async authorizeCard(args) {
          return (await run("authorizeCard", args.reference, args.amount, args.currency, async (decline) => ({ outcome: decline ? declined() : await inner.authorizeCard(args) }))).outcome as AuthorizationOutcome;
        },
        async capturePayment(args) {
          return (await run("capturePayment", args.reference, args.amount, null, async (decline) => ({ outcome: decline ? declined() : await inner.capturePayment(args) }))).outcome as CaptureOutcome;
        },
        async cancelPayment(args) {
          return (await run("cancelPayment", args.reference, null, null, async (decline) => ({ outcome: decline ? declined() : await inner.cancelPayment(args) }))).outcome as CancelOutcome;
        },
        async sendPayout(args) {
          return (await run("sendPayout", args.reference, args.amount, args.currency, async (decline) => ({ outcome: decline ? declined() : await inner.sendPayout(args) }))).outcome as SettlementOutcome;
        },
        async refund(args) {
          return (await run("refund", args.reference, args.amount, args.currency, async (decline) => ({ outcome: decline ? declined() : await inner.refund(args) }))).outcome as SettlementOutcome;
        },
        // Not recorded: they move no money (a card update's vaulting, a payout's destination, and
        // bringing back a failed payout's transfer, which only a live processor's event asks for).
        vaultCard: (args) => inner.vaultCard(args),
        payoutDestination: (args) => inner.payoutDestination(args),
        reclaimFailedPayout: (args) => inner.reclaimFailedPayout(args),
        attachPaymentMethod: (args) => inner.attachPaymentMethod(args),
        detachPaymentMethod: (args) => inner.detachPaymentMethod(args),
        paymentStateOf: (args) => inner.paymentStateOf(args),
      };
    },
    install() {
      useProcessor((inner) => ledger.wrap(inner));
    },
    uninstall() {
      useProcessor();
    },
    inject(...next: ProcessorFault[]) {
      faults = next.map((fault) => ({ fault, seen: 0 }));
    },
    moneyMoved(methods, since = 0) {
      const wanted = asList(methods, MONEY_METHODS);
      return calls.slice(since).filter((c) => c.moved && wanted.includes(c.method));
    },
    checkpoint: () => calls.length,
    async idle() {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
  return ledger;
}

/**
 * A processor whose every call waits on `gate` before it is made and again before its answer is
 * returned, so an interleaving scheduler (fc.scheduler) orders processor calls against D1 round
 * trips and other workers.
 */
export function gatedProcessor(inner: Processor, gate: (label: string) => Promise<unknown>): Processor {
  const around = async <T>(label: string, call: () => Promise<T>): Promise<T> => {
    await gate(`${label} sent`);
    const result = await call();
    await gate(`${label} answered`);
    return result;
  };
  return {
    chargeCard: (args) => around(`chargeCard ${args.reference}`, () => inner.chargeCard(args)),
    chargeToken: (args) => around(`chargeToken ${args.reference}`, () => inner.chargeToken(args)),
    tokenizeDestination: (card) => around("tokenizeDestination", () => inner.tokenizeDestination(card)),
    sendPayout: (args) => around(`sendPayout ${args.reference}`, () => inner.sendPayout(args)),
    refund: (args) => around(`refund ${args.reference}`, () => inner.refund(args)),
    vaultCard: (args) => around(`vaultCard ${args.reference}`, () => inner.vaultCard(args)),
    payoutDestination: (args) => around("payoutDestination", () => inner.payoutDestination(args)),
    reclaimFailedPayout: (args) => around(`reclaimFailedPayout ${args.reference}`, () => inner.reclaimFailedPayout(args)),
    attachPaymentMethod: (args) => around(`attachPaymentMethod ${args.reference}`, () => inner.attachPaymentMethod(args)),
    detachPaymentMethod: (args) => around(`detachPaymentMethod ${args.reference}`, () => inner.detachPaymentMethod(args)),
    authorizeCard: (args) => around(`authorizeCard ${args.reference}`, () => inner.authorizeCard(args)),
    paymentStateOf: (args) => around(`paymentStateOf ${args.chargeReference}`, () => inner.paymentStateOf(args)),
    capturePayment: (args) => around(`capturePayment ${args.reference}`, () => inner.capturePayment(args)),
    cancelPayment: (args) => around(`cancelPayment ${args.reference}`, () => inner.cancelPayment(args)),
  };
}

// ---------------------------------------------------------------------------------------------
// Outbound fetch: webhook receivers

export type ReceiverMode = "ok" | "slow_ok" | "hang" | "fail5xx" | "ok_after_timeout" | "network_error";

export interface ReceivedRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  mode: ReceiverMode;
  /** What the sender saw: a status, or that its signal aborted the request. */
  result: number | "aborted" | "network_error" | "pending";
}

export interface Receivers {
  readonly received: ReceivedRequest[];
  /** Awaited before each answer (an interleaving scheduler decides when the receiver answers); null to remove. */
  gate(next: ((request: ReceivedRequest) => Promise<unknown>) | null): void;
  /** Modes for the requests to come, in order; the last one repeats. */
  answer(...modes: ReceiverMode[]): void;
  restore(): void;
}

const abortReason = (signal: AbortSignal) =>
  signal.reason instanceof Error ? signal.reason : new DOMException("The operation was aborted due to timeout", "TimeoutError");

/**
 * Answers outbound fetches to `origin` (the simulated receivers of test/support/receiver.ts),
 * passing every other fetch through. `hang` never answers until the request's AbortSignal fires;
 * `ok_after_timeout` answers 200 only after the signal fired (the receiver processed it, but too
 * late: the sender must count the attempt as failed); `fail5xx` answers 503 without Retry-After.
 */
export function installReceivers(origin: string, ...modes: ReceiverMode[]): Receivers {
  const received: ReceivedRequest[] = [];
  let answers: ReceiverMode[] = modes.length > 0 ? modes : ["ok"];
  let gate: ((request: ReceivedRequest) => Promise<unknown>) | null = null;
  const original = globalThis.fetch;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (!request.url.startsWith(origin)) return original(input, init);
    const mode = answers.length > 1 ? answers.shift()! : answers[0];
    const entry: ReceivedRequest = { url: request.url, headers: Object.fromEntries(request.headers), body: await request.text(), mode, result: "pending" };
    received.push(entry);
    if (gate) await gate(entry);
    const signal = init?.signal ?? request.signal;
    const aborted = () =>
      new Promise<void>((resolve) => {
        if (signal?.aborted) return resolve();
        signal?.addEventListener("abort", () => resolve(), { once: true });
      });
    switch (mode) {
      case "ok":
        entry.result = 200;
        return new Response("ok", { status: 200 });
      case "slow_ok":
        // Answers 200 after a while, well within the sender's timeout: an attempt stays in flight.
        await sleep(60);
        entry.result = 200;
        return new Response("ok", { status: 200 });
      case "fail5xx":
        entry.result = 503;
        return new Response("unavailable", { status: 503 });
      case "network_error":
        entry.result = "network_error";
        throw new TypeError("Network connection lost.");
      case "hang":
        await aborted();
        entry.result = "aborted";
        throw abortReason(signal!);
      case "ok_after_timeout":
        await aborted();
        entry.result = 200;
        return new Response("ok, but late", { status: 200 });
    }
  });
  return {
    received,
    answer(...next: ReceiverMode[]) {
      answers = next.length > 0 ? next : ["ok"];
    },
    gate(next) {
      gate = next;
    },
    restore: () => spy.mockRestore(),
  };
}

/**
 * Makes every AbortSignal.timeout(ms) fire after `ms` (a short time) instead, so a hung receiver
 * is given up on in milliseconds rather than the 15 s the consumer allows. The signal still
 * aborts with a TimeoutError, as the real one does.
 */
export function compressTimeouts(ms = 40) {
  const spy = vi.spyOn(AbortSignal, "timeout").mockImplementation(() => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")), ms);
    return controller.signal;
  });
  return { restore: () => spy.mockRestore() };
}

// ---------------------------------------------------------------------------------------------
// Background handlers that may move between modules

type RenewChunk = (env: import("../../src/env").Bindings, subscriptionIds: string[], now?: number) => Promise<string[]>;
const billingModules = import.meta.glob<Record<string, unknown>>(["../../src/billing/renewals.ts", "../../src/billing/periods.ts"], { eager: true });
const fromBilling = <T>(name: string): T | undefined => Object.values(billingModules).map((m) => m[name]).find((v) => v !== undefined) as T | undefined;

/** The renewal job (src/billing/renewals.ts today, perhaps src/billing/periods.ts later). */
export const renewChunk: RenewChunk = (...args) => {
  const handler = fromBilling<RenewChunk>("renewChunk");
  if (!handler) throw new Error("renewChunk is exported by neither src/billing/renewals.ts nor src/billing/periods.ts");
  return handler(...args);
};
/** How old a period claim must be before another run may take it over. */
export const claimStaleMs = () => fromBilling<number>("CLAIM_STALE_MS") ?? 10 * 60_000;

// ---------------------------------------------------------------------------------------------
// Gates: hold one worker at a chosen point while another runs

/** A promise and the function that settles it: holds a worker at a chosen point. */
export function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * Wraps the sandbox (through useProcessor) so that every money call is recorded by method and
 * reference, and optionally held at a gate. Reset with useProcessor().
 */
export function recordingProcessor(hold?: (method: string) => Promise<void> | undefined) {
  const calls: { method: string; reference: string }[] = [];
  useProcessor((sandbox) => {
    const wrap =
      <K extends keyof Processor>(method: K) =>
      async (args: Parameters<Processor[K]>[0]) => {
        calls.push({ method, reference: (args as { reference?: string }).reference ?? "" });
        await hold?.(method);
        return (sandbox[method] as (a: unknown) => Promise<unknown>)(args);
      };
    return {
      ...sandbox,
      chargeCard: wrap("chargeCard"),
      chargeToken: wrap("chargeToken"),
      sendPayout: wrap("sendPayout"),
      refund: wrap("refund"),
    } as Processor;
  });
  return calls;
}
