"""The hook-receipt route group: its handler, receipts as trace entries, the endpoint file."""
