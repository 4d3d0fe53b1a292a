// Stand-ins for a customer's webhook receiver: outbound fetches to RECEIVER_ORIGIN are answered
// here (the Worker under test runs in this isolate, so it calls this fetch), everything else
// passes through. Only the receiver is simulated; D1, the queue and the Durable Object are real.
// (Receivers that hang, fail or answer late are in faults.ts.)
import { vi } from "vitest";

export const RECEIVER_ORIGIN = "https://receiver.example.com";

export interface Received {
  url: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export function installReceiver() {
  const received: Received[] = [];
  const answers: (number | (() => Response))[] = [];
  const original = globalThis.fetch;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (!request.url.startsWith(RECEIVER_ORIGIN)) return original(input, init);
    received.push({ url: request.url, headers: Object.fromEntries(request.headers), body: await request.text(), at: Date.now() });
    const next = answers.length > 1 ? answers.shift()! : (answers[0] ?? 200);
    return typeof next === "number" ? new Response(next === 200 ? "ok" : `status ${next}`, { status: next }) : next();
  });
  return {
    received,
    /** Answers to give, in order; the last one repeats. A number is a status; a function builds a Response. */
    answer(...next: (number | (() => Response))[]) {
      answers.splice(0, answers.length, ...next);
    },
    restore: () => spy.mockRestore(),
  };
}

/** Answers every outbound fetch (webhook deliveries) with 200, wherever it goes; nothing leaves. */
export function acceptAllOutbound() {
  const sent: string[] = [];
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    sent.push(new Request(input, init).url);
    return new Response("ok", { status: 200 });
  });
  return { sent, restore: () => spy.mockRestore() };
}
