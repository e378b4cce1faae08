"""cxlab: concurrency experiments as measurements — spec, planner, local backend, summary."""
