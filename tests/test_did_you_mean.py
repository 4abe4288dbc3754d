"""The did-you-mean tiers: a word's own family, the closest whole id, a misspelt start."""

from __future__ import annotations

from advisor.did_you_mean import did_you_mean

FIELDS = ["active_params_b", "params_b", "max_itl_ms", "max_ttft_ms", "instance_type"]


def test_a_word_unlike_every_field_gets_no_suggestion() -> None:
    # 'objective' shares 'ctive' with the start of 'active_params_b' (difflib ratio 0.56 against
    # 'active_pa'), but a misspelt start keeps its first letter
    assert did_you_mean("objective", FIELDS) == ""


def test_a_misspelt_start_names_its_family() -> None:
    assert did_you_mean("h1OO", ["h100-sxm", "h100-pcie", "a100-sxm"]) == (
        " (did you mean one of 'h100-pcie', 'h100-sxm'?)"
    )


def test_a_near_whole_id_is_named() -> None:
    assert did_you_mean("max_itl_sm", FIELDS) == " (did you mean 'max_itl_ms'?)"
