"""The random-mutation fuzzer: valid bodies for every route, mutated (see
mutate.py) with a seeded RNG. Any answer may be a success (a mutation can
leave the request valid) or a 4xx; never a 5xx, and every error in the envelope."""

import random

from . import bodies, mutate
from .campaign import Budget


def run(campaign, seed, cases, seconds):
    rng = random.Random(seed)
    budget = Budget(cases, seconds)
    number = 0
    while budget.more():
        number += 1
        base = rng.choice(bodies.seeds(rng))
        request, raw, headers, content_type, description = mutate.mutate(rng, base)
        data = bodies.encode(request, campaign.relay.keys, campaign.relay.port, raw_body=raw, extra_headers=headers,
                             content_type=content_type)
        case = f"seed {seed} case {number}: {request.method} {request.target()[:80]} [{base.name}] {description}"
        campaign.run("mutation", case, data, method=request.method)
    reset_retry_switch(campaign)
    campaign.health("mutation")
    return number


def reset_retry_switch(campaign):
    """A mutated PUT /v1/admin/retry may have turned retries off; turn them back on."""
    seed = bodies.Seed("admin-reset", "PUT", "/v1/admin/retry", body={"disabled": False}, key="admin", sends=False)
    campaign.run("mutation", "reset the retry switch", bodies.encode(seed, campaign.relay.keys, campaign.relay.port),
                 allowed={200})
