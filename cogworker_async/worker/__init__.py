"""The worker: processors, the coalescing fetcher, and the background duties."""
