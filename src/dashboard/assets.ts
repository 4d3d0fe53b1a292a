// The dashboard's two static files, served by the Worker at /dashboard/assets/… (the CSP allows
// scripts and styles from this origin only, and nothing inline). The script is small and only
// helps: copy buttons, the local time on hover, a confirm before destructive forms, live refresh.
// Every page works without it.

export const DASHBOARD_SCRIPT = `// Tender dashboard: progressive enhancements only.
(function () {
  "use strict";
  // Local time on hover: <time datetime> holds the UTC instant.
  for (const t of document.querySelectorAll("time[datetime]")) {
    const d = new Date(t.getAttribute("datetime"));
    if (!Number.isNaN(d.getTime())) t.title = "Local time: " + d.toLocaleString();
  }
  // Copy buttons: <button data-copy="text">.
  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
    if (!button || !navigator.clipboard) return;
    event.preventDefault();
    navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
      const label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1500);
    });
  });
  // A confirmation before destructive forms: <form data-confirm="…">. A refund's names the amount:
  // <form data-refund-left="19.99 USD" data-refund-currency="USD"> with its amount field, which is
  // shown as typed (the server converts it); empty is everything left.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    let question = form.dataset.confirm;
    if (form.dataset.refundLeft) {
      const typed = form.elements.namedItem("amount") ? String(form.elements.namedItem("amount").value).trim() : "";
      question = typed === ""
        ? "Refund everything left on this payment: " + form.dataset.refundLeft + "?"
        : "Refund " + typed + " " + form.dataset.refundCurrency + " of the " + form.dataset.refundLeft + " left on this payment?";
    }
    if (question && !window.confirm(question)) event.preventDefault();
  });
  // Live refresh: a page with <input type=checkbox data-live-refresh> reloads every few seconds
  // while the box is ticked (remembered for the tab), unless a field has focus.
  const toggle = document.querySelector("input[data-live-refresh]");
  if (toggle) {
    const storageKey = "tender-live:" + location.pathname;
    toggle.checked = sessionStorage.getItem(storageKey) === "1";
    toggle.hidden = false;
    if (toggle.parentElement) toggle.parentElement.hidden = false;
    toggle.addEventListener("change", function () { sessionStorage.setItem(storageKey, toggle.checked ? "1" : "0"); if (toggle.checked) schedule(); });
    const seconds = Number(toggle.getAttribute("data-live-refresh")) || 5;
    function schedule() {
      setTimeout(function () {
        if (!toggle.checked) return;
        const active = document.activeElement;
        if (active && active !== toggle && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) return schedule();
        location.reload();
      }, seconds * 1000);
    }
    if (toggle.checked) schedule();
  }
})();
`;

