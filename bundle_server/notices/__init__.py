"""The notice ledger's route group: `service.NoticeService` (the project's ledger, fed by the
project and trace hubs), `sources` (which published event opens or resolves which notice) and
`handlers` (`notices.list`, `notices.dismiss`); the `notices` row of `_services.SERVICES`
mounts it."""
