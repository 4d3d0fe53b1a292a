// The name a caller probably meant, for "Unknown field descripton. Did you mean description?".

/** Edit distance where swapping two neighbouring letters counts as one edit (optimal string alignment). */
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
    }
  }
  return rows[a.length][b.length];
}

/**
 * The candidate closest to `word` (case ignored), when it is close enough to be a typo: at most
 * one edit in three letters of the longer name, and at least one edit allowed. Otherwise undefined.
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  const lower = word.toLowerCase();
  for (const candidate of candidates) {
    const d = distance(lower, candidate.toLowerCase());
    if (d < bestDistance && d <= Math.max(1, Math.floor(Math.max(lower.length, candidate.length) / 3))) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** A route as the router knows it: its method and its path, with `:name` for a parameter. */
export interface KnownRoute {
  method: string;
  path: string;
}

/**
 * The route a request for `method path` probably meant, as that request would have written it
 * (its own ids in the parameters' places): a path of as many segments whose fixed segments are
 * each a typo away (`/payouts` for `/payout`), or the same path under another method. The fewest
 * edits win, another method counting as one and a half (POST /payouts means POST /payout, not
 * GET /payouts); undefined when nothing is that close.
 */
export function closestRoute(method: string, path: string, routes: readonly KnownRoute[]): string | undefined {
  const asked = path.split("/").filter(Boolean);
  let best: { edits: number; text: string } | undefined;
  for (const route of routes) {
    const pattern = route.path.split("/").filter(Boolean);
    if (pattern.length !== asked.length || route.path.includes("*")) continue;
    let edits = 0;
    const written: string[] = [];
    for (const [i, segment] of pattern.entries()) {
      if (segment.startsWith(":")) {
        written.push(asked[i]);
        continue;
      }
      const d = distance(asked[i].toLowerCase(), segment.toLowerCase());
      if (d > Math.max(1, Math.floor(Math.max(asked[i].length, segment.length) / 3))) {
        edits = Infinity;
        break;
      }
      edits += d;
      written.push(segment);
    }
    const sameMethod = route.method.toUpperCase() === method.toUpperCase();
    const score = edits + (sameMethod ? 0 : 1.5);
    if (edits === Infinity || score === 0) continue;
    if (!best || score < best.edits) best = { edits: score, text: `${route.method.toUpperCase()} /${written.join("/")}` };
  }
  return best?.text;
}
