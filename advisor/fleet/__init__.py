"""The fleet side of the core: probe-report verification, utilisation findings, statistics. Pure."""
