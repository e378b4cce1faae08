"""What the measurements say, pure: how a trial ended (its Result read, its Pods' merged), the
points of a summary and their statistics, the knees and the recommendations, the objectives'
verdicts, the capacity plan and the queueing under it. Typed models from the Result on; JSON
only where a Result is read and where a document is written (cxlab.shape)."""
