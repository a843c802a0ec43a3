"""Generated from spec/ by `python -m bundle_contract generate`. Do not edit."""

from __future__ import annotations

from bundle_contract._error_bases import (
    ContractError,
    DiagnosticError,
    HookResultError,
    RequestError,
)

TYPE_CHECKING = False  # typing stays off the hook-time path
if TYPE_CHECKING:
    from typing import ClassVar


class InvocationAlreadyFinal(RequestError):
    """Cancelling an already-final invocation."""

    code: ClassVar[str] = "AB8256"
    http_status: ClassVar[int] = 409


class BindingClosed(RequestError):
    """Binding result for a closed binding."""

    code: ClassVar[str] = "AB8022"
    http_status: ClassVar[int] = 404


class PtyUnavailable(RequestError):
    """Neither the project nor the framework fallback location can supply the pseudo-terminal
    library.
    """

    code: ClassVar[str] = "AB8260"
    http_status: ClassVar[int] = 503


class MalformedSessionRequest(RequestError):
    """Malformed request: body, path, query, dimensions, input, unsupported method or state, or
    deleting an active session.
    """

    code: ClassVar[str] = "AB8261"
    http_status: ClassVar[int] = 400
    variants: ClassVar[dict[str, int]] = {
        "unsupported-method": 405,
        "session-running": 409,
        "session-not-running": 409,
        "batch-session": 409,
        "input-too-large": 413,
    }


class SessionNotFound(RequestError):
    """Session id well-formed but unknown."""

    code: ClassVar[str] = "AB8262"
    http_status: ClassVar[int] = 404


class HostNotLaunchable(RequestError):
    """No executable on PATH, no development install attached to the adopted epoch, or the
    spawned process failed.
    """

    code: ClassVar[str] = "AB8263"
    http_status: ClassVar[int] = 422


class SessionLimitReached(RequestError):
    """Four sessions already active."""

    code: ClassVar[str] = "AB8264"
    http_status: ClassVar[int] = 409


class SessionServiceUnavailable(RequestError):
    """Host-session service closed or unavailable."""

    code: ClassVar[str] = "AB8265"
    http_status: ClassVar[int] = 503


class InvalidDevSession(RequestError):
    """Invalid BUNDLE_DEV_SESSION value on a hook receipt or proxy request."""

    code: ClassVar[str] = "AB8266"
    http_status: ClassVar[int] = 401


class RuntimeDependencyUnevidenced(DiagnosticError):
    """A package.json dependency is unevidenced as used by a payload (runtimeDependencies
    missing).
    """

    code: ClassVar[str] = "AB7014"
    http_status: ClassVar[int] = 422


class RuntimeDependencyNotInstalled(DiagnosticError):
    """A declared runtime dependency is not one a consumer's npm installs (dependencies,
    optionalDependencies, or a non-optional peer).
    """

    code: ClassVar[str] = "AB4751"
    http_status: ClassVar[int] = 422


class ProjectionWithoutPluginManifest(DiagnosticError):
    """Install or doctor on a projection that emits no plugin manifest."""

    code: ClassVar[str] = "AB7001"
    http_status: ClassVar[int] = 422


class HookWrapperNotUnique(DiagnosticError):
    """A host document names a wrapper that is not exactly one executables.hooks row."""

    code: ClassVar[str] = "AB6018"
    http_status: ClassVar[int] = 422


class InternalError(RequestError):
    """An unexpected failure inside the server; the body carries no traceback or exception
    text.
    """

    code: ClassVar[str] = "BX1000"
    http_status: ClassVar[int] = 500


class RouteNotFound(RequestError):
    """No route matches the path."""

    code: ClassVar[str] = "BX1001"
    http_status: ClassVar[int] = 404


class MethodNotAllowed(RequestError):
    """The path exists but not for this method; the response carries Allow."""

    code: ClassVar[str] = "BX1002"
    http_status: ClassVar[int] = 405


class UnsupportedMediaType(RequestError):
    """A JSON body without the application/json media type."""

    code: ClassVar[str] = "BX1003"
    http_status: ClassVar[int] = 415


