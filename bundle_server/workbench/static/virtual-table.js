// A virtualized grid: the items stay in an array and only the rows in view (plus a few) exist in
// the DOM, recycled as the scroller moves. Rows have one fixed height, so the row under any
// scroll offset is a division, and 10,000 items cost the DOM what 40 do.
import { h, replace } from "/assets/dom.js";

const OVERSCAN = 6;
// A fitted column is as wide as its widest text (the font is monospace: a width in `ch`), but
// never wider than this: one long value must not push the flexible column out of view.
const FIT_MAX = 48;
let tables = 0;

const textOf = (value) =>
  value === undefined || value === null ? "" : value instanceof Node ? value.textContent : String(value);

/**
 * new VirtualTable({label, className, columns: [header, ...], widths: [css or "fit", ...],
 * rowHeight, cells(item) -> [text or Node, ...], rowClass(item) -> string, selectable(item) ->
 * bool, onOpen(item)})
 * `items` is the caller's array: after changing it, call update().
 * `widths` (optional) sizes the columns: a "fit" column is as wide as its widest value among
 * the items (scanned as they come, so only new items cost anything), any other entry is a
 * grid track (`minmax(10em, 1fr)`). Without it the stylesheet sizes them.
 */
export class VirtualTable {
  constructor({ label, className, columns, widths, rowHeight = 22, cells, rowClass, selectable, onOpen }) {
    this.id = `vt${++tables}`;
    this.widths = widths || null;
    this.fitted = columns.map((name) => name.length); // widest text per column, in characters
    this.scanned = 0; // how many of `items` the fitted widths have seen
    this.template = "";
    this.items = [];
    this.rowHeight = rowHeight;
    this.cells = cells;
    this.rowClass = rowClass || (() => "");
    this.selectable = selectable || (() => true);
    this.onOpen = onOpen || (() => {});
    this.selected = -1;
    this.rows = [];
    this.first = 0;
    this.frame = 0;
    const header = h(
      "div",
      { className: "vt-row vt-head", role: "row", "aria-rowindex": 1 },
      columns.map((name) => h("div", { role: "columnheader" }, name)),
    );
    this.head = header;
    this.window = h("div", { className: "vt-window", role: "presentation" });
    this.body = h("div", { className: "vt-body", role: "rowgroup" }, this.window);
    this.element = h(
      "div",
      {
        className: `vt ${className || ""}`,
        role: "grid",
        tabIndex: 0,
        "aria-label": label,
        "aria-readonly": "true",
        onscroll: () => this.schedule(),
        onkeydown: (event) => this.key(event),
        onclick: (event) => this.click(event),
      },
      h("div", { className: "vt-header", role: "rowgroup" }, header),
      this.body,
    );
    // A resize changes how many rows fit.
    this.resizeObserver = new ResizeObserver(() => this.schedule());
    this.resizeObserver.observe(this.element);
  }

  /** Whether the view shows the last row, so a caller can keep following the tail. */
  get atEnd() {
    const el = this.element;
    return el.scrollTop + el.clientHeight >= el.scrollHeight - this.rowHeight;
  }

  /** Take `items` (or the same array, changed) and re-render; `follow` keeps the tail in view. */
  update(items = this.items, { follow = false } = {}) {
    if (items !== this.items || items.length < this.scanned) this.scanned = 0;
    this.items = items;
    this.fit();
    if (this.selected >= items.length) this.selected = items.length - 1;
    this.body.style.height = `${items.length * this.rowHeight}px`;
    this.element.setAttribute("aria-rowcount", String(items.length + 1));
    if (follow) this.element.scrollTop = this.element.scrollHeight;
    this.render();
  }

  /** Drop `count` items from the front (the caller already did), keeping the view still. */
  droppedFront(count) {
    if (count <= 0) return;
    this.scanned = Math.max(0, this.scanned - count);
    this.selected = this.selected >= count ? this.selected - count : -1;
    this.element.scrollTop = Math.max(0, this.element.scrollTop - count * this.rowHeight);
  }

  /** Widen the fitted columns to the items not yet scanned; re-template the rows on a change. */
  fit() {
    if (!this.widths) return;
    const { items, widths, fitted } = this;
    for (let i = this.scanned; i < items.length; i++) {
      const values = this.cells(items[i]);
      for (let c = 0; c < widths.length; c++) {
        if (widths[c] !== "fit") continue;
        const length = textOf(values[c]).length;
        if (length > fitted[c]) fitted[c] = Math.min(length, FIT_MAX);
      }
    }
    this.scanned = items.length;
    const pad = this.padding();
    const template = widths.map((w, c) => (w === "fit" ? `calc(${fitted[c]}ch + ${pad}px)` : w)).join(" ");
    if (template === this.template) return;
    this.template = template;
    this.head.style.gridTemplateColumns = template;
    for (const row of this.rows) row.style.gridTemplateColumns = template;
  }

