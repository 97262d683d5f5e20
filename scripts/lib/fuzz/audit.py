"""After the campaign (the relay drained, so its audit is flushed): every
apns-id the relay answered with has exactly as many rows in apns_audit as
answers named it (one, unless a caller reused its own apnsId), read from
the real Postgres with psql."""

from dataclasses import dataclass

from .relay import psql


@dataclass
class AuditFigures:
    answered: int  # distinct apns-ids answered
    rows: int  # their rows in apns_audit
    missing: list  # (apns-id, answers, rows) with fewer rows than answers
    duplicates: list  # with more rows than answers


def check(database_url, instance, answered):
    counts = {}
    output = psql(database_url, f"SELECT lower(apns_id), count(*) FROM apns_audit WHERE relay_instance = '{instance}' GROUP BY 1")
    for line in output.splitlines():
        if "\t" in line:
            apns_id, count = line.split("\t")
            counts[apns_id] = int(count)
    missing, duplicates, rows = [], [], 0
    for apns_id, answers in sorted(answered.items()):
        found = counts.get(apns_id, 0)
        rows += found
        if found < answers:
            missing.append((apns_id, answers, found))
        elif found > answers:
            duplicates.append((apns_id, answers, found))
    return AuditFigures(len(answered), rows, missing, duplicates)
