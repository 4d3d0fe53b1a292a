// Text in any script for the invoice PDF (src/billing/invoice-pdf.ts): Noto fonts packed from npm
// (scripts/pack-fonts.mjs, generated/invoice-fonts.bin, a Data module of about 5 MB, each font
// deflated) and embedded with @pdf-lib/fontkit, each subset to the glyphs the document draws
// (Arabic whole: see PdfText.font).
//
// Each character is drawn by the first font of the pack whose cmap has it: Noto Sans (Latin,
// Greek, Cyrillic, Vietnamese; regular and bold), Noto Sans Hebrew, Noto Sans Arabic, then the
// slices of Noto Sans SC (CJK ideographs, kana) and Noto Sans KR (Hangul). Only the slices a
// document's text needs are parsed and embedded. Bold falls back to regular where a script has no
// bold (CJK, Hangul). A character no font has (an emoji) is drawn as U+FFFD "�", never dropped
// and never "?".
//
// Right-to-left text: fontkit shapes a run (Arabic joining forms) and lays an Arabic or Hebrew run
// out in visual order. Spaces and punctuation between two letters of one font belong to that
// font's run, so an RTL name with spaces is one run; consecutive RTL runs (Hebrew then Arabic) are
// drawn in reverse order. The line's base direction stays left to right: this is a simple bidi
// run reversal, not the full Unicode Bidirectional Algorithm (digits inside RTL text are drawn as
// their own left-to-right run).
import type { Color, PDFDocument, PDFFont, PDFPage } from "pdf-lib";

export type Weight = "regular" | "bold";

interface PackedFont {
  family: string;
  subset: string;
  weight: number;
  /** The code points its cmap has, as sorted [first, last] ranges. */
  ranges: [number, number][];
  offset: number;
  length: number;
}

interface Catalog {
  fonts: PackedFont[];
  data: Uint8Array;
  /** Per regular font (pack order): its index, and its bold twin's (or its own). */
  slots: { regular: number; bold: number }[];
}

let catalog: Catalog | null = null;
type Fontkit = Parameters<PDFDocument["registerFontkit"]>[0];
let loading: Promise<Fontkit> | null = null;

/**
 * fontkit and the font pack, loaded on the first PDF of an isolate (dynamic imports: a request that
 * draws no PDF never evaluates them), and the pack's header read.
 */
function loadFonts(): Promise<Fontkit> {
  loading ??= Promise.all([import("@pdf-lib/fontkit"), import("../../generated/invoice-fonts.bin")]).then(([fontkit, pack]) => {
    catalog = readCatalog(pack.default);
    return fontkit.default;
  });
  loading.catch(() => (loading = null));
  return loading;
}

/** The pack's catalog, once loadFonts has read it. */
function catalogOf(): Catalog {
  if (!catalog) throw new Error("the invoice fonts are not loaded yet (PdfText.for loads them)");
  return catalog;
}

function readCatalog(packed: ArrayBuffer): Catalog {
  const bytes = new Uint8Array(packed);
  if (new TextDecoder().decode(bytes.subarray(0, 4)) !== "TFP1") throw new Error("invoice-fonts.bin is not a font pack");
  const headerLength = new DataView(packed).getUint32(4, true);
  const { fonts } = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))) as { fonts: PackedFont[] };
  const slots: Catalog["slots"] = [];
  fonts.forEach((font, index) => {
    if (font.weight !== 400) return;
    const bold = fonts.findIndex((f) => f.family === font.family && f.subset === font.subset && f.weight === 700);
    slots.push({ regular: index, bold: bold === -1 ? index : bold });
  });
  return { fonts, data: bytes.subarray(8 + headerLength), slots };
}

const has = (font: PackedFont, cp: number) => {
  let lo = 0;
  let hi = font.ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [first, last] = font.ranges[mid];
    if (cp < first) hi = mid - 1;
    else if (cp > last) lo = mid + 1;
    else return true;
  }
  return false;
};

