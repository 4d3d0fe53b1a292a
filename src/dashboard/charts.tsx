// Server-rendered SVG bar charts for the overview (no library, no script): one bar per day for the
// last 30 days, a light grid, the largest value on the axis, and a <title> per bar for hover.
// Colours come from the stylesheet through classes (the CSP allows no inline style).
// Each chart is drawn twice, for a laptop and for a phone, and the stylesheet shows one: an SVG
// scales its text with its width, so the laptop's 720-unit drawing shrunk to a phone's 340 px would
// have 5 px labels. The phone's drawing is 360 units wide, so its labels stay about 10 px.

interface Frame {
  width: number;
  height: number;
  pad: { top: number; right: number; bottom: number; left: number };
  variant: "wide" | "narrow";
}

const WIDE: Frame = { width: 720, height: 220, pad: { top: 16, right: 12, bottom: 28, left: 64 }, variant: "wide" };
const NARROW: Frame = { width: 360, height: 200, pad: { top: 14, right: 10, bottom: 26, left: 64 }, variant: "narrow" };
/** Roughly the width of one character of the 11-unit label font, for room on the left of the axis. */
const CHAR_WIDTH = 6.2;

export interface Bar {
  day: string;
  /** null: nothing to measure that day (drawn as a faint stub). */
  value: number | null;
  label: string;
  tone?: "low" | "zero";
}

export function BarChart(props: { bars: Bar[]; max: number; axisLabel: (value: number) => string; title: string }) {
  return (
    <>
      <Chart {...props} frame={WIDE} />
      <Chart {...props} frame={NARROW} />
    </>
  );
}

function Chart({ bars, max, axisLabel, title, frame }: { bars: Bar[]; max: number; axisLabel: (value: number) => string; title: string; frame: Frame }) {
  const top0 = max > 0 ? max : 1;
  const longest = Math.max(...[0, 0.5, 1].map((f) => axisLabel(f * top0).length));
  const PAD = { ...frame.pad, left: Math.max(frame.pad.left, Math.ceil(longest * CHAR_WIDTH) + 10) };
  const WIDTH = frame.width;
  const HEIGHT = frame.height;
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const step = plotW / bars.length;
  const barW = Math.max(2, step * 0.7);
  const top = max > 0 ? max : 1;
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const ticks = [0, 0.5, 1].map((f) => f * top);
  const labelled = new Set([0, Math.floor(bars.length / 2), bars.length - 1]);
  return (
    <svg class={`chart chart-${frame.variant}`} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={title}>
      <title>{title}</title>
      {ticks.map((t) => (
        <>
          <line class="grid" x1={PAD.left} x2={WIDTH - PAD.right} y1={y(t)} y2={y(t)} />
          <text x={PAD.left - 6} y={y(t) + 4} text-anchor="end">
            {axisLabel(t)}
          </text>
        </>
      ))}
      <line class="axis" x1={PAD.left} x2={WIDTH - PAD.right} y1={PAD.top + plotH} y2={PAD.top + plotH} />
      {bars.map((bar, i) => {
        const x = PAD.left + i * step + (step - barW) / 2;
        if (bar.value === null) {
          return (
            <rect class="none" x={x} y={PAD.top + plotH - 2} width={barW} height={2}>
              <title>{`${bar.day}: ${bar.label}`}</title>
            </rect>
          );
        }
        const h = Math.max(bar.value > 0 ? 1 : 2, PAD.top + plotH - y(bar.value));
        return (
          <rect class={`bar${bar.tone ? ` ${bar.tone}` : ""}`} x={x} y={PAD.top + plotH - h} width={barW} height={h} data-day={bar.day}>
            <title>{`${bar.day}: ${bar.label}`}</title>
          </rect>
        );
      })}
      {bars.map((bar, i) =>
        labelled.has(i) ? (
          <text x={PAD.left + i * step + step / 2} y={HEIGHT - 8} text-anchor="middle">
            {bar.day.slice(5)}
          </text>
        ) : null,
      )}
    </svg>
  );
}
