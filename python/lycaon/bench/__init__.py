"""Benchmarks that run Lycaon and a peer library on the same work in one run: Lycaon's side here,
the peers' adapters in lycaon-benchmarks (``benchmarks/`` of a checkout; see ``peers``)."""