class InvalidRequest(RequestError):
    """Body, query or path parameter malformed or not matching the route's schema."""

    code: ClassVar[str] = "BX1004"
    http_status: ClassVar[int] = 400


class PayloadTooLarge(RequestError):
    """Request body above the route's limit."""

    code: ClassVar[str] = "BX1005"
    http_status: ClassVar[int] = 413


class HeadersTooLarge(RequestError):
    """Too many request headers, or header bytes above the limit."""

    code: ClassVar[str] = "BX1006"
    http_status: ClassVar[int] = 431


class RequestLineTooLong(RequestError):
    """Request line (method, target and version) above the server's bound."""

    code: ClassVar[str] = "BX1007"
    http_status: ClassVar[int] = 414


class RequestBodyTimeout(RequestError):
    """A request body not received in full within the server's bound (limit request-body-time)."""

    code: ClassVar[str] = "BX1008"
    http_status: ClassVar[int] = 408


class AssetNotFound(RequestError):
    """No Workbench asset of that name (the page's own files and its pinned libraries)."""

    code: ClassVar[str] = "BX1009"
    http_status: ClassVar[int] = 404


class MultiplexStreamNotFound(RequestError):
    """A multiplexed stream id (well formed) that names no open stream: never opened, or ended
    with its connection.
    """

    code: ClassVar[str] = "BX1010"
    http_status: ClassVar[int] = 404


class SubscriptionTargetUnknown(RequestError):
    """A subscription of a multiplexed stream names a route the stream does not carry (only the
    session, trace, log and project streams).
    """

    code: ClassVar[str] = "BX1011"
    http_status: ClassVar[int] = 404


class SubscriptionRefused(RequestError):
    """A subscription of a multiplexed stream whose id is already in use on it or was
    unsubscribed on it (an unsubscribe may overtake its subscribe), or past multiplex-
    subscriptions active ones.
    """

    code: ClassVar[str] = "BX1012"
    http_status: ClassVar[int] = 409


class SessionRequired(RequestError):
    """Missing, wrong or malformed foreground session cookie or x-bundle-session value."""

    code: ClassVar[str] = "BX2001"
    http_status: ClassVar[int] = 401


class HostNotAllowed(RequestError):
    """Host header is not a loopback name or literal with the server's port."""

    code: ClassVar[str] = "BX2002"
    http_status: ClassVar[int] = 403


class OriginNotAllowed(RequestError):
    """Origin header present and not exactly the server's own origin or a configured dev
    origin.
    """

    code: ClassVar[str] = "BX2003"
    http_status: ClassVar[int] = 403


class ReceiptTokenInvalid(RequestError):
    """Receipt request without the endpoint's bearer token, or with a wrong one."""

    code: ClassVar[str] = "BX2004"
    http_status: ClassVar[int] = 401


class ReceiptPeerNotLoopback(RequestError):
    """Receipt request from a non-loopback peer."""

    code: ClassVar[str] = "BX2005"
    http_status: ClassVar[int] = 403


class ReceiptOriginRefused(RequestError):
    """Receipt request carrying an Origin header."""

    code: ClassVar[str] = "BX2006"
    http_status: ClassVar[int] = 403


class AgentTokenInvalid(RequestError):
    """Agent endpoint request without its bearer token, with a wrong one, or carrying an Origin
    header.
    """

    code: ClassVar[str] = "BX2007"
    http_status: ClassVar[int] = 401


class CursorMalformed(RequestError):
    """Trace or log cursor is not a non-negative safe integer."""

    code: ClassVar[str] = "BX3001"
    http_status: ClassVar[int] = 400


class CursorAhead(RequestError):
    """Trace or log cursor ahead of current history."""

    code: ClassVar[str] = "BX3002"
    http_status: ClassVar[int] = 409


class RouteUnknown(RequestError):
    """A route invocation names a routeId the active epoch does not have."""

    code: ClassVar[str] = "BX3101"
    http_status: ClassVar[int] = 404


