"""Generated from spec/ by `python -m bundle_contract generate`. Do not edit."""

# host kind -> handler event -> (native event, family, ((payload field, native key,
# decode step or None), ...)), in payload field order (hooks.toml payload_source).
BINDINGS = {'host_a': {'sessionStart': ('SessionStart', 'session/start', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('effort', 'effort', 'level'), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('permissionMode', 'permission_mode', None), ('promptId', 'prompt_id', None), ('transcriptPath', 'transcript_path', None), ('source', 'source', None))), 'beforeTool': ('PreToolUse', 'tool/before', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('effort', 'effort', 'level'), ('hookEventName', 'hook_event_name', None), ('permissionMode', 'permission_mode', None), ('promptId', 'prompt_id', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', None), ('toolName', 'tool_name', None), ('toolUseId', 'tool_use_id', None))), 'afterTool': ('PostToolUse', 'tool/after', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('effort', 'effort', 'level'), ('hookEventName', 'hook_event_name', None), ('permissionMode', 'permission_mode', None), ('promptId', 'prompt_id', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', None), ('toolName', 'tool_name', None), ('toolUseId', 'tool_use_id', None), ('toolResponse', 'tool_response', None))), 'stop': ('Stop', 'stop', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('effort', 'effort', 'level'), ('hookEventName', 'hook_event_name', None), ('permissionMode', 'permission_mode', None), ('promptId', 'prompt_id', None), ('transcriptPath', 'transcript_path', None), ('stopHookActive', 'stop_hook_active', None), ('lastAssistantMessage', 'last_assistant_message', None))), 'agentStart': ('SubagentStart', 'agent/start', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('effort', 'effort', 'level'), ('hookEventName', 'hook_event_name', None), ('permissionMode', 'permission_mode', None), ('promptId', 'prompt_id', None), ('transcriptPath', 'transcript_path', None), ('agentId', 'agent_id', None), ('agentType', 'agent_type', None))), 'agentStop': ('SubagentStop', 'agent/stop', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('effort', 'effort', 'level'), ('hookEventName', 'hook_event_name', None), ('permissionMode', 'permission_mode', None), ('promptId', 'prompt_id', None), ('transcriptPath', 'transcript_path', None), ('agentType', 'agent_type', None), ('stopHookActive', 'stop_hook_active', None), ('agentId', 'agent_id', None), ('agentTranscriptPath', 'agent_transcript_path', None), ('lastAssistantMessage', 'last_assistant_message', None)))}, 'host_b': {'sessionStart': ('SessionStart', 'session/start', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('permissionMode', 'permission_mode', None), ('turnId', 'turn_id', None), ('transcriptPath', 'transcript_path', None), ('source', 'source', None))), 'beforeTool': ('PreToolUse', 'tool/before', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('permissionMode', 'permission_mode', None), ('turnId', 'turn_id', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', None), ('toolName', 'tool_name', None), ('toolUseId', 'tool_use_id', None))), 'afterTool': ('PostToolUse', 'tool/after', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('permissionMode', 'permission_mode', None), ('turnId', 'turn_id', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', None), ('toolName', 'tool_name', None), ('toolUseId', 'tool_use_id', None), ('toolResponse', 'tool_response', None))), 'stop': ('Stop', 'stop', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('permissionMode', 'permission_mode', None), ('turnId', 'turn_id', None), ('transcriptPath', 'transcript_path', None), ('stopHookActive', 'stop_hook_active', None), ('lastAssistantMessage', 'last_assistant_message', None))), 'agentStart': ('SubagentStart', 'agent/start', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('permissionMode', 'permission_mode', None), ('turnId', 'turn_id', None), ('transcriptPath', 'transcript_path', None), ('agentId', 'agent_id', None), ('agentType', 'agent_type', None))), 'agentStop': ('SubagentStop', 'agent/stop', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('permissionMode', 'permission_mode', None), ('turnId', 'turn_id', None), ('transcriptPath', 'transcript_path', None), ('agentType', 'agent_type', None), ('stopHookActive', 'stop_hook_active', None), ('agentId', 'agent_id', None), ('agentTranscriptPath', 'agent_transcript_path', None), ('lastAssistantMessage', 'last_assistant_message', None)))}, 'host_c': {'sessionStart': ('SessionStart', 'session/start', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('transcriptPath', 'transcript_path', None), ('source', 'source', None))), 'beforeTool': ('BeforeTool', 'tool/before', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', None), ('toolName', 'tool_name', None))), 'afterTool': ('AfterTool', 'tool/after', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', None), ('toolName', 'tool_name', None), ('toolResponse', 'tool_response', None))), 'stop': ('AfterAgent', 'stop', (('sessionId', 'session_id', None), ('cwd', 'cwd', None), ('hookEventName', 'hook_event_name', None), ('transcriptPath', 'transcript_path', None), ('stopHookActive', 'stop_hook_active', None), ('lastAssistantMessage', 'prompt_response', None)))}, 'host_d': {'beforeTool': ('beforeMCPExecution', 'tool/before', (('sessionId', 'conversation_id', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('turnId', 'generation_id', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', 'json-string'), ('toolName', 'tool_name', None))), 'afterTool': ('afterMCPExecution', 'tool/after', (('sessionId', 'conversation_id', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('turnId', 'generation_id', None), ('transcriptPath', 'transcript_path', None), ('toolInput', 'tool_input', 'json-string'), ('toolName', 'tool_name', None), ('toolResponse', 'result_json', 'json-string'))), 'stop': ('stop', 'stop', (('sessionId', 'conversation_id', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('turnId', 'generation_id', None), ('transcriptPath', 'transcript_path', None), ('stopHookActive', 'loop_count', 'positive-count'))), 'agentStart': ('subagentStart', 'agent/start', (('sessionId', 'conversation_id', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('turnId', 'generation_id', None), ('transcriptPath', 'transcript_path', None))), 'agentStop': ('subagentStop', 'agent/stop', (('sessionId', 'conversation_id', None), ('hookEventName', 'hook_event_name', None), ('model', 'model', None), ('turnId', 'generation_id', None), ('transcriptPath', 'transcript_path', None), ('stopHookActive', 'loop_count', 'positive-count')))}}
# host kind -> family -> result part -> ((path, value), ...), or None where the host
# cannot carry the part (hosts.toml hook_output, rows for the family winning).
OUTPUTS = {'host_a': {'session/start': {'continue': (), 'additionalContext': ((('hookSpecificOutput', 'additionalContext'), '$additionalContext'), (('hookSpecificOutput', 'hookEventName'), '$native'))}, 'tool/before': {'continue': (), 'deny': ((('hookSpecificOutput', 'hookEventName'), '$native'), (('hookSpecificOutput', 'permissionDecision'), 'deny'), (('hookSpecificOutput', 'permissionDecisionReason'), '$reason')), 'updatedInput': ((('hookSpecificOutput', 'hookEventName'), '$native'), (('hookSpecificOutput', 'permissionDecision'), 'allow'), (('hookSpecificOutput', 'updatedInput'), '$updatedInput'))}, 'tool/after': {'continue': (), 'additionalContext': ((('hookSpecificOutput', 'additionalContext'), '$additionalContext'), (('hookSpecificOutput', 'hookEventName'), '$native'))}, 'stop': {'continue': (), 'deny': ((('decision',), 'block'), (('reason',), '$reason'))}, 'agent/start': {'continue': ()}, 'agent/stop': {'continue': (), 'deny': ((('decision',), 'block'), (('reason',), '$reason'))}}, 'host_b': {'session/start': {'continue': (), 'additionalContext': ((('hookSpecificOutput', 'additionalContext'), '$additionalContext'), (('hookSpecificOutput', 'hookEventName'), '$native'))}, 'tool/before': {'continue': (), 'deny': ((('hookSpecificOutput', 'hookEventName'), '$native'), (('hookSpecificOutput', 'permissionDecision'), 'deny'), (('hookSpecificOutput', 'permissionDecisionReason'), '$reason')), 'updatedInput': ((('hookSpecificOutput', 'hookEventName'), '$native'), (('hookSpecificOutput', 'permissionDecision'), 'allow'), (('hookSpecificOutput', 'updatedInput'), '$updatedInput'))}, 'tool/after': {'continue': (), 'additionalContext': ((('hookSpecificOutput', 'additionalContext'), '$additionalContext'), (('hookSpecificOutput', 'hookEventName'), '$native'))}, 'stop': {'continue': (), 'deny': ((('decision',), 'block'), (('reason',), '$reason'))}, 'agent/start': {'continue': ()}, 'agent/stop': {'continue': (), 'deny': ((('decision',), 'block'), (('reason',), '$reason'))}}, 'host_c': {'session/start': {'continue': (), 'additionalContext': ((('hookSpecificOutput', 'additionalContext'), '$additionalContext'), (('hookSpecificOutput', 'hookEventName'), '$native'))}, 'tool/before': {'continue': (), 'deny': ((('decision',), 'deny'), (('reason',), '$reason')), 'updatedInput': ((('hookSpecificOutput', 'hookEventName'), '$native'), (('hookSpecificOutput', 'tool_input'), '$updatedInput'))}, 'tool/after': {'continue': (), 'additionalContext': ((('hookSpecificOutput', 'additionalContext'), '$additionalContext'), (('hookSpecificOutput', 'hookEventName'), '$native'))}, 'stop': {'continue': (), 'deny': ((('decision',), 'deny'), (('reason',), '$reason'))}}, 'host_d': {'tool/before': {'continue': (), 'deny': ((('agent_message',), '$reason'), (('permission',), 'deny'), (('user_message',), '$reason')), 'updatedInput': None}, 'tool/after': {'continue': (), 'additionalContext': None}, 'stop': {'continue': (), 'deny': ((('followup_message',), '$reason'),)}, 'agent/start': {'continue': ()}, 'agent/stop': {'continue': (), 'deny': ((('followup_message',), '$reason'),)}}}
# host kind -> handler event -> required fields the schema leaves optional (hooks.toml
# unsent) that this host has a key for, and so must send.
PRESENT = {'host_a': {'beforeTool': ('toolUseId',), 'afterTool': ('toolUseId',)}, 'host_b': {'beforeTool': ('toolUseId',), 'afterTool': ('toolUseId',)}}
# handler event -> the payload fields it requires (common and its own, hooks.toml).
REQUIRED = {'sessionStart': ('sessionId',), 'beforeTool': ('sessionId', 'toolInput', 'toolName', 'toolUseId'), 'afterTool': ('sessionId', 'toolInput', 'toolName', 'toolUseId', 'toolResponse'), 'stop': ('sessionId', 'stopHookActive'), 'agentStart': ('sessionId', 'agentId', 'agentType'), 'agentStop': ('sessionId', 'agentType', 'stopHookActive')}
# host kind -> what the wrapper writes for an empty answer (hosts.toml empty_answer).
EMPTY_ANSWERS = {'host_c': '{}'}
# handler event -> the canonical family it serves (hooks.toml event rows).
EVENT_FAMILIES = {'sessionStart': 'session/start', 'beforeTool': 'tool/before', 'afterTool': 'tool/after', 'stop': 'stop', 'agentStart': 'agent/start', 'agentStop': 'agent/stop'}
DEFAULT_TIMEOUT_MS = 10000
MARGIN_MS = 500
NATIVE_INPUT_MAX_BYTES = 16777216
FAILURE_PHASE = 'handler'
LINEAGE_AXIS = 'session'
RECEIPT_VERSION = 1

# Generated by bundle_contract._compile from JSON Schema (draft 2020-12).
# Do not edit: regenerate instead.


def _is_int(x):
    # Slow path of the "integer" check: bool is never one, integral floats are.
    if x is True or x is False:
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def _esc(key):
    # JSON pointer token escaping (RFC 6901).
    return str(key).replace("~", "~0").replace("/", "~1")


def _tname(x):
    if x is None:
        return "null"
    if x is True or x is False:
        return "boolean"
    if isinstance(x, str):
        return "string"
    if isinstance(x, dict):
        return "object"
    if isinstance(x, list):
        return "array"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "number"
    return type(x).__name__


_K0 = frozenset(('sessionId', 'cwd', 'effort', 'hookEventName', 'model', 'permissionMode', 'promptId', 'turnId', 'transcriptPath', 'source', ))
_K1 = frozenset(('sessionId', 'cwd', 'effort', 'hookEventName', 'model', 'permissionMode', 'promptId', 'turnId', 'transcriptPath', 'toolInput', 'toolName', 'toolUseId', ))
_K2 = frozenset(('sessionId', 'cwd', 'effort', 'hookEventName', 'model', 'permissionMode', 'promptId', 'turnId', 'transcriptPath', 'toolInput', 'toolName', 'toolUseId', 'toolResponse', ))
_K3 = frozenset(('sessionId', 'cwd', 'effort', 'hookEventName', 'model', 'permissionMode', 'promptId', 'turnId', 'transcriptPath', 'stopHookActive', 'lastAssistantMessage', ))
_K4 = frozenset(('sessionId', 'cwd', 'effort', 'hookEventName', 'model', 'permissionMode', 'promptId', 'turnId', 'transcriptPath', 'agentId', 'agentType', 'toolUseId', ))
_K5 = frozenset(('sessionId', 'cwd', 'effort', 'hookEventName', 'model', 'permissionMode', 'promptId', 'turnId', 'transcriptPath', 'agentType', 'stopHookActive', 'agentId', 'agentTranscriptPath', 'lastAssistantMessage', ))


# '<sessionStart>#'
def is_valid_sessionStart(x):
    if not _v18(x):
        return False
    return True


# '<sessionStart>#'
def first_error_sessionStart(x):
    r3 = _e19(x)
    if r3 is not None:
        return r3
    return None


# '<beforeTool>#'
def is_valid_beforeTool(x):
    if not _v20(x):
        return False
    return True


# '<beforeTool>#'
def first_error_beforeTool(x):
    r3 = _e21(x)
    if r3 is not None:
        return r3
    return None


# '<afterTool>#'
def is_valid_afterTool(x):
    if not _v22(x):
        return False
    return True


# '<afterTool>#'
def first_error_afterTool(x):
    r3 = _e23(x)
    if r3 is not None:
        return r3
    return None


# '<stop>#'
def is_valid_stop(x):
    if not _v24(x):
        return False
    return True


# '<stop>#'
def first_error_stop(x):
    r3 = _e25(x)
    if r3 is not None:
        return r3
    return None


# '<agentStart>#'
def is_valid_agentStart(x):
    if not _v26(x):
        return False
    return True


# '<agentStart>#'
def first_error_agentStart(x):
    r3 = _e27(x)
    if r3 is not None:
        return r3
    return None


# '<agentStop>#'
def is_valid_agentStop(x):
    if not _v28(x):
        return False
    return True


# '<agentStop>#'
def first_error_agentStop(x):
    r3 = _e29(x)
    if r3 is not None:
        return r3
    return None


# '<decode:json-string>#'
def is_valid_decode_json_string(x):
    if not (type(x) is str or isinstance(x, str)):
        return False
    return True


# '<decode:json-string>#'
def first_error_decode_json_string(x):
    if not (type(x) is str or isinstance(x, str)):
        return ("", 'expected string, got ' + _tname(x))
    return None


# '<decode:positive-count>#'
def is_valid_decode_positive_count(x):
    if not (type(x) is int or _is_int(x)):
        return False
    if x < 0:
        return False
    return True


# '<decode:positive-count>#'
def first_error_decode_positive_count(x):
    if not (type(x) is int or _is_int(x)):
        return ("", 'expected integer, got ' + _tname(x))
    if x < 0:
        return ("", 'less than minimum 0')
    return None


# '<decode:level>#'
def is_valid_decode_level(x):
    if not ((type(x) is str or isinstance(x, str)) or _v30(x)):
        return False
    return True


# '<decode:level>#'
def first_error_decode_level(x):
    if not ((type(x) is str or isinstance(x, str)) or _v30(x)):
        return ("", 'not valid against any subschema of anyOf')
    return None


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/sessionStart'
def _v18(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return False
    if 'sessionId' not in x or not (x.keys() <= _K0):
        return False
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return False
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return False
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return False
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return False
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return False
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return False
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return False
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return False
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return False
    if 'source' in x:
        v28 = x['source']
        if not (type(v28) is str or isinstance(v28, str)):
            return False
    return True


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/sessionStart'
def _e19(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return ("", 'expected object, got ' + _tname(x))
    if 'sessionId' not in x:
        return ("", "missing required property 'sessionId'")
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return ('/sessionId', 'expected string, got ' + _tname(v1))
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return ('/cwd', 'expected string, got ' + _tname(v4))
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return ('/effort', 'expected string, got ' + _tname(v7))
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return ('/hookEventName', 'expected string, got ' + _tname(v10))
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return ('/model', 'expected string, got ' + _tname(v13))
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return ('/permissionMode', 'expected string, got ' + _tname(v16))
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return ('/promptId', 'expected string, got ' + _tname(v19))
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return ('/turnId', 'expected string, got ' + _tname(v22))
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return ('/transcriptPath', 'expected string or null, got ' + _tname(v25))
    if 'source' in x:
        v28 = x['source']
        if not (type(v28) is str or isinstance(v28, str)):
            return ('/source', 'expected string, got ' + _tname(v28))
    for k31 in sorted(x):
        if k31 not in _K0:
            return ('/' + _esc(k31), 'additional property is not allowed')
    return None


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/beforeTool'
def _v20(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return False
    if 'sessionId' not in x or 'toolInput' not in x or 'toolName' not in x or not (x.keys() <= _K1):
        return False
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return False
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return False
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return False
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return False
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return False
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return False
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return False
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return False
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return False
    v31 = x['toolName']
    if not (type(v31) is str or isinstance(v31, str)):
        return False
    if 'toolUseId' in x:
        v34 = x['toolUseId']
        if not (type(v34) is str or isinstance(v34, str)):
            return False
    return True


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/beforeTool'
def _e21(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return ("", 'expected object, got ' + _tname(x))
    if 'sessionId' not in x:
        return ("", "missing required property 'sessionId'")
    if 'toolInput' not in x:
        return ("", "missing required property 'toolInput'")
    if 'toolName' not in x:
        return ("", "missing required property 'toolName'")
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return ('/sessionId', 'expected string, got ' + _tname(v1))
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return ('/cwd', 'expected string, got ' + _tname(v4))
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return ('/effort', 'expected string, got ' + _tname(v7))
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return ('/hookEventName', 'expected string, got ' + _tname(v10))
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return ('/model', 'expected string, got ' + _tname(v13))
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return ('/permissionMode', 'expected string, got ' + _tname(v16))
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return ('/promptId', 'expected string, got ' + _tname(v19))
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return ('/turnId', 'expected string, got ' + _tname(v22))
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return ('/transcriptPath', 'expected string or null, got ' + _tname(v25))
    v31 = x['toolName']
    if not (type(v31) is str or isinstance(v31, str)):
        return ('/toolName', 'expected string, got ' + _tname(v31))
    if 'toolUseId' in x:
        v34 = x['toolUseId']
        if not (type(v34) is str or isinstance(v34, str)):
            return ('/toolUseId', 'expected string, got ' + _tname(v34))
    for k37 in sorted(x):
        if k37 not in _K1:
            return ('/' + _esc(k37), 'additional property is not allowed')
    return None


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/afterTool'
def _v22(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return False
    if 'sessionId' not in x or 'toolInput' not in x or 'toolName' not in x or 'toolResponse' not in x or not (x.keys() <= _K2):
        return False
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return False
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return False
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return False
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return False
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return False
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return False
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return False
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return False
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return False
    v31 = x['toolName']
    if not (type(v31) is str or isinstance(v31, str)):
        return False
    if 'toolUseId' in x:
        v34 = x['toolUseId']
        if not (type(v34) is str or isinstance(v34, str)):
            return False
    return True


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/afterTool'
def _e23(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return ("", 'expected object, got ' + _tname(x))
    if 'sessionId' not in x:
        return ("", "missing required property 'sessionId'")
    if 'toolInput' not in x:
        return ("", "missing required property 'toolInput'")
    if 'toolName' not in x:
        return ("", "missing required property 'toolName'")
    if 'toolResponse' not in x:
        return ("", "missing required property 'toolResponse'")
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return ('/sessionId', 'expected string, got ' + _tname(v1))
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return ('/cwd', 'expected string, got ' + _tname(v4))
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return ('/effort', 'expected string, got ' + _tname(v7))
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return ('/hookEventName', 'expected string, got ' + _tname(v10))
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return ('/model', 'expected string, got ' + _tname(v13))
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return ('/permissionMode', 'expected string, got ' + _tname(v16))
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return ('/promptId', 'expected string, got ' + _tname(v19))
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return ('/turnId', 'expected string, got ' + _tname(v22))
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return ('/transcriptPath', 'expected string or null, got ' + _tname(v25))
    v31 = x['toolName']
    if not (type(v31) is str or isinstance(v31, str)):
        return ('/toolName', 'expected string, got ' + _tname(v31))
    if 'toolUseId' in x:
        v34 = x['toolUseId']
        if not (type(v34) is str or isinstance(v34, str)):
            return ('/toolUseId', 'expected string, got ' + _tname(v34))
    for k40 in sorted(x):
        if k40 not in _K2:
            return ('/' + _esc(k40), 'additional property is not allowed')
    return None


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/stop'
def _v24(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return False
    if 'sessionId' not in x or 'stopHookActive' not in x or not (x.keys() <= _K3):
        return False
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return False
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return False
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return False
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return False
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return False
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return False
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return False
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return False
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return False
    v28 = x['stopHookActive']
    if not (v28 is True or v28 is False):
        return False
    if 'lastAssistantMessage' in x:
        v31 = x['lastAssistantMessage']
        if not ((type(v31) is str or isinstance(v31, str)) or v31 is None):
            return False
    return True


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/stop'
def _e25(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return ("", 'expected object, got ' + _tname(x))
    if 'sessionId' not in x:
        return ("", "missing required property 'sessionId'")
    if 'stopHookActive' not in x:
        return ("", "missing required property 'stopHookActive'")
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return ('/sessionId', 'expected string, got ' + _tname(v1))
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return ('/cwd', 'expected string, got ' + _tname(v4))
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return ('/effort', 'expected string, got ' + _tname(v7))
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return ('/hookEventName', 'expected string, got ' + _tname(v10))
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return ('/model', 'expected string, got ' + _tname(v13))
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return ('/permissionMode', 'expected string, got ' + _tname(v16))
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return ('/promptId', 'expected string, got ' + _tname(v19))
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return ('/turnId', 'expected string, got ' + _tname(v22))
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return ('/transcriptPath', 'expected string or null, got ' + _tname(v25))
    v28 = x['stopHookActive']
    if not (v28 is True or v28 is False):
        return ('/stopHookActive', 'expected boolean, got ' + _tname(v28))
    if 'lastAssistantMessage' in x:
        v31 = x['lastAssistantMessage']
        if not ((type(v31) is str or isinstance(v31, str)) or v31 is None):
            return ('/lastAssistantMessage', 'expected string or null, got ' + _tname(v31))
    for k34 in sorted(x):
        if k34 not in _K3:
            return ('/' + _esc(k34), 'additional property is not allowed')
    return None


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/agentStart'
def _v26(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return False
    if 'sessionId' not in x or 'agentId' not in x or 'agentType' not in x or not (x.keys() <= _K4):
        return False
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return False
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return False
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return False
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return False
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return False
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return False
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return False
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return False
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return False
    v28 = x['agentId']
    if not (type(v28) is str or isinstance(v28, str)):
        return False
    v31 = x['agentType']
    if not (type(v31) is str or isinstance(v31, str)):
        return False
    if 'toolUseId' in x:
        v34 = x['toolUseId']
        if not (type(v34) is str or isinstance(v34, str)):
            return False
    return True


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/agentStart'
def _e27(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return ("", 'expected object, got ' + _tname(x))
    if 'sessionId' not in x:
        return ("", "missing required property 'sessionId'")
    if 'agentId' not in x:
        return ("", "missing required property 'agentId'")
    if 'agentType' not in x:
        return ("", "missing required property 'agentType'")
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return ('/sessionId', 'expected string, got ' + _tname(v1))
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return ('/cwd', 'expected string, got ' + _tname(v4))
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return ('/effort', 'expected string, got ' + _tname(v7))
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return ('/hookEventName', 'expected string, got ' + _tname(v10))
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return ('/model', 'expected string, got ' + _tname(v13))
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return ('/permissionMode', 'expected string, got ' + _tname(v16))
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return ('/promptId', 'expected string, got ' + _tname(v19))
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return ('/turnId', 'expected string, got ' + _tname(v22))
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return ('/transcriptPath', 'expected string or null, got ' + _tname(v25))
    v28 = x['agentId']
    if not (type(v28) is str or isinstance(v28, str)):
        return ('/agentId', 'expected string, got ' + _tname(v28))
    v31 = x['agentType']
    if not (type(v31) is str or isinstance(v31, str)):
        return ('/agentType', 'expected string, got ' + _tname(v31))
    if 'toolUseId' in x:
        v34 = x['toolUseId']
        if not (type(v34) is str or isinstance(v34, str)):
            return ('/toolUseId', 'expected string, got ' + _tname(v34))
    for k37 in sorted(x):
        if k37 not in _K4:
            return ('/' + _esc(k37), 'additional property is not allowed')
    return None


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/agentStop'
def _v28(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return False
    if 'sessionId' not in x or 'agentType' not in x or 'stopHookActive' not in x or not (x.keys() <= _K5):
        return False
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return False
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return False
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return False
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return False
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return False
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return False
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return False
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return False
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return False
    v28 = x['agentType']
    if not (type(v28) is str or isinstance(v28, str)):
        return False
    v31 = x['stopHookActive']
    if not (v31 is True or v31 is False):
        return False
    if 'agentId' in x:
        v34 = x['agentId']
        if not (type(v34) is str or isinstance(v34, str)):
            return False
    if 'agentTranscriptPath' in x:
        v37 = x['agentTranscriptPath']
        if not ((type(v37) is str or isinstance(v37, str)) or v37 is None):
            return False
    if 'lastAssistantMessage' in x:
        v40 = x['lastAssistantMessage']
        if not ((type(v40) is str or isinstance(v40, str)) or v40 is None):
            return False
    return True


# 'https://bundle-devkit.dev/schema/HookPayloads.json#/$defs/agentStop'
def _e29(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return ("", 'expected object, got ' + _tname(x))
    if 'sessionId' not in x:
        return ("", "missing required property 'sessionId'")
    if 'agentType' not in x:
        return ("", "missing required property 'agentType'")
    if 'stopHookActive' not in x:
        return ("", "missing required property 'stopHookActive'")
    v1 = x['sessionId']
    if not (type(v1) is str or isinstance(v1, str)):
        return ('/sessionId', 'expected string, got ' + _tname(v1))
    if 'cwd' in x:
        v4 = x['cwd']
        if not (type(v4) is str or isinstance(v4, str)):
            return ('/cwd', 'expected string, got ' + _tname(v4))
    if 'effort' in x:
        v7 = x['effort']
        if not (type(v7) is str or isinstance(v7, str)):
            return ('/effort', 'expected string, got ' + _tname(v7))
    if 'hookEventName' in x:
        v10 = x['hookEventName']
        if not (type(v10) is str or isinstance(v10, str)):
            return ('/hookEventName', 'expected string, got ' + _tname(v10))
    if 'model' in x:
        v13 = x['model']
        if not (type(v13) is str or isinstance(v13, str)):
            return ('/model', 'expected string, got ' + _tname(v13))
    if 'permissionMode' in x:
        v16 = x['permissionMode']
        if not (type(v16) is str or isinstance(v16, str)):
            return ('/permissionMode', 'expected string, got ' + _tname(v16))
    if 'promptId' in x:
        v19 = x['promptId']
        if not (type(v19) is str or isinstance(v19, str)):
            return ('/promptId', 'expected string, got ' + _tname(v19))
    if 'turnId' in x:
        v22 = x['turnId']
        if not (type(v22) is str or isinstance(v22, str)):
            return ('/turnId', 'expected string, got ' + _tname(v22))
    if 'transcriptPath' in x:
        v25 = x['transcriptPath']
        if not ((type(v25) is str or isinstance(v25, str)) or v25 is None):
            return ('/transcriptPath', 'expected string or null, got ' + _tname(v25))
    v28 = x['agentType']
    if not (type(v28) is str or isinstance(v28, str)):
        return ('/agentType', 'expected string, got ' + _tname(v28))
    v31 = x['stopHookActive']
    if not (v31 is True or v31 is False):
        return ('/stopHookActive', 'expected boolean, got ' + _tname(v31))
    if 'agentId' in x:
        v34 = x['agentId']
        if not (type(v34) is str or isinstance(v34, str)):
            return ('/agentId', 'expected string, got ' + _tname(v34))
    if 'agentTranscriptPath' in x:
        v37 = x['agentTranscriptPath']
        if not ((type(v37) is str or isinstance(v37, str)) or v37 is None):
            return ('/agentTranscriptPath', 'expected string or null, got ' + _tname(v37))
    if 'lastAssistantMessage' in x:
        v40 = x['lastAssistantMessage']
        if not ((type(v40) is str or isinstance(v40, str)) or v40 is None):
            return ('/lastAssistantMessage', 'expected string or null, got ' + _tname(v40))
    for k43 in sorted(x):
        if k43 not in _K5:
            return ('/' + _esc(k43), 'additional property is not allowed')
    return None


# '<decode:level>#/anyOf/1'
def _v30(x):
    if not (type(x) is dict or isinstance(x, dict)):
        return False
    if 'level' not in x:
        return False
    v1 = x['level']
    if not (type(v1) is str or isinstance(v1, str)):
        return False
    return True


VALIDATORS = {
    'sessionStart': (is_valid_sessionStart, first_error_sessionStart),
    'beforeTool': (is_valid_beforeTool, first_error_beforeTool),
    'afterTool': (is_valid_afterTool, first_error_afterTool),
    'stop': (is_valid_stop, first_error_stop),
    'agentStart': (is_valid_agentStart, first_error_agentStart),
    'agentStop': (is_valid_agentStop, first_error_agentStop),
    'decode:json-string': (is_valid_decode_json_string, first_error_decode_json_string),
    'decode:positive-count': (is_valid_decode_positive_count, first_error_decode_positive_count),
    'decode:level': (is_valid_decode_level, first_error_decode_level),
}

PAYLOAD_CHECKS = {name: VALIDATORS[name] for name in ('sessionStart', 'beforeTool', 'afterTool', 'stop', 'agentStart', 'agentStop')}
DECODE_ACCEPTS = {name.partition(':')[2]: VALIDATORS[name][0] for name in ('decode:json-string', 'decode:positive-count', 'decode:level')}
