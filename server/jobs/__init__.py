"""Background jobs: periodic passes (expiry, settlement checks, ...) that any process may run,
one process at a time per job, coordinated by leases in the database."""