class NoActiveEpoch(RequestError):
    """A route invocation or runtime run asked for before any build succeeded."""

    code: ClassVar[str] = "BX3102"
    http_status: ClassVar[int] = 409


class RuntimeGenerationStale(RequestError):
    """A runtime run names an expectedGenerationId that is not the active runtime generation."""

    code: ClassVar[str] = "BX3103"
    http_status: ClassVar[int] = 409


class RouteInputInvalid(RequestError):
    """A route invocation's or runtime run's `input` does not match the route's `inputSchema`."""

    code: ClassVar[str] = "BX3104"
    http_status: ClassVar[int] = 400


class McpServerFailed(RequestError):
    """The MCP server of a launch could not be started, did not answer `initialize` within mcp-
    connect-time, or its process ended.
    """

    code: ClassVar[str] = "BX3201"
    http_status: ClassVar[int] = 502


class McpRequestTimedOut(RequestError):
    """An MCP operation got no response within mcp-request-time (it is cancelled on the
    server).
    """

    code: ClassVar[str] = "BX3202"
    http_status: ClassVar[int] = 504


class McpLaunchUnknown(RequestError):
    """The launch list names an epoch that is not published or a server the epoch does not
    declare, or an operation names an MCP session that is not a launch of the active epoch.
    """

    code: ClassVar[str] = "BX3203"
    http_status: ClassVar[int] = 404


class McpOperationUnknown(RequestError):
    """No operation of that operationId is in flight on the MCP session (it has ended, or never
    started); a read of its progress also finds the last ones that ended.
    """

    code: ClassVar[str] = "BX3204"
    http_status: ClassVar[int] = 404


class McpOperationDuplicate(RequestError):
    """An operation names an operationId already in flight on the same MCP session."""

    code: ClassVar[str] = "BX3205"
    http_status: ClassVar[int] = 409


class ServiceUnavailable(RequestError):
    """A service the request needs is absent from this server or closed: the trace or log hub,
    the project loop, route invocations, the development runtime, the MCP sessions.
    """

    code: ClassVar[str] = "BX3003"
    http_status: ClassVar[int] = 503


class HookResultNotObject(HookResultError):
    """A handler returned something other than nothing or an object (rule 5)."""

    code: ClassVar[str] = "BX4101"
    http_status: ClassVar[int] = 422
    rule: ClassVar[int | None] = 5


class ReasonWhileContinuing(HookResultError):
    """A continuing result carries reason (rule 2)."""

    code: ClassVar[str] = "BX4102"
    http_status: ClassVar[int] = 422
    rule: ClassVar[int | None] = 2


class DenyNotAllowed(HookResultError):
    """Outcome deny for an event whose matrix row refuses deny (rule 3)."""

    code: ClassVar[str] = "BX4103"
    http_status: ClassVar[int] = 422
    rule: ClassVar[int | None] = 3


class DenyWithoutReason(HookResultError):
    """A denying result without a non-empty reason (rule 3)."""

    code: ClassVar[str] = "BX4104"
    http_status: ClassVar[int] = 422
    rule: ClassVar[int | None] = 3


class UpdatedInputWhileDenying(HookResultError):
    """A denying result carries updatedInput (rule 3)."""

    code: ClassVar[str] = "BX4105"
    http_status: ClassVar[int] = 422
    rule: ClassVar[int | None] = 3


class StopOutcome(HookResultError):
    """A result with outcome stop (rule 4)."""

    code: ClassVar[str] = "BX4106"
    http_status: ClassVar[int] = 422
    rule: ClassVar[int | None] = 4


class ResultFieldNotAllowed(HookResultError):
    """AdditionalContext or updatedInput on an event whose matrix row refuses it."""

    code: ClassVar[str] = "BX4107"
    http_status: ClassVar[int] = 422


class ResultShapeInvalid(HookResultError):
    """An unknown key, an unknown outcome, or a value of the wrong type (rule 5)."""

    code: ClassVar[str] = "BX4108"
    http_status: ClassVar[int] = 422
    rule: ClassVar[int | None] = 5


