// Checks the proof suites run after the fact: several invariants at once (each named in one
// error), and the runtime's prototypes unchanged (no prototype pollution).
import { expect } from "vitest";

/** Runs every check, then throws one error naming each invariant that failed. */
export async function invariants(context: string, checks: (() => Promise<void> | void)[]) {
  const failures: string[] = [];
  for (const check of checks) {
    try {
      await check();
    } catch (error) {
      failures.push(error instanceof Error ? error.message : String(error));
    }
  }
  if (failures.length > 0) throw new Error(`${context}\n${failures.join("\n")}`);
}

/** The names Object.prototype and friends hold now, to prove later that nothing was added. */
export function prototypeNames() {
  return {
    object: Object.getOwnPropertyNames(Object.prototype).sort(),
    array: Object.getOwnPropertyNames(Array.prototype).sort(),
    function: Object.getOwnPropertyNames(Function.prototype).sort(),
    string: Object.getOwnPropertyNames(String.prototype).sort(),
  };
}

export function expectNoPollution(baseline: ReturnType<typeof prototypeNames>) {
  const probe = {} as Record<string, unknown>;
  for (const name of ["polluted", "isAdmin", "amount", "status", "scopes", "account_id", "x"]) {
    expect(probe[name], `Object.prototype.${name}`).toBeUndefined();
    expect(([] as unknown as Record<string, unknown>)[name], `Array.prototype.${name}`).toBeUndefined();
  }
  expect(prototypeNames()).toEqual(baseline);
  expect(Object.getPrototypeOf({})).toBe(Object.prototype);
}
