"""The notice ledger (seed 001 Limits; spec/states.toml `notice`; Notice.json).

A persistent, per-project record of the notices a user must not miss, in three modules with
one job each:

- `_retention`: the three retention settings (DevConfig `notices`), their seed defaults
  (limits.toml `notice-terminal-age`, `notice-terminal-kept`, `notice-journal-bytes`) and
  `terminalTtl`'s two forms;
- `_state`: the ledger as pure data (sans-IO, the clock passed in): which notices are kept, in
  what order, what reporting, resolving and dismissing change, and retention;
- `_ledger`: the state over its journal (`bundle_contract._journal`) under the state root:
  load and replay, durable appends, compaction within `maxJournalBytes`; thread-safe.
"""
