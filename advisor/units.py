"""Units every figure of advisor is stated in: decimal gigabytes (datasheets and bandwidths),
binary gibibytes (instance memory, as the providers list it), and the hours that prices run by."""

from __future__ import annotations

GB = 1e9
GIB = 1 << 30
MIB = 1 << 20
SECONDS_PER_HOUR = 3600.0
# 365 days x 24 h / 12: the month cloud providers price by (AWS, GCP and Azure calculators).
HOURS_PER_MONTH = 730.0
HOURS_PER_YEAR = 8760.0  # 365 days x 24 h
