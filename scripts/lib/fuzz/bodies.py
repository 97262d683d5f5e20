"""One valid request per route, the seeds the mutation fuzzer and the
Authorization variants start from. Every request that sends uses a fresh
token, so each answered apns-id belongs to one send."""

import copy
import json
import pathlib
import time
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

from . import wire
from .relay import APP

REPO = pathlib.Path(__file__).resolve().parents[3]


@dataclass
class Seed:
    """A request before encoding: the key is a name in Relay.keys."""

    name: str
    method: str
    path: str
    query: dict = field(default_factory=dict)
    headers: list = field(default_factory=list)
    body: object = None  # a JSON value, or None for no body
    key: str = "backend"
    sends: bool = True  # a success sends to APNs (and is audited)

    def target(self):
        return self.path + ("?" + urlencode(self.query) if self.query else "")


def snapshot(kind="liveActivity"):
    if kind == "notification":
        return {"schemaVersion": "5", "kind": "notification", "id": "fuzz-note-1", "surfaceId": "order-1",
                "updatedAt": "2026-11-22T10:00:00Z", "state": "attention",
                "notification": {"title": "Your order has shipped", "body": "Track it in the app",
                                 "deepLink": "demo://orders/1", "category": "surface-update", "threadId": "order-1"}}
    if kind == "standby":
        return {"schemaVersion": "5", "kind": "standby", "id": "fuzz-standby-1", "surfaceId": "order-1",
                "updatedAt": "2026-11-22T10:00:00Z", "state": "active",
                "standby": {"title": "Order on its way", "body": "4 stops away", "progress": 0.4,
                            "deepLink": "demo://orders/1", "presentation": "card"}}
    document = json.loads((REPO / "docs/examples/active-progress.json").read_text())
    document.pop("$schema", None)
    return document


def token(rng, prefix=""):
    return (prefix + "".join(rng.choice("0123456789abcdef") for _ in range(64)))[:64]


def send_fields(rng, operation="alert", **extra):
    body = {"app": APP, "environment": "development", "operation": operation, "token": token(rng)}
    body.update(extra)
    return body


def seeds(rng):
    """A fresh list of valid requests (new tokens every call)."""
    live = snapshot()
    now = int(time.time())
    return [
        Seed("send-alert", "POST", "/v1/send", body=send_fields(rng, snapshot=live)),
        Seed("send-notification", "POST", "/v1/send", body=send_fields(rng, "notification", snapshot=snapshot("notification"))),
        Seed("send-background", "POST", "/v1/send", body=send_fields(rng, "background", payload={"orderId": "A-1042"})),
        Seed("send-update", "POST", "/v1/send",
             body=send_fields(rng, "update", snapshot=live, timestamp=now, priority=5, staleDate=now + 3600)),
        Seed("send-widget", "POST", "/v1/send", body=send_fields(rng, "widget", snapshot=snapshot("standby"))),
        Seed("send-raw", "POST", "/v1/send",
             body=send_fields(rng, "raw", headers={"apns-push-type": "alert", "apns-collapse-id": "order-1042"},
                              payload={"aps": {"alert": {"title": "Order shipped", "body": "Arrives Thursday"}, "sound": "default"}})),
        Seed("send-dead", "POST", "/v1/send", body=dict(send_fields(rng, snapshot=live), token=token(rng, "dead"))),
        Seed("describe", "POST", "/v1/describe", body=send_fields(rng, snapshot=live), sends=False),
        Seed("batch", "POST", "/v1/send/batch", body={"items": [
            {"app": APP, "environment": "development", "operation": "background", "tokens": [token(rng), token(rng)]},
            dict(send_fields(rng, snapshot=live), collapseId="c-1"),
        ]}),
        Seed("device", "POST", f"/3/device/{token(rng)}",
             headers=[("apns-push-type", "alert"), ("apns-priority", "10"), ("apns-relay-environment", "development")],
             body={"aps": {"alert": {"title": "Hello", "body": "World"}, "sound": "default"}}),
        Seed("channel-create", "POST", "/v1/channels", body={"app": APP, "environment": "development", "storagePolicy": "no-storage"}),
        Seed("channel-list", "GET", "/v1/channels", query={"app": APP, "environment": "development"}),
        Seed("channel-delete", "DELETE", "/v1/channels/" + quote("dHN0LXNyY2gtY2hubA==", safe=""),
             query={"app": APP, "environment": "development"}),
        Seed("broadcast", "POST", "/v1/send", body={"app": APP, "environment": "development", "operation": "broadcast",
                                                     "channelId": "dHN0LXNyY2gtY2hubA==", "expiration": 0,
                                                     "storagePolicy": "no-storage", "snapshot": live}),
        Seed("dead-tokens", "GET", "/v1/dead-tokens", query={"app": APP, "since": "1h", "limit": "10"}, sends=False),
        Seed("admin-get", "GET", "/v1/admin/retry", key="admin", sends=False),
        Seed("admin-put", "PUT", "/v1/admin/retry", body={"disabled": False}, key="admin", sends=False),
    ]


def encode(seed, keys, port, *, raw_body=None, extra_headers=(), authorization=True, content_type="application/json"):
    """The request bytes for `seed` (raw_body replaces the JSON encoding)."""
    body = raw_body if raw_body is not None else (None if seed.body is None else json.dumps(seed.body).encode())
    headers = list(seed.headers) + list(extra_headers)
    if authorization:
        headers.insert(0, ("Authorization", "Bearer " + keys[seed.key]))
    return wire.request_bytes(seed.method, seed.target(),
                              wire.standard_headers(f"127.0.0.1:{port}", body, headers, content_type), body or b"")


def clone(seed):
    return copy.deepcopy(seed)
