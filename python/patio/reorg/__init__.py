"""Benchmarks of pattern-aware file reorganization (``patio bench reorg``).

The reorganization itself is in Rust (``patio reorg plan|apply``, crate patio-reorg);
this package holds what the benchmark needs in Python: the access patterns of the
IOR-like and mpi-tile-io-like cases (:mod:`patio.reorg.cases`), the MPI program every
rank runs (:mod:`patio.reorg.ranks`) and the driver (:mod:`patio.reorg.bench`).
"""
