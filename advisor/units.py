"""Units every figure of advisor is stated in: decimal gigabytes (datasheets and bandwidths),
mebibytes (what NVML reports), and the hours that prices run by."""

from __future__ import annotations

GB = 1e9
BILLION = 1e9  # model sizes (params_b) and token counts are stated in billions
MILLION = 1e6  # money per million tokens
TERA = 1e12  # peaks are stated in TFLOP/s
MIB = 1 << 20
GIB = 1 << 30  # instance RAM is stated in GiB
SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0
# 365 days x 24 h / 12: the month cloud providers price by (AWS, GCP and Azure calculators).
HOURS_PER_MONTH = 730.0
HOURS_PER_YEAR = 8760.0  # 365 days x 24 h