class UnknownHandlerEvent(ContractError):
    """A handler event name outside the six of seed 001."""

    code: ClassVar[str] = "BX4109"
    http_status: ClassVar[int] = 422


class HookPayloadInvalid(ContractError):
    """A handler payload does not match its event's fields."""

    code: ClassVar[str] = "BX4201"
    http_status: ClassVar[int] = 422


class NativeDecodeFailed(ContractError):
    """A native value fails its decode step (json-string not JSON, positive-count not a count)
    or its field kind.
    """

    code: ClassVar[str] = "BX4301"
    http_status: ClassVar[int] = 422


class UnknownNativeEvent(ContractError):
    """A host kind or native event name that hosts.toml does not know."""

    code: ClassVar[str] = "BX4302"
    http_status: ClassVar[int] = 422


class ModelInvalid(ContractError):
    """A value does not conform to its resource schema."""

    code: ClassVar[str] = "BX4401"
    http_status: ClassVar[int] = 422


class ConfigInvalid(ContractError):
    """A configuration, prebuilt or skill definition (or a config factory's result) does not
    conform.
    """

    code: ClassVar[str] = "BX4402"
    http_status: ClassVar[int] = 422


class TransitionNotAllowed(ContractError):
    """A trigger that no row of the subject's state table allows from its current state."""

    code: ClassVar[str] = "BX4403"
    http_status: ClassVar[int] = 409


class SkillTokenInvalid(ContractError):
    """A skill token outside the grammar of SkillToken.json: not an optional sigil and a
    qualified or bare skill name.
    """

    code: ClassVar[str] = "BX4404"
    http_status: ClassVar[int] = 422


class ConfigFileMissing(DiagnosticError):
    """A project directory has neither bundle.config.py nor bundle.config.json, or has both."""

    code: ClassVar[str] = "BX4701"
    http_status: ClassVar[int] = 422


class ConfigLoadFailed(DiagnosticError):
    """Bundle.config.py failed to run (syntax error, exception, no `config`), a config factory
    raised, bundle.config.json is not JSON, or the config file is a symbolic link or no
    regular file.
    """

    code: ClassVar[str] = "BX4702"
    http_status: ClassVar[int] = 422


class HandlerUnresolved(DiagnosticError):
    """A module:function reference of the config names a module that cannot be imported (not
    found, syntax error, import error) or an attribute that is missing or not callable.
    """

    code: ClassVar[str] = "BX4703"
    http_status: ClassVar[int] = 422


class SkillInvalid(DiagnosticError):
    """A skill's directory is missing or has no SKILL.md, or a skill has neither a directory
    nor instructions.
    """

    code: ClassVar[str] = "BX4704"
    http_status: ClassVar[int] = 422


class BuildFailed(DiagnosticError):
    """A build attempt failed; the summary diagnostic of the attempt, saying which epoch stays
    active.
    """

    code: ClassVar[str] = "BX4705"
    http_status: ClassVar[int] = 422


class StateRootUnusable(DiagnosticError):
    """The state root (BUNDLE_STATE_ROOT or the project's .bundle/state) cannot be created or
    written.
    """

    code: ClassVar[str] = "BX4706"
    http_status: ClassVar[int] = 422


class ProjectAlreadyServed(ContractError):
    """Another development server already serves this project (it holds the project's server
    lock).
    """

    code: ClassVar[str] = "BX4707"
    http_status: ClassVar[int] = 409


class SourceUnreadable(DiagnosticError):
    """A project file vanished or could not be read while the build copied it."""

    code: ClassVar[str] = "BX4708"
    http_status: ClassVar[int] = 422


class HandlerUnreachable(DiagnosticError):
    """A configured handler cannot run on a target host: the host has no native event for its
    handler event, or never sends a payload field the event requires (a warning: the other
    targets still get it).
    """

    code: ClassVar[str] = "BX4709"
    http_status: ClassVar[int] = 422


