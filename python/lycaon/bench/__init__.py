"""Benchmarks that run Lycaon and a peer library on the same work in one run."""
