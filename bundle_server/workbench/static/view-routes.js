// Routes: run a route of the active epoch and watch it. The form takes the route (from
// GET /api/routes), an event fixture of the project (optionally as another host kind sends
// it), the input and optional args as JSON (parsed here first: text that is not JSON is never
// sent), and a correlation id. A route's input schema is shown beside the input; the server
// checks the input against it (one validator, so the page and the API never disagree) and its
// BX3104 answer is shown at the input with the path it names. Run posts a streamed invocation (202, running) and
// follows its server-sent events (`trace`, `truncated` once, `render`, the terminating `final`
// with the final envelope). Render events show as they arrive; the final envelope replaces
// them with the window the server kept (its newest 256 events / 2 MiB, `retention` when it
// evicted any) and adds the Agent Document, result, outcome, diagnostics and timings. Past
// invocations (newest first) open the same display; `/routes?invocation=<id>` opens one.
import { ApiError, connection, getJSON, postJSON, readEvents } from "/assets/api.js";
import { emptyState, errorState, h, loadingState, replace, tableNote, time } from "/assets/dom.js";

export const title = "Routes";

// As many render events as the server's window keeps: the live list never grows past it.
const LIVE_EVENTS = 256;
const LIST_LIMIT = 50;
const COLUMNS = ["Invocation", "Route", "Status", "Outcome", "Started", "Duration", "Diagnostics"];
const DOCUMENT_MARK = "This event carries the Agent Document";

function pretty(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

function message(error) {
  if (error instanceof ApiError) return error.code ? `${error.code}: ${error.message}` : error.message;
  return String(error && error.message ? error.message : error);
}

/** The JSON value of `text`, or the parse error. Blank text is `missing` when allowed. */
function parseJSON(text, allowBlank) {
  if (!text.trim()) return allowBlank ? { missing: true } : { error: "enter a JSON value (null for none)" };
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { error: error.message };
  }
}

function retentionText(retention) {
  return (
    `Events were evicted: ${retention.evictedEvents} of ${retention.producedEvents} render events ` +
    `(${retention.evictedBytes} bytes) are gone; the newest ${retention.retainedBytes} bytes are kept.`
  );
}