class LinkNotShipped(DiagnosticError):
    """A project file or directory is a symbolic link: never followed, never shipped, wherever
    it leads (a warning; the message says whether it leads outside the project).
    """

    code: ClassVar[str] = "BX4901"
    http_status: ClassVar[int] = 422


class SourceNameInvalid(DiagnosticError):
    """A project file or directory (not ignored) has a name that is not UTF-8."""

    code: ClassVar[str] = "BX4902"
    http_status: ClassVar[int] = 422


class ManifestVersionUnsupported(ContractError):
    """An artifact manifest whose manifestVersion is not 6."""

    code: ClassVar[str] = "BX4601"
    http_status: ClassVar[int] = 422


class ManifestInvalid(ContractError):
    """An artifact manifest that is not UTF-8 JSON, is too large, or does not conform to
    ArtifactManifest.json.
    """

    code: ClassVar[str] = "BX4602"
    http_status: ClassVar[int] = 422


class ManifestPathUnsafe(ContractError):
    """A manifest path that is absolute, holds a backslash or a drive letter, or has '.', '..'
    or empty segments.
    """

    code: ClassVar[str] = "BX4603"
    http_status: ClassVar[int] = 422


class ManifestDuplicateEntry(ContractError):
    """Two rows of a manifest set (files, bins, scripts, hooks, mcpServers, routes,
    projections, payloads) share their key.
    """

    code: ClassVar[str] = "BX4604"
    http_status: ClassVar[int] = 422


class ManifestReferenceBroken(ContractError):
    """A hook, bin, script, MCP server launch, route, projection, payload or web entry names a
    file the manifest does not list.
    """

    code: ClassVar[str] = "BX4605"
    http_status: ClassVar[int] = 422


class ManifestDigestInvalid(ContractError):
    """A file row whose sha256 is not 64 lowercase hexadecimal digits."""

    code: ClassVar[str] = "BX4606"
    http_status: ClassVar[int] = 422


class ManifestRuntimeFloorInvalid(ContractError):
    """A runtime.node floor that is not major.minor[.patch]."""

    code: ClassVar[str] = "BX4607"
    http_status: ClassVar[int] = 422


class ArtifactFileUnusable(ContractError):
    """Assembling a manifest from a file that is missing, not a regular file, or a symlink
    leading outside the artifact root.
    """

    code: ClassVar[str] = "BX4608"
    http_status: ClassVar[int] = 422


class PathTokenUnknown(ContractError):
    """A bundle:path: token other than plugin-data, plugin-root or workspace-root."""

    code: ClassVar[str] = "BX4609"
    http_status: ClassVar[int] = 422


class EvalSuiteInvalid(ContractError):
    """An evaluation suite file that cannot be read, does not conform to EvalSuite.json,
    repeats a case id, names a fixture outside its directory or missing, or holds a regular
    expression that does not compile.
    """

    code: ClassVar[str] = "BX4801"
    http_status: ClassVar[int] = 422


class EvalRunMismatch(ContractError):
    """Resuming a run directory whose run.json was made from another suite (digest), host, arms
    or trial count.
    """

    code: ClassVar[str] = "BX4802"
    http_status: ClassVar[int] = 409


class EvalRunInvalid(ContractError):
    """A run record (run.json) to compare or report that cannot be read or does not conform to
    EvalRun.json.
    """

    code: ClassVar[str] = "BX4803"
    http_status: ClassVar[int] = 422


class EvalBundleMissing(ContractError):
    """An evaluation run or trial with the `with` arm on a project that has no adopted epoch: a
    bare project, or one whose first build failed.
    """

    code: ClassVar[str] = "BX4804"
    http_status: ClassVar[int] = 409


class EvalRunnerMissing(ContractError):
    """An evaluation run asked to run on a runner whose optional extra is not installed
    (--runner ray without bundle-devkit[ray]); the message names the extra and how to
    install it.
    """

    code: ClassVar[str] = "BX4805"
    http_status: ClassVar[int] = 501


