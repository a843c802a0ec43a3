// Trace view (being built).
import { h, replace } from "/assets/dom.js";

export const title = "Trace";

export function mount(container) {
  replace(container, h("h2", {}, "Trace"));
  return { unmount() {} };
}
