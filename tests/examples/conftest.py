"""Single-threaded BLAS for the PPO tests, set before numpy is first imported.

The PPO's matrices are tiny (64 x 64); a multi-threaded BLAS only adds contention, and on the shared
2-core CI machine it made the solve test 10x slower (42 s instead of 4 s). Ray workers get the same
from Ray (OMP_NUM_THREADS=1 for one-CPU actors).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