const slotCache = new Map<number, number>();
/** The slot (index into catalog.slots) of the first font that has `cp`, or -1. */
function slotOf(cp: number): number {
  const cached = slotCache.get(cp);
  if (cached !== undefined) return cached;
  const { fonts, slots } = catalogOf();
  const slot = slots.findIndex((s) => has(fonts[s.regular], cp));
  slotCache.set(cp, slot);
  return slot;
}

const REPLACEMENT = "\uFFFD";
const RTL_FAMILIES = new Set(["noto-sans-hebrew", "noto-sans-arabic"]);
const RTL = /[\p{Script=Hebrew}\p{Script=Arabic}]/u;
/** Characters that take the font of the letters around them: spaces, punctuation, symbols, marks. */
const NEUTRAL = /^[\p{Z}\p{P}\p{S}\p{M}]$/u;

/** A piece of a line drawn with one font. */
interface Run {
  slot: number;
  text: string;
  rtl: boolean;
}

/** `text` cut into runs of one font each, in the order they are drawn left to right. */
function runsOf(text: string): Run[] {
  const chars = [...text.normalize("NFC").replace(/[\u0000-\u001f\u007f]/g, " ")];
  const slots = chars.map((char) => slotOf(char.codePointAt(0) as number));
  // A neutral character between two characters of one font is drawn with that font.
  const strong = chars.map((char, i) => !NEUTRAL.test(char) && slots[i] !== -1);
  const { fonts, slots: catalogSlots } = catalogOf();
  for (let i = 0; i < chars.length; i++) {
    if (strong[i]) continue;
    let before = i - 1;
    while (before >= 0 && !strong[before]) before--;
    let after = i + 1;
    while (after < chars.length && !strong[after]) after++;
    const around = before >= 0 && after < chars.length && slots[before] === slots[after] ? slots[before] : -1;
    if (around !== -1 && has(fonts[catalogSlots[around].regular], chars[i].codePointAt(0) as number)) slots[i] = around;
  }
  const runs: Run[] = [];
  chars.forEach((char, i) => {
    const slot = slots[i] === -1 ? slotOf(REPLACEMENT.codePointAt(0) as number) : slots[i];
    const shown = slots[i] === -1 ? REPLACEMENT : char;
    const last = runs.at(-1);
    if (last && last.slot === slot) last.text += shown;
    else runs.push({ slot, text: shown, rtl: false });
  });
  for (const run of runs) run.rtl = RTL.test(run.text);
  // Consecutive right-to-left runs (and the neutral runs between them) are drawn in reverse order.
  const ordered: Run[] = [];
  for (let i = 0; i < runs.length; ) {
    if (!runs[i].rtl) {
      ordered.push(runs[i++]);
      continue;
    }
    let end = i;
    for (let j = i + 1; j < runs.length; j++) {
      if (runs[j].rtl) end = j;
      else if (![...runs[j].text].every((c) => NEUTRAL.test(c))) break;
    }
    ordered.push(...runs.slice(i, end + 1).reverse());
    i = end + 1;
  }
  return ordered;
}

const inflated = new Map<number, Promise<Uint8Array>>();
/** A packed font's OpenType bytes, inflated once per isolate. */
function fontBytes(index: number): Promise<Uint8Array> {
  let bytes = inflated.get(index);
  if (!bytes) {
    const { fonts, data } = catalogOf();
    const { offset, length } = fonts[index];
    const stream = new Blob([data.subarray(offset, offset + length)]).stream().pipeThrough(new DecompressionStream("deflate"));
    bytes = new Response(stream).arrayBuffer().then((buffer) => new Uint8Array(buffer));
    bytes.catch(() => inflated.delete(index));
    inflated.set(index, bytes);
  }
  return bytes;
}

/** Fonts embedded in one PDF document, as its text needs them. */
export class PdfText {
  private readonly embedded = new Map<number, Promise<PDFFont>>();

  private constructor(private readonly doc: PDFDocument) {}

  /** The fonts of `doc`, with fontkit and the pack loaded. */
  static async for(doc: PDFDocument): Promise<PdfText> {
    doc.registerFontkit(await loadFonts());
    return new PdfText(doc);
  }