class EvalClusterUnusable(ContractError):
    """An evaluation run on a Ray cluster that cannot go on: the cluster cannot be reached, no
    node of it has a CPU, every node refused the run (each named with why) or every node was
    lost mid-run (the trials recorded so far stay in the run directory, and the run resumes
    with the same --out).
    """

    code: ClassVar[str] = "BX4806"
    http_status: ClassVar[int] = 503


class NoticeNotFound(RequestError):
    """A notice id (well formed) that the project's notice ledger does not hold: never opened,
    or dropped by retention.
    """

    code: ClassVar[str] = "BX5001"
    http_status: ClassVar[int] = 404


class NoticeNotOpen(RequestError):
    """Dismissing a notice that is already terminal (resolved, dismissed or superseded);
    nothing changes.
    """

    code: ClassVar[str] = "BX5002"
    http_status: ClassVar[int] = 409


class NoticeRetentionInvalid(ContractError):
    """A notice retention setting that is not one: terminalTtl neither milliseconds nor a
    duration such as 7d, 12h, 30m, 90s; maxTerminal or maxJournalBytes not a non-negative
    integer (maxJournalBytes below the smallest journal).
    """

    code: ClassVar[str] = "BX5003"
    http_status: ClassVar[int] = 422


class NoticeJournalCorrupt(ContractError):
    """A line of the notice journal other than its last is not a NoticeJournalRecord (a torn
    last line is no error: it is dropped); or the journal is not a regular file.
    """

    code: ClassVar[str] = "BX5004"
    http_status: ClassVar[int] = 422


class InstallHostUnsupported(RequestError):
    """Install or uninstall for a host kind hosts.toml gives no [host.install] (a host that is
    not launchable).
    """

    code: ClassVar[str] = "BX5101"
    http_status: ClassVar[int] = 422


class InstallScopeUnsupported(RequestError):
    """Install or uninstall with a scope the host's [host.install] row does not list (Codex and
    Gemini CLI install for the user only).
    """

    code: ClassVar[str] = "BX5102"
    http_status: ClassVar[int] = 422


class HostCliMissing(RequestError):
    """Install or uninstall when the host's CLI ([host.session] executable) is not found on
    PATH.
    """

    code: ClassVar[str] = "BX5103"
    http_status: ClassVar[int] = 422


class InstallCommandFailed(ContractError):
    """A command of the host's own CLI run by install or uninstall exited non-zero or did not
    finish in time, or the host's own server (Codex's app-server, for hook trust) refused a
    request or did not answer in time; the message quotes the command and its last words.
    """

    code: ClassVar[str] = "BX5104"
    http_status: ClassVar[int] = 502


class InstallBuildFailed(DiagnosticError):
    """Install on a project whose fresh build fails; the message carries the build's first
    error.
    """

    code: ClassVar[str] = "BX5105"
    http_status: ClassVar[int] = 422


class NotInstalled(RequestError):
    """Uninstall for a host (and scope) the project's state root records no install for."""

    code: ClassVar[str] = "BX5106"
    http_status: ClassVar[int] = 404


class HostCliUntested(RequestError):
    """Install into a host whose CLI version is not one of hosts.toml [host.session]
    tested_versions, without --any-version; the message names the version found and those
    tested.
    """

    code: ClassVar[str] = "BX5107"
    http_status: ClassVar[int] = 422


class McpCollectionInvalid(RequestError):
    """A collection file of the project that cannot be read (or written, or removed), is larger
    than mcp-collection-file-bytes, is not JSON, does not conform to McpCollection.json or
    names a call twice; the message names the file and the key at fault.
    """

    code: ClassVar[str] = "BX5301"
    http_status: ClassVar[int] = 422


class McpCollectionNotFound(RequestError):
    """A collection name (well formed) that the project's mcp-collections/ directory holds no
    file for.
    """

    code: ClassVar[str] = "BX5302"
    http_status: ClassVar[int] = 404


