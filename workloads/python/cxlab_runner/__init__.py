"""The Python runner of cxlab: one trial of one concurrency model in one process."""