export function mount(container, params) {
  // --- The form ---
  const route = h("select", { id: "route-id", name: "route", required: true });
  const input = h("textarea", {
    id: "route-input",
    rows: 6,
    "aria-describedby": "route-input-error",
  });
  input.value = "null";
  input.spellcheck = false;
  const args = h("textarea", {
    id: "route-args",
    rows: 3,
    placeholder: "none",
    "aria-describedby": "route-args-error",
  });
  args.spellcheck = false;
  const fixture = h("select", { id: "route-fixture", name: "fixture" });
  const fixtureHost = h("select", { id: "route-fixture-host", name: "fixture-host", disabled: true });
  const fixtureNote = h("p", { id: "route-fixture-note", className: "muted" });
  const schemaBox = h("details", { className: "input-schema", hidden: true });
  const correlation = h("input", {
    id: "route-correlation",
    type: "text",
    autocomplete: "off",
    placeholder: "none",
  });
  const inputError = h("p", { id: "route-input-error", className: "error", role: "alert" });
  const argsError = h("p", { id: "route-args-error", className: "error", role: "alert" });
  const formError = h("p", { className: "error", role: "alert" });
  const run = h("button", { type: "submit" }, "Run");
  const cancel = h("button", { type: "button", className: "btn-danger", disabled: true, onclick: () => cancelCurrent() }, "Cancel");
  const epochLine = h("span", { className: "muted" });
  const form = h(
    "form",
    { className: "routes-form", "aria-label": "Run a route", onsubmit: (event) => submit(event) },
    h("div", { className: "field" }, h("label", { htmlFor: "route-id" }, "Route"), route, epochLine),
    h(
      "div",
      { className: "field" },
      h("label", { htmlFor: "route-fixture" }, "Event fixture"),
      fixture,
      h("label", { htmlFor: "route-fixture-host" }, "as sent by"),
      fixtureHost,
      fixtureNote,
    ),
    h(
      "div",
      { className: "field" },
      h("label", { htmlFor: "route-input" }, "Input (JSON)"),
      input,
      inputError,
      schemaBox,
    ),
    h(
      "div",
      { className: "field" },
      h("label", { htmlFor: "route-args" }, "Args (JSON, optional)"),
      args,
      argsError,
    ),
    h(
      "div",
      { className: "field" },
      h("label", { htmlFor: "route-correlation" }, "Correlation id (optional)"),
      correlation,
    ),
    h(
      "div",
      { className: "toolbar" },
      run,
      cancel,
      h("span", { className: "muted keys" }, "Ctrl+Enter runs"),
    ),
    formError,
  );
  for (const area of [input, args]) {
    area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }
  // A new epoch can bring other routes: the list is read again whenever it is about to be used.
  route.addEventListener("focus", () => loadRoutes());
  fixture.addEventListener("focus", () => loadRoutes());
  route.addEventListener("change", () => describeChoice());
  fixture.addEventListener("change", () => describeChoice());
  input.addEventListener("input", () => clearError(input, inputError));
  args.addEventListener("input", () => clearError(args, argsError));

  // --- The invocation on display ---
  const detail = h("section", { className: "invocation", "aria-label": "Invocation", hidden: true });

  // --- Past invocations ---
  const pastBody = h("tbody", {}, tableNote(COLUMNS.length, loadingState("Reading past invocations…")));
  const refresh = h("button", { type: "button", onclick: () => loadPast() }, "Refresh");
  const past = h(
    "section",
    { className: "past", "aria-labelledby": "past-title" },
    h("div", { className: "toolbar" }, h("h3", { id: "past-title" }, "Past invocations"), refresh),
    h(
      "table",
      { "aria-labelledby": "past-title" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          COLUMNS.map((name) => h("th", { scope: "col" }, name)),
        ),
      ),
      pastBody,
    ),
  );

  const view = h(
    "div",
    { className: "routes-view" },
    h(
      "div",
      { className: "routes-main" },
      h("section", { className: "routes-run" }, h("h2", {}, "Routes"), form),
      detail,
    ),
    past,
  );
  replace(container, view);

  let unmounted = false;
  let shown = null; // {id, status, events: Map(sequence -> element), ...} of the invocation shown
  let controller = null; // the stream being followed
  let listedRoutes = []; // GET /api/routes: rows with family and inputSchema
  let listedFixtures = []; // and the project's fixtures (id, host, nativeEvent, family | error)

  function clearError(area, line) {
    area.removeAttribute("aria-invalid");
    line.textContent = "";
  }

  // --- Routes of the active epoch ---
  async function loadRoutes() {
    try {
      const listed = await getJSON("/api/routes");
      if (unmounted) return;
      const ids = listed.routes.map((row) => row.id);
      const labels = listed.routes.map((row) => `${row.id} (${row.family})`);
      // Unchanged options stay as they are: a list open under the pointer is not disturbed.
      if (labels.join("\n") !== Array.from(route.options, (option) => option.textContent).join("\n")) {
        const chosen = route.value;
        replace(
          route,
          listed.routes.map((row, index) => h("option", { value: row.id }, labels[index])),
        );
        if (ids.includes(chosen)) route.value = chosen;
      }
      listedRoutes = listed.routes;
      listFixtures(listed.fixtures || [], listed.hosts || []);
      epochLine.textContent = listed.epochId ? `epoch ${listed.epochId}` : "no active epoch";
      if (!ids.length) {
        epochLine.textContent += listed.epochId ? " · it has no routes" : " · nothing to run yet";
      }
      run.disabled = !ids.length;
      describeChoice();
    } catch (error) {
      if (!unmounted) formError.textContent = `Routes: ${message(error)}`;
    }
  }

  function listFixtures(fixtures, hosts) {
    const labels = ["none", ...fixtures.map((row) => `${row.id}: ${row.nativeEvent} (${row.host})`)];
    if (labels.join("\n") === Array.from(fixture.options, (option) => option.textContent).join("\n")) {
      listedFixtures = fixtures;
      return;
    }
    const chosen = fixture.value;
    replace(fixture, [
      h("option", { value: "" }, "none"),
      ...fixtures.map((row, index) =>
        // A fixture that does not decode cannot be run: it is listed, with why, but not offered.
        h("option", { value: row.id, disabled: Boolean(row.error) }, labels[index + 1]),
      ),
    ]);
    listedFixtures = fixtures;
    if (fixtures.some((row) => row.id === chosen && !row.error)) fixture.value = chosen;
    if (fixtureHost.options.length === 0) {
      replace(fixtureHost, [
        h("option", { value: "" }, "its own host"),
        ...hosts.map((kind) => h("option", { value: kind }, kind)),
      ]);
    }
  }

  /** The chosen route's schema and the chosen fixture's family, beside the form fields. */
  function describeChoice() {
    const row = listedRoutes.find((candidate) => candidate.id === route.value);
    const picked = listedFixtures.find((candidate) => candidate.id === fixture.value);
    fixtureHost.disabled = !picked;
    const broken = listedFixtures.filter((candidate) => candidate.error);
    if (picked && row && picked.family !== row.family) {
      fixtureNote.textContent = `${picked.id} decodes to ${picked.family}, not ${row.id}'s ${row.family}`;
    } else if (picked) {
      fixtureNote.textContent = `${picked.id} decodes to the ${picked.family} family`;
    } else if (!listedFixtures.length) {
      fixtureNote.textContent = "The project lists no fixtures (dev.contracts.fixtures).";
    } else {
      fixtureNote.textContent = "";
    }
    if (broken.length) {
      fixtureNote.textContent += ` Not decodable: ${broken.map((b) => `${b.id} (${b.error})`).join("; ")}`;
    }
    if (row && row.inputSchema) {
      replace(
        schemaBox,
        h("summary", {}, "Input schema"),
        h("pre", { className: "details-json", "aria-label": "Input schema" }, pretty(row.inputSchema)),
      );
      schemaBox.hidden = false;
    } else {
      schemaBox.hidden = true;
    }
  }

  // --- Running ---
  async function submit(event) {
    event.preventDefault();
    formError.textContent = "";
    const parsedInput = parseJSON(input.value, false);
    const parsedArgs = parseJSON(args.value, true);
    let invalid = null;
    if (parsedInput.error) {
      input.setAttribute("aria-invalid", "true");
      inputError.textContent = `Input is not valid JSON: ${parsedInput.error}`;
      invalid = invalid || input;
    }
    if (parsedArgs.error) {
      args.setAttribute("aria-invalid", "true");
      argsError.textContent = `Args are not valid JSON: ${parsedArgs.error}`;
      invalid = invalid || args;
    }
    if (invalid) {
      invalid.focus();
      return;
    }
    if (!route.value) {
      formError.textContent = "Choose a route first.";
      return;
    }
    const body = { routeId: route.value, input: parsedInput.value, stream: true };
    if (fixture.value) {
      body.eventFixture = { fixtureId: fixture.value };
      if (fixtureHost.value) body.eventFixture.target = fixtureHost.value;
    }
    if (!parsedArgs.missing) body.args = parsedArgs.value;
    if (correlation.value.trim()) body.correlationId = correlation.value.trim();
    run.disabled = true;
    try {
      const answer = await postJSON("/api/routes/invocations", body);
      if (unmounted) return;
      open(answer.invocation);
      loadPast();
    } catch (error) {
      if (unmounted) return;
      if (error instanceof ApiError && error.code === "BX3104") {
        // The route's schema refused the input: say so where the input is edited.
        input.setAttribute("aria-invalid", "true");
        inputError.textContent = `Input does not match the route's schema: ${error.message}`;
        input.focus();
      } else {
        formError.textContent = `Run: ${message(error)}`;
      }
    } finally {
      run.disabled = !route.options.length;
    }
  }

  async function cancelCurrent() {
    if (!shown || shown.status !== "running") return;
    const id = shown.id;
    cancel.disabled = true;
    try {
      const answer = await postJSON(`/api/routes/invocations/${encodeURIComponent(id)}/cancel`, {});
      if (!unmounted && shown && shown.id === id) show(answer.invocation);
    } catch (error) {
      if (unmounted) return;
      // AB8256: it ended first; what it ended with is the invocation's own.
      if (!(error instanceof ApiError && error.code === "AB8256")) {
        formError.textContent = `Cancel: ${message(error)}`;
      }
      openById(id);
    }
    loadPast();
  }

  // --- Display ---
  function stopFollowing() {
    if (controller) controller.abort();
    controller = null;
  }

  /** Show `invocation` (an envelope) and, while it runs, follow its stream. */
  function open(invocation) {
    stopFollowing();
    if (location.search !== `?invocation=${encodeURIComponent(invocation.id)}`) {
      history.replaceState(null, "", `/routes?invocation=${encodeURIComponent(invocation.id)}`);
    }
    show(invocation);
    if (invocation.status === "running") follow(invocation.id);
  }

  async function openById(id) {
    try {
      const answer = await getJSON(`/api/routes/invocations/${encodeURIComponent(id)}`);
      if (!unmounted) open(answer.invocation);
    } catch (error) {
      if (!unmounted) formError.textContent = `Invocation ${id}: ${message(error)}`;
    }
  }

  async function follow(id) {
    const mine = new AbortController();
    controller = mine;
    let final = false;
    try {
      const response = await fetch(`/api/routes/invocations/${encodeURIComponent(id)}/stream`, {
        signal: mine.signal,
        headers: { Accept: "text/event-stream" },
      });
      if (response.status === 401) connection.set("signed-out");
      if (!response.ok) throw new ApiError(response.status, null);
      await readEvents(response, (name, data) => {
        if (mine.signal.aborted || !shown || shown.id !== id) return;
        if (name === "render") addEvents([data]);
        else if (name === "truncated") showRetention(data);
        else if (name === "trace") countTrace();
        else if (name === "final") {
          final = true;
          show(data.invocation);
          loadPast();
        }
      });
    } catch (error) {
      if (mine.signal.aborted || unmounted) return;
    }
    if (controller === mine) controller = null;
    // The stream ended without its final event (a restart, a dropped connection): read it again.
    if (!final && !mine.signal.aborted && !unmounted) {
      setTimeout(() => shown && shown.id === id && openById(id), 1000);
    }
  }

  function field(label, value, className) {
    return [h("dt", {}, label), h("dd", { className }, value)];
  }

  function show(invocation) {
    const same = shown && shown.id === invocation.id;
    const traced = same ? shown.traced : 0;
    const timings = invocation.timings || {};
    const state = h("span", { className: "state", "data-state": invocation.status }, invocation.status);
    const summary = h(
      "dl",
      { className: "invocation-summary" },
      field("Status", state),
      field("Outcome", invocation.outcome || "—", "outcome"),
      field("Route", invocation.routeId),
      field("Correlation id", invocation.correlationId || "—"),
      field("Epoch", (invocation.context && invocation.context.epochId) || "—"),
      field("Runtime", (invocation.context && invocation.context.runtime) || "—"),
      field("Fixture", (invocation.context && invocation.context.fixture && invocation.context.fixture.fixtureId) || "—"),
      field("Host", (invocation.context && invocation.context.host) || "—"),
      field("Started", timings.startedAt || "—", "when"),
      field("Completed", timings.completedAt || "—", "when"),
      field("Duration", timings.durationMs !== undefined ? `${timings.durationMs} ms` : "—"),
    );
    const traceLink = h(
      "a",
      { href: `/trace?correlation=${encodeURIComponent(invocation.id)}&key=invocationId` },
      "Trace of this invocation",
    );
    const traceCount = h("span", { className: "muted trace-count" });
    const retention = h("p", { className: "retention", role: "status", hidden: true });
    // One tab stop for the whole list: it scrolls, and its events are read, not operated.
    const events = h("ol", { className: "render-events", "aria-label": "Render events", tabIndex: 0 });
    const eventsNote = h("p", { className: "muted" });
    const document_ = h("pre", { className: "details-json", "aria-label": "Agent Document", tabIndex: 0 });
    const result = h("pre", { className: "details-json", "aria-label": "Result", tabIndex: 0 });
    const diagnostics = h("ul", { className: "diagnostics", "aria-label": "Diagnostics" });
    const running = invocation.status === "running";
    const noDocument = invocation.document === null || invocation.document === undefined;
    document_.textContent = noDocument ? (running ? "(not yet)" : "(none)") : pretty(invocation.document);
    result.textContent = running ? "(not yet)" : pretty(invocation.result);
    for (const diagnostic of invocation.diagnostics || []) {
      diagnostics.append(
        h(
          "li",
          { "data-severity": diagnostic.severity },
          h("span", { className: "severity" }, diagnostic.severity),
          diagnostic.code ? ` ${diagnostic.code}` : "",
          `: ${diagnostic.message}`,
        ),
      );
    }
    if (!diagnostics.childElementCount) diagnostics.append(h("li", { className: "muted" }, "none"));
    replace(
      detail,
      h(
        "div",
        { className: "details-head" },
        h("h3", { id: "invocation-title" }, `${invocation.routeId} · ${invocation.id}`),
        h("span", { className: "toolbar" }, traceLink, traceCount),
      ),
      summary,
      retention,
      h("h4", {}, "Render events"),
      eventsNote,
      events,
      h("h4", {}, "Agent Document"),
      document_,
      h("h4", {}, "Result"),
      result,
      h("h4", {}, "Diagnostics"),
      diagnostics,
    );
    detail.hidden = false;
    detail.setAttribute("aria-labelledby", "invocation-title");
    detail.dataset.status = invocation.status;
    detail.dataset.invocation = invocation.id;
    shown = {
      id: invocation.id,
      status: invocation.status,
      seen: new Map(),
      list: events,
      note: eventsNote,
      retention,
      traceCount,
      traced,
      latest: null,
    };
    addEvents(invocation.renderEvents || []);
    if (invocation.retention) showRetention(invocation.retention);
    countTrace(0);
    cancel.disabled = !running;
  }

  function showRetention(retention) {
    shown.retention.hidden = false;
    shown.retention.textContent = retentionText(retention);
  }

  function countTrace(more = 1) {
    shown.traced += more;
    shown.traceCount.textContent = shown.traced ? `${shown.traced} trace entries streamed` : "";
  }

  function addEvents(events) {
    const fragment = document.createDocumentFragment();
    for (const event of events) {
      if (shown.seen.has(event.sequence)) continue;
      const item = h(
        "li",
        { className: "render-event", "data-kind": event.kind, "data-sequence": event.sequence },
        h(
          "div",
          { className: "render-head" },
          h("span", { className: "sequence" }, `#${event.sequence}`),
          h("strong", { className: "kind" }, event.kind),
          event.hasDocument ? h("span", { className: "badge", title: DOCUMENT_MARK }, "document") : null,
          h("span", { className: "muted" }, `${time(event.at)} · ${event.bytes} bytes`),
        ),
        h("pre", { className: "details-json" }, pretty(event.data)),
      );
      if (event.hasDocument) {
        item.setAttribute("aria-label", `#${event.sequence} ${event.kind}, carries the Agent Document`);
      }
      shown.seen.set(event.sequence, item);
      fragment.append(item);
    }
    shown.list.append(fragment);
    // The live list keeps what the server's window keeps at most: the oldest go first.
    while (shown.list.childElementCount > LIVE_EVENTS) {
      const oldest = shown.list.firstElementChild;
      shown.seen.delete(Number(oldest.dataset.sequence));
      oldest.remove();
    }
    const count = shown.list.childElementCount;
    shown.note.textContent = count ? `${count} shown` : shown.status === "running" ? "none yet" : "none";
  }

  // --- Past invocations ---
  async function loadPast() {
    try {
      const listed = await getJSON(`/api/routes/invocations?limit=${LIST_LIMIT}`);
      if (unmounted) return;
      replace(
        pastBody,
        listed.invocations.map((row) => {
          const counts = row.diagnostics || {};
          const button = h(
            "button",
            {
              type: "button",
              className: "link",
              onclick: () => openById(row.id),
              "aria-label": `Open ${row.routeId} ${row.id}`,
            },
            row.id,
          );
          return h(
            "tr",
            { "data-invocation": row.id, "data-status": row.status },
            h("td", {}, button),
            h("td", {}, row.routeId),
            h("td", {}, h("span", { className: "state", "data-state": row.status }, row.status)),
            h("td", {}, row.outcome || ""),
            h("td", {}, time(row.startedAt)),
            h("td", {}, row.durationMs !== undefined ? `${row.durationMs} ms` : ""),
            h("td", {}, `${counts.errors || 0} errors, ${counts.warnings || 0} warnings`),
          );
        }),
      );
      if (!listed.invocations.length) {
        replace(pastBody, tableNote(COLUMNS.length, emptyState("No invocations yet: run a route above.")));
      }
    } catch (error) {
      if (!unmounted) replace(pastBody, tableNote(COLUMNS.length, errorState(`Past invocations: ${message(error)}`)));
    }
  }

  loadRoutes();
  loadPast();
  const wanted = params.get("invocation");
  if (wanted) openById(wanted);

  return {
    unmount() {
      unmounted = true;
      stopFollowing();
    },
  };
}