ERRORS: dict[str, type[ContractError]] = {
    "AB8256": InvocationAlreadyFinal,
    "AB8022": BindingClosed,
    "AB8260": PtyUnavailable,
    "AB8261": MalformedSessionRequest,
    "AB8262": SessionNotFound,
    "AB8263": HostNotLaunchable,
    "AB8264": SessionLimitReached,
    "AB8265": SessionServiceUnavailable,
    "AB8266": InvalidDevSession,
    "AB7014": RuntimeDependencyUnevidenced,
    "AB4751": RuntimeDependencyNotInstalled,
    "AB7001": ProjectionWithoutPluginManifest,
    "AB6018": HookWrapperNotUnique,
    "BX1000": InternalError,
    "BX1001": RouteNotFound,
    "BX1002": MethodNotAllowed,
    "BX1003": UnsupportedMediaType,
    "BX1004": InvalidRequest,
    "BX1005": PayloadTooLarge,
    "BX1006": HeadersTooLarge,
    "BX1007": RequestLineTooLong,
    "BX1008": RequestBodyTimeout,
    "BX1009": AssetNotFound,
    "BX1010": MultiplexStreamNotFound,
    "BX1011": SubscriptionTargetUnknown,
    "BX1012": SubscriptionRefused,
    "BX2001": SessionRequired,
    "BX2002": HostNotAllowed,
    "BX2003": OriginNotAllowed,
    "BX2004": ReceiptTokenInvalid,
    "BX2005": ReceiptPeerNotLoopback,
    "BX2006": ReceiptOriginRefused,
    "BX2007": AgentTokenInvalid,
    "BX3001": CursorMalformed,
    "BX3002": CursorAhead,
    "BX3101": RouteUnknown,
    "BX3102": NoActiveEpoch,
    "BX3103": RuntimeGenerationStale,
    "BX3104": RouteInputInvalid,
    "BX3201": McpServerFailed,
    "BX3202": McpRequestTimedOut,
    "BX3203": McpLaunchUnknown,
    "BX3204": McpOperationUnknown,
    "BX3205": McpOperationDuplicate,
    "BX3003": ServiceUnavailable,
    "BX4101": HookResultNotObject,
    "BX4102": ReasonWhileContinuing,
    "BX4103": DenyNotAllowed,
    "BX4104": DenyWithoutReason,
    "BX4105": UpdatedInputWhileDenying,
    "BX4106": StopOutcome,
    "BX4107": ResultFieldNotAllowed,
    "BX4108": ResultShapeInvalid,
    "BX4109": UnknownHandlerEvent,
    "BX4201": HookPayloadInvalid,
    "BX4301": NativeDecodeFailed,
    "BX4302": UnknownNativeEvent,
    "BX4401": ModelInvalid,
    "BX4402": ConfigInvalid,
    "BX4403": TransitionNotAllowed,
    "BX4404": SkillTokenInvalid,
    "BX4701": ConfigFileMissing,
    "BX4702": ConfigLoadFailed,
    "BX4703": HandlerUnresolved,
    "BX4704": SkillInvalid,
    "BX4705": BuildFailed,
    "BX4706": StateRootUnusable,
    "BX4707": ProjectAlreadyServed,
    "BX4708": SourceUnreadable,
    "BX4709": HandlerUnreachable,
    "BX4901": LinkNotShipped,
    "BX4902": SourceNameInvalid,
    "BX4601": ManifestVersionUnsupported,
    "BX4602": ManifestInvalid,
    "BX4603": ManifestPathUnsafe,
    "BX4604": ManifestDuplicateEntry,
    "BX4605": ManifestReferenceBroken,
    "BX4606": ManifestDigestInvalid,
    "BX4607": ManifestRuntimeFloorInvalid,
    "BX4608": ArtifactFileUnusable,
    "BX4609": PathTokenUnknown,
    "BX4801": EvalSuiteInvalid,
    "BX4802": EvalRunMismatch,
    "BX4803": EvalRunInvalid,
    "BX4804": EvalBundleMissing,
    "BX4805": EvalRunnerMissing,
    "BX4806": EvalClusterUnusable,
    "BX5001": NoticeNotFound,
    "BX5002": NoticeNotOpen,
    "BX5003": NoticeRetentionInvalid,
    "BX5004": NoticeJournalCorrupt,
    "BX5101": InstallHostUnsupported,
    "BX5102": InstallScopeUnsupported,
    "BX5103": HostCliMissing,
    "BX5104": InstallCommandFailed,
    "BX5105": InstallBuildFailed,
    "BX5106": NotInstalled,
    "BX5107": HostCliUntested,
    "BX5301": McpCollectionInvalid,
    "BX5302": McpCollectionNotFound,
}

