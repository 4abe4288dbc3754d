"""The performance model: memory, time, throughput and cost of a workload on hardware. Pure."""
