"""Whether a plan needs capacity reserved: many whole GPU nodes at once are not there on demand
(nor on spot) without a reservation, whatever the price list says."""

from __future__ import annotations

# GPUs, over several nodes, at which a plan is flagged. ESTIMATED: providers cap GPU quota per
# region well below this by default and sell larger blocks as reservations (AWS On-Demand
# Capacity Reservations and EC2 Capacity Blocks for ML, GCP future reservations, Azure capacity
# reservations); 8 nodes of 8 GPUs.
RESERVATION_GPUS = 64


def capacity_note(nodes: int, instance_id: str, gpus_per_node: int) -> str | None:
    """The sentence for a plan of `nodes` GPU nodes, or None when it is small enough to rent."""
    if nodes < 2 or nodes * gpus_per_node < RESERVATION_GPUS:
        return None
    return (
        f"{nodes} x {instance_id} ({nodes * gpus_per_node} GPUs) at once: reserve the capacity "
        "(AWS Capacity Blocks or On-Demand Capacity Reservations, GCP reservations, Azure "
        "capacity reservations); on demand or spot, that many nodes are rarely free"
    )
