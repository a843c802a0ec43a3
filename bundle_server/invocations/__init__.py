"""Route invocations (seed 000): how they run and what they keep."""
