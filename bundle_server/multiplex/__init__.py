"""Multiplexed streams: a tab's session, trace, log and project streams in one connection.

`service.MultiplexService` keeps the open streams by id; `sources` makes each subscription's
frames from the hub or session its route reads; `handlers` serves the four `multiplex.*`
routes. The stream itself (one greenlet writing every subscription in turn) is
`_streams.multiplexed`. The `multiplex` row of `_services.SERVICES` mounts it.
"""