export const DASHBOARD_STYLES = `:root {
  --bg: #f6f7f9; --panel: #fff; --ink: #1b1f24; --muted: #5f6b7a; --line: #e3e6ea; --accent: #4338ca;
  --ok: #137333; --ok-bg: #e6f4ea; --warn: #8a5300; --warn-bg: #fff4e0; --bad: #b3261e; --bad-bg: #fdecea; --info-bg: #eef0ff;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 14px; color: var(--ink); background: var(--bg);
}
* { box-sizing: border-box; }
body { margin: 0; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
/* The main column may shrink below its content's width (minmax(0, 1fr)): wide tables scroll in
   their card (.table-wrap), the page never scrolls sideways. */
.shell { display: grid; grid-template-columns: 220px minmax(0, 1fr); min-height: 100vh; }
.sidebar { background: #111827; color: #d1d5db; padding: 20px 14px; }
.brand { color: #fff; font-weight: 700; font-size: 18px; margin: 0 8px 4px; display: flex; align-items: center; justify-content: space-between; }
.account { font-size: 12px; color: #9ca3af; margin: 0 8px 16px; overflow-wrap: anywhere; }
.sidebar nav a { display: block; color: #d1d5db; padding: 7px 10px; border-radius: 6px; margin-bottom: 2px; }
.sidebar nav a:hover { background: #1f2937; text-decoration: none; }
.sidebar nav a.active { background: #374151; color: #fff; }
.sidebar form { margin: 18px 8px 0; }
.menu-toggle, .menu-button { display: none; }
.main { padding: 24px 32px; max-width: 1200px; min-width: 0; }
.topbar { display: flex; align-items: center; gap: 12px; margin-bottom: 18px; }
.topbar h1 { font-size: 22px; margin: 0; flex: 1; min-width: 0; overflow-wrap: anywhere; }
/* Test or live: the banner across the top of the main column and the switch in the sidebar share
   the mode's colour (amber for test data, green for live data; white text, AA contrast). */
:root { --test: #b45309; --live: #047857; }
.mode-banner { display: flex; flex-wrap: wrap; align-items: baseline; gap: 2px 10px; margin: -24px -32px 18px; padding: 7px 32px; color: #fff; font-size: 13px; }
.mode-banner strong { letter-spacing: .02em; }
.mode-banner-test { background: var(--test); }
.mode-banner-live { background: var(--live); }
.sidebar form.mode-switch { display: flex; gap: 3px; margin: 14px 8px 16px; padding: 3px; border-radius: 8px; background: #1f2937; }
.sidebar .mode-switch button { flex: 1; width: auto; border: 0; border-radius: 6px; padding: 5px 6px; font-size: 13px; color: #9ca3af; background: transparent; }
.sidebar .mode-switch button:hover { background: #374151; color: #fff; }
.sidebar .mode-switch button:focus-visible { outline: 2px solid #818cf8; outline-offset: 1px; }
.sidebar .mode-switch .mode-option-test[aria-pressed="true"] { background: var(--test); color: #fff; font-weight: 600; }
.sidebar .mode-switch .mode-option-live[aria-pressed="true"] { background: var(--live); color: #fff; font-weight: 600; }
.warning { background: var(--warn-bg); color: var(--warn); border: 1px solid #f3d19e; border-radius: 8px; padding: 10px 14px; margin-bottom: 16px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 18px; margin-bottom: 18px; }
.panel h2 { font-size: 15px; margin: 0 0 12px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; margin-bottom: 18px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 14px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 24px; font-weight: 650; margin-top: 4px; }
.card .sub { color: var(--muted); font-size: 12px; margin-top: 2px; }
.table-wrap { overflow-x: auto; max-width: 100%; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 8px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num > .money, .money, .nowrap { white-space: nowrap; }
/* An id cut in the middle (start…end); the full id is its title and its selectable text. */
.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; white-space: nowrap; }
.id-head { display: inline-block; max-width: 10ch; overflow: hidden; text-overflow: ellipsis; vertical-align: bottom; }
.id-rest { display: inline-block; width: 0; overflow: hidden; vertical-align: bottom; }
.wrap { overflow-wrap: anywhere; }
/* An email is not broken mid-word on a laptop: only before its @ or a dot (<wbr>), or after a hyphen. */
.email { overflow-wrap: normal; word-break: normal; }
/* An object's page: its facts as a two-column list. */
ul.plain { list-style: none; padding: 0; margin: 0; }
ul.plain li { padding: 3px 0; }
.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 6px 16px; margin: 0; }
.facts dt { color: var(--muted); font-size: 12px; padding-top: 1px; }
.facts dd { margin: 0; min-width: 0; }
.headline { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 14px; margin-bottom: 14px; }
.headline .amount { font-size: 24px; font-weight: 650; }
.inline-ref .ref { display: inline; }
/* A name or an email may break anywhere, but its column keeps room for a word. */
.ref, td.wrap, .ref-col { min-width: 14ch; }
.scope-list { min-width: 14ch; overflow-wrap: anywhere; }
.excerpt { max-width: 40ch; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; }
tr.sub-row td { background: #fafbfc; padding-top: 0; }
.attempts { margin: 4px 0 6px; }
.attempts td, .attempts th { padding: 4px 8px; font-size: 12px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
pre { background: #0f172a; color: #e2e8f0; padding: 12px; border-radius: 8px; overflow: auto; white-space: pre-wrap; word-break: break-all; font-size: 12px; }
.badge { display: inline-block; font-size: 12px; padding: 2px 8px; border-radius: 999px; background: #eef0f3; color: #374151; }
.badge.ok { background: var(--ok-bg); color: var(--ok); }
.badge.warn { background: var(--warn-bg); color: var(--warn); }
.badge.bad { background: var(--bad-bg); color: var(--bad); }
.muted { color: var(--muted); }
time span { white-space: nowrap; }
.notice { background: var(--ok-bg); color: var(--ok); border-radius: 8px; padding: 10px 14px; margin-bottom: 16px; }
.error { background: var(--bad-bg); color: var(--bad); border: 1px solid #f5c2bd; border-radius: 8px; padding: 12px 16px; margin-bottom: 16px; }
.error h2 { font-size: 15px; margin: 0 0 6px; }
.error dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 8px 0 0; font-size: 12.5px; }
.error dt { font-weight: 600; }
.error dd { margin: 0; }
.form-problems { background: var(--bad-bg); color: var(--bad); border: 1px solid #f5c2bd; border-radius: 8px; padding: 8px 14px; margin-bottom: 12px; }
.form-problems p { margin: 4px 0; }
.form-problems .error { border: 0; padding: 4px 0; margin: 0; }
.field-error { color: var(--bad); font-size: 12px; max-width: 32ch; }
.row > label > input, .row > label > select { align-self: flex-start; }
form:has(.field-error) .row { align-items: flex-start; }
[aria-invalid="true"] { border-color: var(--bad); outline: 1px solid var(--bad); }
fieldset[aria-invalid="true"] { outline: 0; }
.empty { text-align: center; padding: 28px 12px; color: var(--muted); }
.empty strong { display: block; color: var(--ink); margin-bottom: 4px; }
.secret { background: var(--info-bg); border-radius: 8px; padding: 14px; margin: 10px 0; display: flex; gap: 10px; align-items: center; }
.secret code { font-size: 14px; word-break: break-all; flex: 1; }
form.inline { display: inline; }
.actions { display: flex; gap: 6px; flex-wrap: wrap; }
.row { display: flex; gap: 12px; flex-wrap: wrap; align-items: flex-end; }
label { display: flex; flex-direction: column; gap: 4px; font-size: 12px; color: var(--muted); }
label.check { flex-direction: row; align-items: center; color: var(--ink); font-size: 13px; }
input, select, textarea { font: inherit; padding: 6px 8px; border: 1px solid #cbd0d6; border-radius: 6px; background: #fff; color: var(--ink); max-width: 100%; }
input[type=checkbox] { padding: 0; }
button { white-space: nowrap; font: inherit; padding: 6px 12px; border-radius: 6px; border: 1px solid #c7cbd1; background: #fff; cursor: pointer; color: var(--ink); }
button:hover { background: #f2f3f5; }
button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
button.danger { color: var(--bad); border-color: #efb7b2; }
button.small { padding: 3px 9px; font-size: 12px; }
.sidebar button { background: transparent; color: #d1d5db; border-color: #374151; width: 100%; }
.pager { display: flex; justify-content: space-between; margin-top: 12px; }
.scopes { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 4px 12px; margin: 8px 0; }
.chart { width: 100%; height: auto; }
.chart-narrow { display: none; }
.chart .bar { fill: #6366f1; }
.chart .bar.low { fill: #f59e0b; }
.chart .bar.zero { fill: #ef4444; }
.chart .axis { stroke: #cbd0d6; stroke-width: 1; }
.chart .grid { stroke: #eef0f3; stroke-width: 1; }
.chart text { fill: #5f6b7a; font-size: 11px; font-family: system-ui, sans-serif; }
.chart .none { fill: #e5e7eb; }
.signin { max-width: 440px; margin: 12vh auto; }
.signin input { width: 100%; }
.live { font-size: 12px; }
fieldset { border: 1px solid var(--line); border-radius: 8px; margin: 10px 0; padding: 10px 12px; min-width: 0; }
legend { font-size: 12px; color: var(--muted); }
/* A phone: the sidebar becomes a bar with the brand and a Menu button that unfolds the menu. */
@media (max-width: 760px) {
  .shell { display: block; }
  .sidebar { padding: 10px 12px; }
  .brand { margin: 0; }
  /* Visually hidden but focusable: a keyboard opens the menu with the space bar. */
  .menu-toggle { display: block; position: absolute; width: 1px; height: 1px; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; padding: 0; }
  .menu-button { display: inline-flex; flex-direction: row; align-items: center; gap: 8px; color: #d1d5db; font-size: 14px; font-weight: 500; border: 1px solid #374151; border-radius: 6px; padding: 5px 10px; cursor: pointer; }
  .menu-button .bars { display: inline-block; width: 14px; height: 2px; background: currentColor; box-shadow: 0 -4px 0 currentColor, 0 4px 0 currentColor; }
  .menu-toggle:focus-visible + .brand .menu-button { outline: 2px solid #818cf8; outline-offset: 2px; }
  .menu-toggle:not(:checked) ~ .menu { display: none; }
  .menu { padding-top: 10px; }
  .main { padding: 14px 12px; }
  .mode-banner { margin: -14px -12px 12px; padding: 6px 12px; }
  .sidebar form.mode-switch { margin: 10px 0 0; }
  .topbar { flex-wrap: wrap; margin-bottom: 12px; }
  .topbar h1 { font-size: 19px; }
  .panel { padding: 12px; }
  .cards { grid-template-columns: repeat(2, minmax(0, 1fr)); }
  .card .value { font-size: 20px; }
  .signin { margin: 6vh 12px; }
  .chart-wide { display: none; }
  .chart-narrow { display: block; }
  .email { white-space: normal; overflow-wrap: anywhere; }
  .facts { grid-template-columns: minmax(0, 1fr); gap: 2px; }
  .facts dd { margin-bottom: 8px; }
  /* A list on a phone: each row a card whose amount, status and actions come first (class lead),
     then the rest, each cell named by its column (data-label). */
  table.stack thead { display: none; }
  table.stack, table.stack tbody { display: block; }
  table.stack tr { display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 12px; padding: 10px 0; border-bottom: 1px solid var(--line); }
  table.stack td { display: block; border: 0; padding: 0; order: 2; min-width: 0; max-width: 100%; }
  table.stack td.lead { order: 1; }
  table.stack td.num { text-align: left; }
  table.stack td.lead.num { font-weight: 650; font-size: 15px; }
  table.stack td:not(.lead) { flex-basis: 100%; }
  table.stack td[data-label]:not(.lead)::before { content: attr(data-label); display: block; font-size: 11px; color: var(--muted); }
  table.stack td:empty { display: none; }
}
`;
