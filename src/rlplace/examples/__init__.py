"""Reference pipelines shipped with rlplace (importable by Ray workers, used by `rlplace demo`)."""
