"""Flower settings for colabq: show the fleet, never the job specs' contents."""

# Arguments hold the job spec (no secrets by contract), but keep the task list readable.
max_tasks = 10000
natural_time = False
purge_offline_workers = 3600
