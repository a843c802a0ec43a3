// Runtime: the development runtime's generation (from the project status), a form that runs a
// surface (a route of the active epoch) for a host kind with an input and optionally one of the
// project's fixtures (both lists from GET /api/routes), and the recent runs with their output
// or error and a link to the invocation that ran each. Runs answer when they are over: the form
// waits. An input the surface's schema refuses (BX3104) is shown at the input.
import { ApiError, follow, getJSON, postJSON } from "/assets/api.js";
import { emptyState, errorState, h, loadingState, replace, tableNote, time } from "/assets/dom.js";

export const title = "Runtime";

function pretty(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

export function mount(container) {
  const generation = h("p", { className: "generation", role: "status" });
  const surface = h("select", { "aria-label": "Surface" });
  const target = h("select", { "aria-label": "Target host" });
  const input = h("textarea", { rows: 4, cols: 60, "aria-label": "Input (JSON)" }, "null");
  const fixture = h("select", { "aria-label": "Fixture" }, h("option", { value: "" }, "no fixture"));
  const error = h("p", { className: "error-state", role: "alert" });
  const result = h("section", { className: "run-result", "aria-label": "Last run" });
  const HEADS = ["status", "surface", "target", "started", "generation", "id"];
  const runsBody = h("tbody", {}, tableNote(HEADS.length, loadingState("Reading the recent runs…")));
  const runs = h(
    "table",
    { className: "runs", "aria-label": "Recent runs" },
    h("thead", {}, h("tr", {}, HEADS.map((c) => h("th", { scope: "col" }, c)))),
    runsBody,
  );
  const run = h("button", { type: "submit" }, "Run");
  const form = h(
    "form",
    { className: "toolbar runtime-form", onsubmit: (event) => submit(event) },
    h("label", {}, "Surface ", surface),
    h("label", {}, "Target ", target),
    h("label", {}, "Input ", input),
    h("label", {}, "Fixture ", fixture),
    run,
  );
  replace(
    container,
    h(
      "div",
      { className: "runtime-view" },
      h("div", { className: "view-head" }, h("h2", {}, "Development runtime"), generation),
      form,
      error,
      result,
      h("h3", {}, "Recent runs"),
      runs,
    ),
  );

  function showRun(record) {
    replace(
      result,
      h("p", {}, h("strong", { className: "run-status", "data-status": record.status }, record.status), " ", record.surfaceId, " for ", record.target, " · ", record.id, record.generationId ? ` · ${record.generationId}` : ""),
      record.error ? h("p", { className: "error" }, record.error.message) : null,
      record.output !== undefined ? h("pre", { className: "run-output" }, pretty(record.output)) : null,
      record.invocationId
        ? h(
            "p",
            {},
            h("a", { href: `/routes?invocation=${encodeURIComponent(record.invocationId)}` }, "Its invocation"),
            " (render events, Agent Document, trace)",
          )
        : null,
    );
  }

  async function submit(event) {
    event.preventDefault();
    error.textContent = "";
    input.removeAttribute("aria-invalid");
    let parsed;
    try {
      parsed = JSON.parse(input.value);
    } catch (caught) {
      error.textContent = `Input is not JSON: ${caught.message}`;
      return;
    }
    const body = { surfaceId: surface.value, target: target.value, input: parsed };
    if (fixture.value) body.fixtureId = fixture.value;
    run.disabled = true;
    try {
      const { run: record } = await postJSON("/api/runtime/runs", body);
      showRun(record);
      await loadRuns();
    } catch (caught) {
      error.textContent = caught instanceof ApiError ? `${caught.code || caught.status}: ${caught.message}` : caught.message;
      if (caught instanceof ApiError && caught.code === "BX3104") {
        input.setAttribute("aria-invalid", "true");
        input.focus();
      }
    } finally {
      run.disabled = false;
    }
  }

  /** Replace `select`'s options with `[value, label]` pairs, keeping the choice if it stays. */
  function choices(select, pairs) {
    const chosen = select.value;
    replace(select, pairs.map(([value, label]) => h("option", { value }, label)));
    if (pairs.some(([value]) => value === chosen)) select.value = chosen;
  }

  async function loadRuns() {
    let list;
    try {
      ({ runs: list } = await getJSON("/api/runtime/runs"));
    } catch (caught) {
      if (!(caught instanceof ApiError && caught.status === 401)) {
        replace(runsBody, tableNote(HEADS.length, errorState(`Could not read the recent runs: ${caught.message}`)));
      }
      return;
    }
    if (!list.length) {
      replace(runsBody, tableNote(HEADS.length, emptyState("No runs yet: choose a surface and a target above, then Run.")));
      return;
    }
    replace(
      runsBody,
      list.map((record) =>
        h(
          "tr",
          { tabIndex: 0, onclick: () => showRun(record), onkeydown: (e) => e.key === "Enter" && showRun(record) },
          h("td", {}, h("span", { className: "state", "data-state": record.status }, record.status)),
          h("td", {}, record.surfaceId),
          h("td", {}, record.target),
          h("td", {}, time(record.startedAt)),
          h("td", {}, record.generationId || ""),
          h("td", {}, record.id),
        ),
      ),
    );
  }

  async function loadStatus() {
    try {
      const status = await getJSON("/api/project/status");
      const runtime = status.runtime || { state: "stopped" };
      generation.textContent = runtime.generationId
        ? `Generation ${runtime.generationId}: ${runtime.state}`
        : `Runtime ${runtime.state}`;
      generation.dataset.state = runtime.state;
      const listed = await getJSON("/api/routes");
      choices(surface, listed.routes.map((route) => [route.id, `${route.id} (${route.family})`]));
      choices(target, listed.hosts.map((kind) => [kind, kind]));
      choices(fixture, [
        ["", "no fixture"],
        ...listed.fixtures
          .filter((row) => !row.error)
          .map((row) => [row.id, `${row.id}: ${row.nativeEvent} (${row.family})`]),
      ]);
    } catch (caught) {
      if (!(caught instanceof ApiError && caught.status === 401)) error.textContent = caught.message;
    }
  }

  loadStatus();
  loadRuns();
  // A new epoch compiles a new generation: the line above the form follows it.
  const events = follow("/api/project/events/stream", {
    sequenceOf: (frame) => frame.sequence,
    onFrame: (frame) => {
      if (frame.type === "runtime.event") loadStatus();
    },
  });
  return { unmount: () => events.close() };
}
