"""Prometheus metrics of the queue (`colabq metrics`): what ended jobs add up to, kept in their
terminal transition (`ended`); the live jobs, kept from the event log (`live`); one scrape's
reads (`scrape`); the metric families (`families`); the janitor's and the notifier's counters
(`counts`); the process that serves them (`service`). Labels are bounded (`labels`)."""
