"""AMR box layouts: Chombo files, box orderings, the eq 4.1 model and region reads."""

from __future__ import annotations
