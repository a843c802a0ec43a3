"""The stream machinery: sequenced hubs and their cursors, the NDJSON stream body, wakers, and
the multiplexed stream that carries several subscriptions in one response."""
