"""The data pipeline: readers, stages, writers and executors."""
