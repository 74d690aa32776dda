"""Realising a plan on Ray: a job state at the bottom, services that take it, the Job on top.

This package imports Ray; nothing outside it (and `rlplace.connect`, lazily) does, so `import rlplace`
and the offline planner stay fast and Ray-free. The modules and their order (an import-linter contract):
docs/ray.md, section 9 "How the pieces fit". Private Ray API lives in `_compat` only.
"""
