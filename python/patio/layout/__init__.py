"""patio.layout: layout optimization for HDF5 arrays (the *reorganize* use of patterns).

Reads made through :mod:`patio.h5` are recorded per dataset in a knowledge base; the
``patio layout`` commands analyse them, build replicas of the hot data in better
layouts within a storage budget, and later reads are served from the copy the
page-level cost model says is cheapest.

| module | role |
|---|---|
| :mod:`~patio.layout.selection` | selections (hyperslab unions, points): the shared vocabulary |
| :mod:`~patio.layout.curves` | Morton and Hilbert orders of chunk grids |
| :mod:`~patio.layout.flatten` | a selection under a layout -> byte extents (run-level, never per element for structured selections) |
"""
