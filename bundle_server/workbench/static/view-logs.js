// Raw logs view (being built).
import { h, replace } from "/assets/dom.js";

export const title = "Raw logs";

export function mount(container) {
  replace(container, h("h2", {}, "Raw logs"));
  return { unmount() {} };
}
