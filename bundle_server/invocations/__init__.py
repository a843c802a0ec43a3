"""Route invocations (seed 000): how they run and what they keep, and their routes; the
`invocations` row of `_services.SERVICES` mounts them."""
