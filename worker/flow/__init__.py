"""Jobs that belong together: sweeps as one unit (an id, an index of their points, a cap on how
many of them run at once) and jobs that wait for others (dependencies)."""
