"""The audit log: append-only events, hash-chained per organisation."""
