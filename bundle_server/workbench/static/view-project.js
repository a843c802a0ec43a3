// Project: the source, build and artifact states, the active epoch and the diagnostics with
// file:line, refetched on every project event (the status is small and the events say only
// that something moved); the adopted epoch's skills with what a person types for each in each
// target host (GET /api/project/skills: the forms are the server's, from spec/hosts.toml);
// and a Rebuild button (a manual invalidation).
import { follow, getJSON, postJSON } from "/assets/api.js";
import { emptyState, h, loadingState, replace, time } from "/assets/dom.js";

export const title = "Project";

const RECENT = 20;

function state(value) {
  return h("span", { className: "state", "data-state": value || "" }, value || "unknown");
}

function fields(rows) {
  return h(
    "dl",
    {},
    rows
      .filter(([, value]) => value !== undefined && value !== null && value !== "")
      .flatMap(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]),
  );
}

function where(diagnostic) {
  if (!diagnostic.path) return "";
  return diagnostic.line ? `${diagnostic.path}:${diagnostic.line}` : diagnostic.path;
}

/** A diagnostic's message without the location it may begin with: the build writes its
 * messages whole (`path:line: what`, as the CLI and the console print them alone), and the
 * location is shown once, beside the message, from the diagnostic's own path and line. */
function withoutLocation(diagnostic) {
  const message = diagnostic.message || "";
  for (const prefix of [where(diagnostic), diagnostic.path]) {
    if (prefix && message.startsWith(`${prefix}: `)) return message.slice(prefix.length + 2);
  }
  return message;
}

function diagnostics(list, label) {
  if (!list || !list.length) return h("p", { className: "muted" }, `${label}: none`);
  return h(
    "ul",
    { className: "diagnostics", "aria-label": label },
    list.map((d) =>
      h(
        "li",
        { "data-severity": d.severity },
        h("span", { className: "severity" }, d.severity),
        " ",
        h("code", {}, d.code),
        " ",
        where(d) ? [h("span", { className: "where" }, where(d)), ": "] : null,
        withoutLocation(d),
      ),
    ),
  );
}

function counts(c) {
  return c ? `${c.errors} errors, ${c.warnings} warnings, ${c.infos} infos` : undefined;
}

function sourceSection(source) {
  return h(
    "section",
    { "aria-labelledby": "project-source" },
    h("h3", { id: "project-source" }, "Source ", state(source.state)),
    fields([
      ["package", source.packageName && `${source.packageName} ${source.packageVersion || ""}`],
      ["revision", source.revision],
    ]),
    diagnostics(source.diagnostics, "Source diagnostics"),
  );
}

function attemptRows(attempt, label) {
  if (!attempt) return [];
  const span = attempt.completedAt
    ? `${time(attempt.startedAt)} → ${time(attempt.completedAt)}`
    : `since ${time(attempt.startedAt)}`;
  return [[label, `${attempt.id} ${attempt.outcome} (${span})`]];
}

function buildSection(build) {
  const last = build.lastAttempt;
  return h(
    "section",
    { "aria-labelledby": "project-build" },
    h("h3", { id: "project-build" }, "Build ", state(build.state)),
    fields([...attemptRows(build.activeAttempt, "running"), ...attemptRows(last, "last attempt")]),
    diagnostics(last && last.diagnostics, "Build diagnostics"),
  );
}

function artifactSection(artifact, adoption) {
  const epoch = artifact.activeEpoch;
  return h(
    "section",
    { "aria-labelledby": "project-artifact" },
    h("h3", { id: "project-artifact" }, "Artifact ", state(artifact.state)),
    epoch
      ? fields([
          ["active epoch", h("span", { className: "epoch" }, epoch.id)],
          ["created", epoch.createdAt],
          ["package", epoch.packageName && `${epoch.packageName} ${epoch.packageVersion || ""}`],
          ["targets", Object.keys(epoch.targetDigests || {}).join(", ")],
          ["diagnostics", counts(epoch.diagnostics)],
          ["revision", epoch.projectRevision],
          ["sources now", artifact.currentSourceRevision !== epoch.projectRevision ? artifact.currentSourceRevision : undefined],
          ["hosts adopted", adoption ? `${adoption.epochId} (${(adoption.hosts || []).join(", ")})` : undefined],
        ])
      : h("p", { className: "muted" }, "No epoch has been published yet."),
  );
}

