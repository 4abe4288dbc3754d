"""Measurement library for advisor's probe (NVML inventory, matmul, transfers, overlap).

Never imports advisor. torch and pynvml are imported lazily inside functions.
"""
