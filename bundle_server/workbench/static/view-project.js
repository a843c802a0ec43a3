// Project view (being built).
import { h, replace } from "/assets/dom.js";

export const title = "Project";

export function mount(container) {
  replace(container, h("h2", {}, "Project"));
  return { unmount() {} };
}
