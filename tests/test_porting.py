"""A cheaper option off the job's software stack carries the port it needs
(advisor.fleet.porting): the shipped catalog's vendors, by hand."""

from __future__ import annotations

from advisor.cli.common import get_catalog
from advisor.fleet.porting import porting_note


def test_an_option_on_another_vendors_accelerator_names_the_port() -> None:
    catalog = get_catalog()
    # H200 SXM (nvidia) to Inferentia2 (aws): a CUDA job moved to Neuron
    note = porting_note(catalog, "h200-sxm", "inferentia2")
    assert (
        note
        == "not CUDA: the job must be ported to the AWS Neuron SDK (torch-neuronx; models compiled for Neuron)"
    )
    assert porting_note(catalog, "h200-sxm", "mi300x") is not None and "ROCm" in str(
        porting_note(catalog, "h200-sxm", "mi300x")
    )


def test_the_same_vendor_or_an_unknown_accelerator_needs_no_note() -> None:
    catalog = get_catalog()
    assert porting_note(catalog, "h200-sxm", "l4") is None  # both NVIDIA: CUDA either way
    assert porting_note(catalog, None, "inferentia2") is None
    assert porting_note(catalog, "h200-sxm", "no-such-chip") is None