  /** A cell's horizontal padding in px (the stylesheet's), and a pixel for rounding. */
  padding() {
    if (this.pad === undefined) {
      const style = getComputedStyle(this.head.firstChild);
      const found = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
      if (!Number.isFinite(found)) return 17; // not in the page yet: the stylesheet's 8px each side
      this.pad = found + 1;
    }
    return this.pad;
  }

  /** Fill the rows in view again, their items' cells having changed. */
  repaint() {
    for (const row of this.rows) row.item = undefined;
    this.render();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  render() {
    const { items, rowHeight } = this;
    const el = this.element;
    // Under the sticky header, the first row in view is the one at scrollTop in the body.
    const first = Math.max(0, Math.floor(el.scrollTop / rowHeight) - OVERSCAN);
    const wanted = Math.ceil(el.clientHeight / rowHeight) + 2 * OVERSCAN;
    const count = Math.max(0, Math.min(wanted, items.length - first));
    while (this.rows.length < count) {
      const row = h("div", { role: "row" });
      if (this.template) row.style.gridTemplateColumns = this.template;
      this.rows.push(row);
      this.window.append(row);
    }
    while (this.rows.length > count) this.rows.pop().remove();
    this.first = first;
    this.window.style.transform = `translateY(${first * rowHeight}px)`;
    for (let i = 0; i < count; i++) this.fill(this.rows[i], first + i);
    this.markActive();
  }

  fill(row, index) {
    const item = this.items[index];
    if (row.item === item && row.index === index && row.selectedState === (index === this.selected)) {
      return; // unchanged since the last frame: no DOM writes
    }
    row.item = item;
    row.index = index;
    row.selectedState = index === this.selected;
    row.id = `${this.id}-r${index}`;
    row.className = `vt-row ${this.rowClass(item)}`;
    row.setAttribute("aria-rowindex", String(index + 2));
    row.setAttribute("aria-selected", String(row.selectedState));
    const values = this.cells(item);
    while (row.children.length < values.length) row.append(h("div", { role: "gridcell" }));
    while (row.children.length > values.length) row.lastChild.remove();
    values.forEach((value, i) => {
      const cell = row.children[i];
      if (value instanceof Node) replace(cell, value);
      else cell.textContent = value === undefined || value === null ? "" : String(value);
      // A value cut to its column (past FIT_MAX, or the flexible column) is whole on hover.
      cell.title = textOf(value);
    });
  }

  markActive() {
    const row = this.rows[this.selected - this.first];
    if (row) this.element.setAttribute("aria-activedescendant", row.id);
    else this.element.removeAttribute("aria-activedescendant");
  }

  /** Select item `index` and scroll it into view. */
  select(index) {
    if (!this.items.length) return;
    this.selected = Math.max(0, Math.min(index, this.items.length - 1));
    const el = this.element;
    const head = this.body.offsetTop;
    const top = this.selected * this.rowHeight;
    if (top < el.scrollTop) el.scrollTop = top;
    else if (top + this.rowHeight + head > el.scrollTop + el.clientHeight) {
      el.scrollTop = top + this.rowHeight + head - el.clientHeight;
    }
    this.render();
  }

  selectItem(item) {
    const index = this.items.indexOf(item);
    if (index >= 0) this.select(index);
    return index >= 0;
  }

  get selectedItem() {
    return this.selected >= 0 ? this.items[this.selected] : undefined;
  }

  key(event) {
    const page = Math.max(1, Math.floor(this.element.clientHeight / this.rowHeight) - 1);
    const moves = {
      ArrowDown: 1,
      ArrowUp: -1,
      PageDown: page,
      PageUp: -page,
      Home: -Infinity,
      End: Infinity,
    };
    if (event.key in moves) {
      event.preventDefault();
      const from = this.selected < 0 ? (moves[event.key] > 0 ? -1 : this.items.length) : this.selected;
      const to = from + moves[event.key];
      this.select(Number.isFinite(to) ? to : to > 0 ? this.items.length - 1 : 0);
    } else if (event.key === "Enter" && this.selectedItem !== undefined) {
      event.preventDefault();
      if (this.selectable(this.selectedItem)) this.onOpen(this.selectedItem);
    }
  }

  click(event) {
    if (event.target.closest("a, button")) return; // links in cells keep their own meaning
    const row = event.target.closest(".vt-body [role=row]");
    if (!row || row.index === undefined) return;
    this.select(row.index);
    if (this.selectable(row.item)) this.onOpen(row.item);
  }

  destroy() {
    this.resizeObserver.disconnect();
    if (this.frame) cancelAnimationFrame(this.frame);
  }
}