  private font(slot: number, weight: Weight): Promise<PDFFont> {
    const { fonts, slots } = catalogOf();
    const index = weight === "bold" ? slots[slot].bold : slots[slot].regular;
    let font = this.embedded.get(index);
    if (!font) {
      // A fixed name (a subset's six-letter tag from its index), so the same text always makes the same bytes.
      const tag = [0, 1, 2, 3, 4, 5].map((k) => String.fromCharCode(65 + (Math.floor(index / 26 ** k) % 26))).join("");
      const name = `${tag}+${fonts[index].family}-${fonts[index].subset.replace(/\W/g, "")}-${fonts[index].weight}`;
      // Hebrew and Arabic are laid out without `ccmp`: Noto Sans Arabic's decomposes a letter into its
      // body and a dots glyph that stands for no letter, which the PDF's text would then show as junk.
      // Precomposed, every glyph is one letter, and the PDF's text extracts as the letters it shows.
      const features = RTL_FAMILIES.has(fonts[index].family) ? { ccmp: false } : undefined;
      // fontkit's subset of Noto Sans Arabic draws most letters blank (seen in poppler): the Arabic
      // slice is embedded whole (about 130 KB), the others as subsets.
      const subset = fonts[index].family !== "noto-sans-arabic";
      font = fontBytes(index).then((bytes) => this.doc.embedFont(bytes, { subset, customName: name, features }));
      this.embedded.set(index, font);
    }
    return font;
  }

  /** The runs of `text`, each with its embedded font. */
  async runs(text: string, weight: Weight): Promise<{ font: PDFFont; text: string; rtl: boolean }[]> {
    return Promise.all(runsOf(text).map(async (run) => ({ font: await this.font(run.slot, weight), text: run.text, rtl: run.rtl })));
  }

  /** The width of `text` at `size`, in points. */
  async width(text: string, size: number, weight: Weight = "regular"): Promise<number> {
    let width = 0;
    for (const run of await this.runs(text, weight)) width += run.font.widthOfTextAtSize(run.text, size);
    return width;
  }

  /** Draws `text` on one line from `x` (its left edge). */
  async draw(page: PDFPage, text: string, x: number, y: number, options: { size: number; weight?: Weight; color: Color }) {
    let at = x;
    for (const run of await this.runs(text, options.weight ?? "regular")) {
      page.drawText(run.text, { x: at, y, size: options.size, font: run.font, color: options.color });
      at += run.font.widthOfTextAtSize(run.text, options.size);
    }
  }

  /**
   * `text` in lines no wider than `maxWidth`: broken between words, and inside a word (or between
   * any two CJK characters) only where a word alone is wider than the line.
   */
  async wrap(text: string, size: number, maxWidth: number, weight: Weight = "regular"): Promise<string[]> {
    const tokens = text.replace(/\s+/g, " ").trim().match(/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]|[^\s\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]+|\s+/gu) ?? [];
    const widths = await Promise.all(tokens.map((token) => this.width(token, size, weight)));
    const lines: string[] = [];
    let line = "";
    let lineWidth = 0;
    const flush = () => {
      if (line.trim() !== "") lines.push(line.trimEnd());
      line = "";
      lineWidth = 0;
    };
    for (const [i, token] of tokens.entries()) {
      if (token === " ") {
        if (line !== "") (line += token), (lineWidth += widths[i]);
        continue;
      }
      if (lineWidth + widths[i] <= maxWidth || line === "") {
        line += token;
        lineWidth += widths[i];
        if (lineWidth <= maxWidth) continue;
      } else {
        flush();
        line = token;
        lineWidth = widths[i];
        if (lineWidth <= maxWidth) continue;
      }
      // A word wider than a whole line is broken where it must be.
      const chars = [...line];
      const charWidths = await Promise.all(chars.map((char) => this.width(char, size, weight)));
      line = "";
      lineWidth = 0;
      chars.forEach((char, k) => {
        if (lineWidth + charWidths[k] > maxWidth && line !== "") flush();
        line += char;
        lineWidth += charWidths[k];
      });
    }
    flush();
    return lines.length > 0 ? lines : [""];
  }

}
