// Batches that several callers of one invocation write at about the same moment, sent to D1 as one
// batch (one round trip) rather than one each: the messages of a delivery queue batch claim their
// attempts together, then record them together (src/webhooks/consumer.ts).
//
// Each caller takes a ticket first, so a gathering knows who may still come. It goes to D1 as soon
// as every ticket holder is in it or has left, or `lingerMs` after its first caller came, whichever
// is first: a slow caller holds the others back by `lingerMs` at most. Each caller gets its own
// statements' results, in its own order. A shared batch that fails is sent again caller by caller,
// so one caller's failing statement never fails another's writes: each caller's statements are one
// atomic batch either way. A caller whose statements may be sent twice this way (the shared batch
// committed and its answer was lost) must write only what is conditional on the rows it read, as
// the consumer's claims and records are.
import type { Db } from "./client";
import { runBatch, type Statement } from "./batch";

export interface GatherTicket {
  /** Runs `statements` as one batch, gathered with the other holders'; its results, in order. A second run goes alone. */
  run(statements: Statement[]): Promise<unknown[]>;
  /** This holder will not run (it ended, or went another way): the others need not wait for it. Idempotent. */
  leave(): void;
}

export interface Gathering {
  ticket(): GatherTicket;
}

interface Waiting {
  statements: Statement[];
  resolve: (results: unknown[]) => void;
  reject: (error: unknown) => void;
}

export function gatherBatches(db: Db, lingerMs: number): Gathering {
  let holders = 0;
  let waiting: Waiting[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;

  const alone = async (w: Waiting) => {
    try {
      w.resolve(await runBatch(db, w.statements));
    } catch (error) {
      w.reject(error);
    }
  };
  const send = async () => {
    clearTimeout(timer);
    timer = undefined;
    const taken = waiting;
    waiting = [];
    if (taken.length === 0) return;
    if (taken.length > 1) {
      let results: unknown[] | undefined;
      try {
        results = await runBatch(db, taken.flatMap((w) => w.statements));
      } catch {
        // Sent again one caller at a time, below.
      }
      if (results) {
        let at = 0;
        for (const w of taken) w.resolve(results.slice(at, (at += w.statements.length)));
        return;
      }
    }
    await Promise.all(taken.map(alone));
  };
  const check = () => {
    if (waiting.length === 0) return;
    if (holders === 0) void send();
    else timer ??= setTimeout(() => void send(), lingerMs);
  };

  return {
    ticket() {
      holders++;
      let held = true;
      const out = () => {
        if (!held) return false;
        held = false;
        holders--;
        return true;
      };
      return {
        run(statements) {
          if (!out()) return runBatch(db, statements);
          return new Promise<unknown[]>((resolve, reject) => {
            waiting.push({ statements, resolve, reject });
            check();
          });
        },
        leave() {
          if (out()) check();
        },
      };
    },
  };
}
