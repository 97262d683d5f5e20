#!/usr/bin/env python3
"""aioapns (PyPI), unmodified, sending through the relay's HTTP/2 APNs ingress.

Only the host changes, as a backend switching to the relay would change it:
aioapns' development protocol class is pointed at the relay (host, port) and
given the relay's certificate as its trusted CA. It signs its own provider
token with --key (the backend's key, not the app's) and sends one alert per
--token. Prints one JSON line per send: what aioapns sent (apns-id, topic,
the payload bytes it encoded, as aioapns encodes them) and what it made of
the answer (status, reason, timestamp).

    python3 aioapns_client.py --port 8443 --ca-file cert.pem --key backend.p8 \
        --key-id BKEND12345 --team-id BTEAM12345 --topic com.example.a --token <hex>...
"""
import argparse, asyncio, json, uuid

from aioapns import NotificationRequest, PushType

from aioapns_local import local_client


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca-file", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--token", action="append", required=True)
    args = parser.parse_args()

    client = local_client(args.port, args.ca_file, args.key, args.key_id, args.team_id, args.topic, max_connections=1)
    for index, token in enumerate(args.token):
        message = {"aps": {"alert": {"title": "through the relay", "body": f"push {index} — ünïcode"}}, "n": index}
        request = NotificationRequest(device_token=token, message=message, notification_id=str(uuid.uuid4()),
                                      push_type=PushType.ALERT)
        result = await asyncio.wait_for(client.send_notification(request), 60)
        print(json.dumps({
            "token": token,
            "apns_id": request.notification_id,
            "topic": args.topic,
            # The bytes aioapns put on the wire (connection.py: json.dumps(message, ensure_ascii=False)).
            "payload": json.dumps(message, ensure_ascii=False),
            "status": result.status,
            "successful": result.is_successful,
            "reason": result.description,
            "timestamp": result.timestamp,
        }), flush=True)


asyncio.run(main())
