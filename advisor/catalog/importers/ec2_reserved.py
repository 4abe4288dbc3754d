"""AWS reserved prices from ec2instances.info's dataset (instances.vantage.sh): the hourly rate of
a 1- or 3-year Standard Reserved Instance, Linux, shared tenancy, no upfront payment, per region.

No upfront: the rate owed for every hour of the term with nothing paid ahead, which is how the
catalog prices a term (advisor/catalog/purchase.py). A partial- or all-upfront rate spreads a
payment made at purchase over the term; it is a financing choice, not a different price here.

Two shapes of the same data are read, told apart by their records' keys:
- `instances.json` as instances.vantage.sh serves it (records keyed `instance_type`; per region
  and operating system `reserved` maps AWS's term names such as `yrTerm1Standard.noUpfront` to an
  hourly rate): both terms;
- a capture that keeps one rate per region as `reserved` (records keyed `name`: the tsaol/aws-gpu
  repository's data/all_gpu_instances.js, whose scripts/utils.py takes the Linux
  `yrTerm1Standard.noUpfront`): the 1-year term only.

Pure: text in, prices out; advisor/cli/catalog_import.py does the files.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.catalog.models import Price, Purchase
from advisor.errors import InputError

AWS_TERMS = {
    "yrTerm1Standard.noUpfront": Purchase.reserved_1y,
    "yrTerm3Standard.noUpfront": Purchase.reserved_3y,
}
BY_THE_HOUR = frozenset({Purchase.on_demand.value, Purchase.spot.value})  # what makes an offering
BASIS = {
    Purchase.reserved_1y: "Linux 1-year Standard Reserved Instance, no upfront",
    Purchase.reserved_3y: "Linux 3-year Standard Reserved Instance, no upfront",
}

# {instance type: {region: {term: hourly USD}}}
Rates = dict[str, dict[str, dict[Purchase, float]]]


def parse(text: str, file: str) -> Rates:
    """Every reserved rate of the dataset in `text` (a JSON array, or a JavaScript file assigning
    one); InputError naming the file and the record that is wrong."""
    records = _array(text, file)
    rates: Rates = {}
    for index, record in enumerate(records):
        where = f"{file}: record {index}"
        if not isinstance(record, dict):
            raise InputError(f"{where}: not an object")
        if "instance_type" in record:
            type_id, by_region = record["instance_type"], _full_record(record, where)
        elif "name" in record:
            type_id, by_region = record["name"], _capture_record(record, where)
        else:
            raise InputError(f"{where}: neither `instance_type` nor `name`")
        if by_region:
            rates[str(type_id)] = by_region
    return rates


def _array(text: str, file: str) -> list[Any]:
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        raise InputError(f"{file}: no JSON array of instance types")
    prefix = text[:start].strip()
    # instances.json is the array itself; the capture is `const name = [...];` after comments
    if prefix and not prefix.rstrip().endswith("="):
        raise InputError(f"{file}: expected a JSON array or `const NAME = [...]`")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise InputError(f"{file}: not JSON at line {exc.lineno}: {exc.msg}") from None
    return list(data)


def _full_record(record: Mapping[str, Any], where: str) -> dict[str, dict[Purchase, float]]:
    out: dict[str, dict[Purchase, float]] = {}
    for region, by_os in _pricing(record, where).items():
        linux = by_os.get("linux") if isinstance(by_os, dict) else None
        reserved = linux.get("reserved") if isinstance(linux, dict) else None
        if not isinstance(reserved, dict):
            continue
        terms = {
            purchase: _rate(reserved[term], f"{where} {region} {term}")
            for term, purchase in AWS_TERMS.items()
            if term in reserved
        }
        if terms:
            out[region] = terms
    return out


def _capture_record(record: Mapping[str, Any], where: str) -> dict[str, dict[Purchase, float]]:
    return {
        region: {Purchase.reserved_1y: _rate(prices["reserved"], f"{where} {region} reserved")}
        for region, prices in _pricing(record, where).items()
        if isinstance(prices, dict) and "reserved" in prices
    }


def _pricing(record: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    pricing = record.get("pricing", {})
    if not isinstance(pricing, dict):
        raise InputError(f"{where}: `pricing` is not an object")
    return pricing


def _rate(value: object, where: str) -> float:
    try:
        rate = float(value)  # type: ignore[arg-type]  # instances.json writes numbers as strings
    except (TypeError, ValueError):
        raise InputError(f"{where}: {value!r} is not a number") from None
    if not rate > 0:
        raise InputError(f"{where}: {rate} is not a positive hourly rate")
    return rate


@dataclass
class Summary:
    source: str
    updated: dict[str, int] = field(default_factory=dict)  # type: reserved prices written
    removed: dict[str, list[str]] = field(default_factory=dict)  # type: "region term" no longer listed
    regions_unpriced: dict[str, list[str]] = field(default_factory=dict)  # type: regions skipped
    without: list[str] = field(default_factory=list)  # catalog types it has no rate for
    not_in_catalog: list[str] = field(default_factory=list)  # source types the catalog lacks

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "updated": self.updated,
            "prices": sum(self.updated.values()),
            "removed": self.removed,
            "regions_without_other_prices": self.regions_unpriced,
            "without_reserved_prices": self.without,
            "not_in_catalog": self.not_in_catalog,
        }


def merge(
    existing: list[dict[str, Any]], rates: Rates, *, as_of: dt.date, source: str
) -> tuple[list[dict[str, Any]], Summary]:
    """The AWS entries with their reserved prices of the terms the source gives replaced by the
    source's (every other field and price kept as written: capacity blocks, and a term the source
    does not give, such as a 3-year rate written by hand beside a capture of 1-year ones); types
    the source does not list keep theirs.
    Only where the catalog already prices the type (on demand or spot) is a reserved price added:
    a region the catalog's snapshot does not price (an AWS Local Zone, say) is listed, not added."""
    summary = Summary(source)
    entries = []
    seen = set()
    for entry in existing:
        type_id = str(entry.get("id"))
        if entry.get("provider") != "aws":
            entries.append(entry)
            continue
        seen.add(type_id)
        by_region = rates.get(type_id)
        if not by_region:
            summary.without.append(type_id)
            entries.append(entry)
            continue
        prices = entry.get("prices") or []
        terms = {term.value for by_term in by_region.values() for term in by_term}
        kept = [p for p in prices if p.get("purchase") not in terms]
        priced = {p.get("region") for p in prices if p.get("purchase") in BY_THE_HOUR}
        new = _prices({r: t for r, t in by_region.items() if r in priced}, as_of, source)
        if skipped := sorted(set(by_region) - priced):
            summary.regions_unpriced[type_id] = skipped
        written = {(p["region"], p["purchase"]) for p in new}
        if gone := [
            f"{p.get('region')} {p.get('purchase')}"
            for p in prices
            if p.get("purchase") in terms and (p.get("region"), p.get("purchase")) not in written
        ]:
            summary.removed[type_id] = gone
        summary.updated[type_id] = len(new)
        entries.append({**entry, "prices": kept + new})
    summary.not_in_catalog = sorted(set(rates) - seen)
    return entries, summary


def _prices(
    by_region: Mapping[str, Mapping[Purchase, float]], as_of: dt.date, source: str
) -> list[dict[str, Any]]:
    return [
        Price(
            region=region,
            purchase=purchase,
            hourly_usd=rate,
            as_of=as_of,
            source=f"{source}: {BASIS[purchase]}",
        ).model_dump(mode="json")
        for region, terms in sorted(by_region.items())
        for purchase, rate in sorted(terms.items(), key=lambda kv: kv[0].value)
    ]