__all__ = [
    "ERRORS",
    "AgentTokenInvalid",
    "ArtifactFileUnusable",
    "AssetNotFound",
    "BindingClosed",
    "BuildFailed",
    "ConfigFileMissing",
    "ConfigInvalid",
    "ConfigLoadFailed",
    "CursorAhead",
    "CursorMalformed",
    "DenyNotAllowed",
    "DenyWithoutReason",
    "EvalBundleMissing",
    "EvalClusterUnusable",
    "EvalRunInvalid",
    "EvalRunMismatch",
    "EvalRunnerMissing",
    "EvalSuiteInvalid",
    "HandlerUnreachable",
    "HandlerUnresolved",
    "HeadersTooLarge",
    "HookPayloadInvalid",
    "HookResultNotObject",
    "HookWrapperNotUnique",
    "HostCliMissing",
    "HostCliUntested",
    "HostNotAllowed",
    "HostNotLaunchable",
    "InstallBuildFailed",
    "InstallCommandFailed",
    "InstallHostUnsupported",
    "InstallScopeUnsupported",
    "InternalError",
    "InvalidDevSession",
    "InvalidRequest",
    "InvocationAlreadyFinal",
    "LinkNotShipped",
    "MalformedSessionRequest",
    "ManifestDigestInvalid",
    "ManifestDuplicateEntry",
    "ManifestInvalid",
    "ManifestPathUnsafe",
    "ManifestReferenceBroken",
    "ManifestRuntimeFloorInvalid",
    "ManifestVersionUnsupported",
    "McpCollectionInvalid",
    "McpCollectionNotFound",
    "McpLaunchUnknown",
    "McpOperationDuplicate",
    "McpOperationUnknown",
    "McpRequestTimedOut",
    "McpServerFailed",
    "MethodNotAllowed",
    "ModelInvalid",
    "MultiplexStreamNotFound",
    "NativeDecodeFailed",
    "NoActiveEpoch",
    "NotInstalled",
    "NoticeJournalCorrupt",
    "NoticeNotFound",
    "NoticeNotOpen",
    "NoticeRetentionInvalid",
    "OriginNotAllowed",
    "PathTokenUnknown",
    "PayloadTooLarge",
    "ProjectAlreadyServed",
    "ProjectionWithoutPluginManifest",
    "PtyUnavailable",
    "ReasonWhileContinuing",
    "ReceiptOriginRefused",
    "ReceiptPeerNotLoopback",
    "ReceiptTokenInvalid",
    "RequestBodyTimeout",
    "RequestLineTooLong",
    "ResultFieldNotAllowed",
    "ResultShapeInvalid",
    "RouteInputInvalid",
    "RouteNotFound",
    "RouteUnknown",
    "RuntimeDependencyNotInstalled",
    "RuntimeDependencyUnevidenced",
    "RuntimeGenerationStale",
    "ServiceUnavailable",
    "SessionLimitReached",
    "SessionNotFound",
    "SessionRequired",
    "SessionServiceUnavailable",
    "SkillInvalid",
    "SkillTokenInvalid",
    "SourceNameInvalid",
    "SourceUnreadable",
    "StateRootUnusable",
    "StopOutcome",
    "SubscriptionRefused",
    "SubscriptionTargetUnknown",
    "TransitionNotAllowed",
    "UnknownHandlerEvent",
    "UnknownNativeEvent",
    "UnsupportedMediaType",
    "UpdatedInputWhileDenying",
]
