"""The records in Redis: key names, the job ledger, leases and heartbeats, and the Redis client
that survives short outages."""
