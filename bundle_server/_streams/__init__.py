"""The stream machinery: sequenced hubs and their cursors, the NDJSON stream body, wakers."""
