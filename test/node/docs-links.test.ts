// Every relative link of the README, CONTRIBUTING.md, docs/*.md and the client's README resolves:
// the file (or folder) it names exists, and a `#anchor` names a heading of the Markdown file it
// points at (GitHub's slugs). Links inside code are not links; http(s) and mailto links are not checked.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./dev-server";

const DOCS = ["README.md", "CONTRIBUTING.md", "clients/typescript/README.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

/** The text outside fenced code blocks and inline code spans. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[\s\S]*?^\1[^\n]*$/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's anchors for a Markdown file's headings (a repeated heading gets -1, -2, …). */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const withoutCode = markdown.replace(/^(```|~~~)[\s\S]*?^\1[^\n]*$/gm, "");
  for (const [, heading] of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/<[^>]+>/g, "");
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  for (const [, id] of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(id);
  return anchors;
}

/** Each relative link of a Markdown file that does not resolve, with why. */
export function brokenLinks(file: string, markdown: string, exists = existsSync, read = (p: string) => readFileSync(p, "utf8")): string[] {
  const broken: string[] = [];
  const targets = [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]);
  for (const target of targets) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const [path, anchor] = target.split("#", 2) as [string, string | undefined];
    const resolved = path ? join(dirname(join(ROOT, file)), decodeURIComponent(path)) : join(ROOT, file);
    if (!exists(resolved)) {
      broken.push(`${file}: ${target} (no ${relative(ROOT, resolved)})`);
      continue;
    }
    if (anchor && resolved.endsWith(".md") && !anchorsOf(read(resolved)).has(decodeURIComponent(anchor).toLowerCase())) {
      broken.push(`${file}: ${target} (no heading #${anchor} in ${relative(ROOT, resolved)})`);
    }
  }
  return broken;
}

describe("relative links in the README and docs/", () => {
  it("finds a missing file and a missing anchor (the check can fail)", () => {
    const text = "See [a](docs/nowhere.md), [b](#no-such-heading), [c](#a-heading) and `[d](not/a/link.md)`.\n\n## A heading\n";
    expect(brokenLinks("README.md", text, existsSync, () => text)).toEqual([
      "README.md: docs/nowhere.md (no docs/nowhere.md)",
      "README.md: #no-such-heading (no heading #no-such-heading in README.md)",
    ]);
    expect(anchorsOf("# Tender\n## A first walk-through\n## `npm run dev` runs it\n## Tender")).toEqual(new Set(["tender", "a-first-walk-through", "npm-run-dev-runs-it", "tender-1"]));
  });

  it.each(DOCS)("%s: every relative link resolves", (file) => {
    expect(statSync(join(ROOT, file)).isFile()).toBe(true);
    expect(brokenLinks(file, readFileSync(join(ROOT, file), "utf8"))).toEqual([]);
  });

  it("the README links each topic of docs/ and CONTRIBUTING.md", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    for (const doc of DOCS.filter((d) => d !== "README.md" && d !== "clients/typescript/README.md")) expect(readme, doc).toContain(`](${doc})`);
  });
});
