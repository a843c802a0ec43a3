// Building DOM without HTML strings: text always goes in as textContent, so nothing the server
// or a bundle sends can become markup.

/** h("tr", {className: "x", onclick: f, "aria-label": "y"}, child, "text", ...) */
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2), value);
    } else if (key in element && !key.includes("-")) {
      element[key] = value;
    } else {
      element.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

export function append(parent, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

/** Replace everything inside `parent`. */
export function replace(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

export function time(iso) {
  return typeof iso === "string" ? iso.slice(11, 23) : "";
}

/** "1 record", "2 records": `count` and the noun that agrees with it. */
export function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

// The three states a view shows where its content will be (app.css styles each): nothing to
// show yet (and, where it helps, what would fill it), a read under way, a read that failed.
export function emptyState(...children) {
  return h("p", { className: "empty-state" }, ...children);
}

export function loadingState(text = "Loading…") {
  return h("p", { className: "loading", role: "status" }, text);
}

export function errorState(text) {
  return h("p", { className: "error-state", role: "alert" }, text);
}

/** A table row across all `columns` holding one of the states above, for a table's body. */
export function tableNote(columns, state) {
  return h("tr", { className: "table-note" }, h("td", { colSpan: columns }, state));
}