function skillHosts(skill) {
  return h(
    "table",
    { className: "skill-hosts", "aria-label": `${skill.name} in each host` },
    h("thead", {}, h("tr", {}, h("th", {}, "host"), h("th", {}, "typed"), h("th", {}, "named"))),
    h(
      "tbody",
      {},
      skill.hosts.map((host) =>
        h(
          "tr",
          { "data-host": host.host },
          h("td", {}, host.host),
          h(
            "td",
            { className: "typed" },
            host.typed.length
              ? host.typed.flatMap((typed, index) => [index ? " " : "", h("code", {}, typed)])
              : h("span", { className: "muted" }, "no typed form known"),
          ),
          h("td", {}, h("code", {}, host.name)),
        ),
      ),
    ),
  );
}

function skillsSection(listing) {
  const skills = listing.skills || [];
  return h(
    "section",
    { "aria-labelledby": "project-skills" },
    h("h3", { id: "project-skills" }, "Skills"),
    skills.length
      ? h(
          "ul",
          { className: "skills", "aria-label": "Skills" },
          skills.map((skill) =>
            h(
              "li",
              { "data-skill": skill.name },
              h("strong", { className: "skill-name" }, skill.name),
              " ",
              h("span", { className: "muted" }, skill.description),
              skillHosts(skill),
            ),
          ),
        )
      : h(
          "p",
          { className: "muted" },
          listing.epochId ? "The adopted epoch has no skills." : "No epoch has been adopted yet.",
        ),
  );
}

function describe(event) {
  const p = event.payload || {};
  if (event.type === "artifact.available") return `epoch ${p.activeEpoch ? p.activeEpoch.id : ""}`;
  if (event.type === "build.failed" || event.type === "build.started") return p.id || "";
  if (event.type === "invalidation" || event.type === "source.changed") {
    return `${p.reason || ""} ${(p.paths || []).slice(0, 3).join(", ")}`;
  }
  if (event.type === "replay.gap") return "older events are no longer kept";
  return p.state || "";
}

export function mount(container) {
  const sections = h(
    "div",
    { className: "project-sections", "aria-live": "polite" },
    loadingState("Reading the project's status…"),
  );
  const result = h("span", { className: "muted", role: "status", "aria-label": "Rebuild result" });
  const error = h("p", { className: "error-state", role: "alert" });
  const noEvents = h("li", { className: "empty-state" }, "No project events yet: they arrive as sources change and builds run.");
  const events = h("ul", { className: "project-events", "aria-label": "Recent project events" }, noEvents);
  const rebuild = h("button", { type: "button", className: "btn-primary", onclick: requestBuild }, "Rebuild");
  const view = h(
    "div",
    { className: "project-view" },
    h("div", { className: "toolbar view-head" }, h("h2", {}, "Project"), rebuild, result),
    error,
    sections,
    h("section", { "aria-labelledby": "project-events-title" }, h("h3", { id: "project-events-title" }, "Recent events"), events),
  );
  replace(container, view);
  let closed = false;
  let fetching = null;
  let again = false;

  // One status request at a time; events that arrive meanwhile ask for one more after it.
  async function refresh() {
    if (fetching) {
      again = true;
      return;
    }
    do {
      again = false;
      fetching = Promise.all([getJSON("/api/project/status"), getJSON("/api/project/skills")]);
      try {
        const [status, skills] = await fetching;
        if (closed) return;
        error.textContent = "";
        replace(
          sections,
          sourceSection(status.source),
          buildSection(status.build),
          artifactSection(status.artifact, status.hostAdoption),
          skillsSection(skills),
        );
        view.dataset.epoch = status.artifact.activeEpoch ? status.artifact.activeEpoch.id : "";
        view.dataset.build = status.build.state;
      } catch (caught) {
        if (closed) return;
        error.textContent = `Could not read the project status: ${caught.message}`;
        // Never read yet: the error takes the place of the loading state. (Read before: the
        // last status stays, under the error.)
        if (sections.querySelector(".loading")) replace(sections);
      } finally {
        fetching = null;
      }
    } while (again && !closed);
  }

  async function requestBuild() {
    rebuild.disabled = true;
    result.textContent = "requesting…";
    try {
      const { invalidation } = await postJSON("/api/project/builds", {});
      result.textContent = `rebuild requested at ${time(invalidation.occurredAt)} (${invalidation.reason})`;
    } catch (caught) {
      result.textContent = `rebuild refused: ${caught.message}`;
    } finally {
      rebuild.disabled = false;
    }
  }

  const stream = follow("/api/project/events/stream", {
    sequenceOf: (frame) => frame.sequence,
    onFrame(frame) {
      noEvents.remove();
      events.prepend(
        h("li", {}, `${time(frame.occurredAt)} ${frame.type} `, h("span", { className: "muted" }, describe(frame))),
      );
      while (events.children.length > RECENT) events.lastChild.remove();
      refresh();
    },
  });
  refresh();
  return {
    unmount() {
      closed = true;
      stream.close();
    },
  };
}
