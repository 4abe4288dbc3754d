"""Units every figure of advisor is stated in: decimal gigabytes (datasheets and bandwidths),
mebibytes (what NVML reports), and the hours that prices run by."""

from __future__ import annotations

GB = 1e9
MIB = 1 << 20
SECONDS_PER_HOUR = 3600.0
# 365 days x 24 h / 12: the month cloud providers price by (AWS, GCP and Azure calculators).
HOURS_PER_MONTH = 730.0
HOURS_PER_YEAR = 8760.0  # 365 days x 24 h
