// Packs the fonts an invoice PDF draws with (src/billing/pdf-fonts.ts) from their npm packages
// (@fontsource, Noto, SIL Open Font License) into generated/invoice-fonts.bin, which the Worker
// bundles as one Data module (wrangler.toml [[rules]]). Run by scripts/copy-assets.mjs, so by
// every `wrangler dev`, `wrangler deploy`, `npm test` and `npm run bench`.
//
// The fonts, in the order a character looks for one (the first that has it draws it):
//   Noto Sans           Latin, Latin Extended, Greek, Cyrillic, Vietnamese; regular and bold
//   Noto Sans Hebrew    Hebrew; regular and bold
//   Noto Sans Arabic    Arabic; regular and bold
//   Noto Sans SC        CJK ideographs, kana, CJK punctuation, in Google Fonts' ~100 slices; regular
//   Noto Sans KR        Hangul (the slices that hold it); regular
// Each is a WOFF slice as fontsource ships it, unwrapped here into the plain OpenType font it holds
// (fontkit subsets those; it cannot subset a WOFF2's transformed glyphs) and deflated whole (zlib),
// so the Worker inflates only the slices a document's text needs, and embeds those subset to the
// glyphs it draws.
//
// Layout: "TFP1", a u32 (little-endian) header length, the header (JSON: each font's family,
// weight, the code points its cmap really has as [first, last] ranges, and its offset and length
// in the data), then the fonts, each deflated. The same packages always pack to the same bytes.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { deflateSync, inflateSync } from "node:zlib";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const fontkit = require("@pdf-lib/fontkit");
const target = join(root, "generated", "invoice-fonts.bin");
const stampFile = join(root, "generated", "invoice-fonts.stamp");

const pkg = (name) => join(root, "node_modules", "@fontsource", name);
const FAMILIES = ["noto-sans", "noto-sans-hebrew", "noto-sans-arabic", "noto-sans-sc", "noto-sans-kr"];
// What the pack is made from: this script and the font packages' versions. A pack already made from
// them is left as it is, without reading a font (this runs before every test run and wrangler build).
const stamp = createHash("sha256")
  .update(readFileSync(fileURLToPath(import.meta.url)))
  .update(FAMILIES.map((name) => `${name}@${JSON.parse(readFileSync(join(pkg(name), "package.json"), "utf8")).version}`).join(","))
  .digest("hex");
if (existsSync(target) && existsSync(stampFile) && readFileSync(stampFile, "utf8") === stamp) process.exit(0);
const unicodeOf = (name) => JSON.parse(readFileSync(join(pkg(name), "unicode.json"), "utf8"));
const file = (name, subset, weight) => join(pkg(name), "files", `${name}-${subset.replace(/^\[(\d+)\]$/, "$1")}-${weight}-normal.woff`);

/** [package, subsets, weights] in the order a character looks for a font. */
const HANGUL = [[0x1100, 0x11ff], [0x3130, 0x318f], [0xa960, 0xa97f], [0xac00, 0xd7af], [0xd7b0, 0xd7ff]];
const holdsHangul = (ranges) =>
  ranges.split(",").some((range) => {
    const [a, b = a] = range.trim().replace(/U\+/g, "").split("-").map((h) => parseInt(h, 16));
    return HANGUL.some(([lo, hi]) => a <= hi && b >= lo);
  });
const numbered = (name, keep = () => true) => Object.entries(unicodeOf(name)).filter(([subset, ranges]) => /^\[\d+\]$/.test(subset) && keep(ranges)).map(([subset]) => subset);
const SOURCES = [
  ["noto-sans", ["latin", "latin-ext", "greek", "greek-ext", "cyrillic", "cyrillic-ext", "vietnamese"], [400, 700]],
  ["noto-sans-hebrew", ["hebrew"], [400, 700]],
  ["noto-sans-arabic", ["arabic"], [400, 700]],
  ["noto-sans-sc", numbered("noto-sans-sc"), [400]],
  ["noto-sans-kr", numbered("noto-sans-kr", holdsHangul), [400]],
];

/** The OpenType font a WOFF 1.0 file holds (its tables inflated, in the same order). */
function sfntOf(woff) {
  if (woff.readUInt32BE(0) !== 0x774f4646) throw new Error("not a WOFF file");
  const flavor = woff.readUInt32BE(4);
  const numTables = woff.readUInt16BE(12);
  const tables = [];
  for (let i = 0; i < numTables; i++) {
    const at = 44 + i * 20;
    const tag = woff.readUInt32BE(at);
    const offset = woff.readUInt32BE(at + 4);
    const compLength = woff.readUInt32BE(at + 8);
    const origLength = woff.readUInt32BE(at + 12);
    const checksum = woff.readUInt32BE(at + 16);
    const stored = woff.subarray(offset, offset + compLength);
    tables.push({ tag, checksum, data: compLength < origLength ? inflateSync(stored) : stored });
  }
  let searchRange = 1;
  let entrySelector = 0;
  while (searchRange * 2 <= numTables) (searchRange *= 2), entrySelector++;
  const head = Buffer.alloc(12 + numTables * 16);
  head.writeUInt32BE(flavor, 0);
  head.writeUInt16BE(numTables, 4);
  head.writeUInt16BE(searchRange * 16, 6);
  head.writeUInt16BE(entrySelector, 8);
  head.writeUInt16BE(numTables * 16 - searchRange * 16, 10);
  const parts = [head];
  let offset = head.length;
  tables.forEach((table, i) => {
    head.writeUInt32BE(table.tag, 12 + i * 16);
    head.writeUInt32BE(table.checksum, 12 + i * 16 + 4);
    head.writeUInt32BE(offset, 12 + i * 16 + 8);
    head.writeUInt32BE(table.data.length, 12 + i * 16 + 12);
    const padded = Buffer.alloc((table.data.length + 3) & ~3);
    table.data.copy(padded);
    parts.push(padded);
    offset += padded.length;
  });
  return Buffer.concat(parts);
}

/** Sorted code points as [first, last] ranges. */
function rangesOf(codePoints) {
  const sorted = [...new Set(codePoints)].sort((a, b) => a - b);
  const ranges = [];
  for (const cp of sorted) {
    const last = ranges.at(-1);
    if (last && cp === last[1] + 1) last[1] = cp;
    else ranges.push([cp, cp]);
  }
  return ranges;
}

const fonts = [];
const chunks = [];
let offset = 0;
for (const [name, subsets, weights] of SOURCES) {
  for (const subset of subsets) {
    for (const weight of weights) {
      const sfnt = sfntOf(readFileSync(file(name, subset, weight)));
      const font = fontkit.create(sfnt);
      const bytes = deflateSync(sfnt, { level: 9 });
      fonts.push({ family: name, subset, weight, ranges: rangesOf(font.characterSet.filter((cp) => cp >= 0x20)), offset, length: bytes.length });
      chunks.push(bytes);
      offset += bytes.length;
    }
  }
}
const header = Buffer.from(JSON.stringify({ fonts }), "utf8");
const size = Buffer.alloc(4);
size.writeUInt32LE(header.length);
const packed = Buffer.concat([Buffer.from("TFP1"), size, header, ...chunks]);
mkdirSync(dirname(target), { recursive: true });
if (!existsSync(target) || !readFileSync(target).equals(packed)) {
  writeFileSync(target, packed);
  console.error(`pack-fonts: ${fonts.length} fonts -> generated/invoice-fonts.bin (${packed.length} bytes)`);
}
writeFileSync(stampFile, stamp);
