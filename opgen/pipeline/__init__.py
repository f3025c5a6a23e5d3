"""The staged build: run folder with shards and markers, executors (local pool, Ray), the round loop."""
