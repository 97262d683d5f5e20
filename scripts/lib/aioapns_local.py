"""An aioapns client pointed at an APNs on loopback (the relay's HTTP/2 APNs
ingress or the mock APNs): aioapns' development host and port replaced, TLS
trusting `ca_file` and offering ALPN h2 (aioapns offers none on a context it
is given; APNs, the relay and the mock speak h2 only when asked). Shared by
aioapns_client.py (the tests) and aioapns_bench.py (scripts/bench)."""

import ssl

import aioapns.connection
from aioapns import APNs


def local_client(port, ca_file, key_path, key_id, team_id, topic, max_connections):
    aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = "127.0.0.1"
    aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = port
    context = ssl.create_default_context(cafile=ca_file)
    context.set_alpn_protocols(["h2"])
    with open(key_path) as f:
        key = f.read()
    return APNs(key=key, key_id=key_id, team_id=team_id, topic=topic, use_sandbox=True,
                max_connections=max_connections, ssl_context=context)
