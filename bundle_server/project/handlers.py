"""The project routes (`project.status`, `project.skills`, `project.events`, `project.stream`,
`project.builds`), registered by route id; the loop they read is `project.manager.ProjectLoop`
and the events come from its `project.hub.ProjectHub`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from werkzeug.wrappers import Response

from bundle_contract._skill_tokens import classify_skill_token, skill_spelling, typed_forms
from bundle_server._http.routing import Call, Encoded, Reply, handler
from bundle_server._streams.hangup import hangup_of
from bundle_server._streams.ndjson import ndjson_stream
from bundle_server.project.manager import ProjectLoop
from bundle_server.runtime.service import RuntimeService


@handler("project.status")
def project_status(call: Call) -> dict[str, Any]:
    """The live ProjectStatus, with the development runtime's state where there is one."""
    status = call.state.service(ProjectLoop).status()
    runtime = call.state.find(RuntimeService)
    if runtime is not None:
        status["runtime"] = runtime.status()
    return status


@handler("project.skills")
def project_skills(call: Call) -> dict[str, Any]:
    """The adopted epoch's skills as each of its target hosts names them and a person types
    them (ProjectSkills.json)."""
    adopted = call.state.service(ProjectLoop).adopted_config()
    if adopted is None:
        return {"epochId": None, "plugin": None, "skills": []}
    return skill_listing(*adopted)


def skill_listing(epoch_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The ProjectSkills body of an epoch's resolved BundleConfig."""
    plugin = str(config["application"]["id"])
    skills = []
    for skill in config.get("skills", ()):
        token = classify_skill_token(f"{plugin}:{skill['name']}")
        hosts = [
            {
                "host": host,
                "name": skill_spelling(host, token),
                "typed": list(typed_forms(host, token)),
            }
            for host in config.get("targets", ())
        ]
        entry = {"name": token.skill, "description": str(skill["description"])}
        skills.append({**entry, "canonical": token.canonical, "hosts": hosts})
    return {"epochId": epoch_id, "plugin": plugin, "skills": skills}


@handler("project.events")
def project_events(call: Call) -> Encoded:
    """Project events after the `after` cursor, with ProjectReplayGap when history was dropped."""
    replay, body = call.state.service(ProjectLoop).hub.replay_encoded(call.query["after"])
    return Encoded(200, body, replay)


@handler("project.stream")
def project_stream(call: Call) -> Response:
    """NDJSON project events: the gap, the replay, then live events and keep-alives."""
    return ndjson_stream(
        call.state.service(ProjectLoop).hub,
        call.query["after"],
        call.state.keepalive,
        hangup_of(call.request.environ),
    )


@handler("project.builds")
def project_builds(call: Call) -> Reply:
    """A manual invalidation (202); the build's outcome arrives as project events."""
    invalidation = call.state.service(ProjectLoop).invalidate("manual", call.body.get("paths", []))
    return Reply(202, {"invalidation": invalidation})
