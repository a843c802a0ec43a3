// The page's theme: the system's (prefers-color-scheme) until the header's toggle picks one,
// which this browser remembers (localStorage: a display preference, nothing else). A classic
// script in <head>, so a chosen theme is set on <html> before the first paint; app.css reads
// `data-theme` (absent: the system's scheme).
"use strict";
(() => {
  const KEY = "workbench.theme";
  const root = document.documentElement;
  const system = window.matchMedia("(prefers-color-scheme: dark)");

  function stored() {
    try {
      return localStorage.getItem(KEY);
    } catch (error) {
      return null; // storage refused: the system's scheme
    }
  }
  function store(choice) {
    try {
      if (choice) localStorage.setItem(KEY, choice);
      else localStorage.removeItem(KEY);
    } catch (error) {
      // Storage refused: the choice lasts as long as the page.
    }
  }
  function apply(choice) {
    if (choice === "light" || choice === "dark") root.dataset.theme = choice;
    else delete root.dataset.theme;
  }
  const systemTheme = () => (system.matches ? "dark" : "light");
  const isDark = () => (root.dataset.theme || systemTheme()) === "dark";

  apply(stored());

  function mount() {
    const slot = document.getElementById("theme");
    if (!slot) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "theme-toggle";
    button.textContent = "Dark theme";
    button.title = "Follows the system's light or dark setting until chosen here";
    const show = () => button.setAttribute("aria-pressed", String(isDark()));
    button.addEventListener("click", () => {
      const next = isDark() ? "light" : "dark";
      // Choosing the system's own scheme is no override: the page follows the system again.
      const choice = next === systemTheme() ? null : next;
      store(choice);
      apply(choice);
      show();
    });
    system.addEventListener("change", show);
    // Another tab chose: this one follows.
    window.addEventListener("storage", (event) => {
      if (event.key !== KEY) return;
      apply(event.newValue);
      show();
    });
    slot.replaceChildren(button);
    show();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mount);
  else mount();
})();
