"""Whether a plan needs capacity reserved: many whole GPU nodes at once are not there on demand
(nor on spot) without a reservation, whatever the price list says."""

from __future__ import annotations

from advisor.catalog.models import Purchase

# GPUs, over several nodes, at which a plan is flagged. ESTIMATED: providers cap GPU quota per
# region well below this by default and sell larger blocks as reservations (AWS On-Demand
# Capacity Reservations and EC2 Capacity Blocks for ML, GCP future reservations, Azure capacity
# reservations); 8 nodes of 8 GPUs.
RESERVATION_GPUS = 64


# Bought these ways, a plan is told nothing: spot cannot be reserved, and a Capacity Block is the
# reservation.
NOT_RESERVED = frozenset({Purchase.spot, Purchase.capacity_block})


def capacity_note(
    nodes: int, instance_id: str, gpus_per_node: int, purchase: Purchase | None
) -> str | None:
    """The sentence for a plan of `nodes` GPU nodes bought as `purchase` (None: no price), or
    None when it is small enough to rent or bought a way that needs no reservation."""
    if nodes < 2 or nodes * gpus_per_node < RESERVATION_GPUS or purchase in NOT_RESERVED:
        return None
    return (
        f"{nodes} x {instance_id} ({nodes * gpus_per_node} GPUs) at once: reserve the capacity "
        "(AWS Capacity Blocks or On-Demand Capacity Reservations, GCP reservations, Azure "
        "capacity reservations); on demand or spot, that many nodes are rarely free"
    )
