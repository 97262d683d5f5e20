#!/usr/bin/env python3
"""A small OTLP/HTTP trace receiver for the tests: an independent peer.

Decodes ExportTraceServiceRequest bodies (http/protobuf, optionally gzip) with
OpenTelemetry's own protobuf classes (PyPI opentelemetry-proto; nothing the
relay's authors wrote) and appends one JSON line per span to OUTPUT:

  {"trace_id", "span_id", "parent_span_id", "name", "kind", "status",
   "start_ns", "end_ns", "attributes": {...}, "attribute_keys": [...],
   "resource": {...}, "scope"}

("attribute_keys" lists the span's keys as they came, repeats included:
OTLP requires them unique, which "attributes", a dict, would hide.)

Usage: otlp_receiver.py OUTPUT [--status CODE] [--tls CERT KEY] [--port PORT] [--keep-alive]
Listens on 127.0.0.1, port 0 (or PORT: a collector started again where it
was), and prints "otlp-receiver on PORT" once ready.
OUTPUT /dev/null (the bench's collector) parses every request the same
way but builds no JSON: the receiver's own CPU stays off the two cores the
relay is measured on, as a collector on another host would.
--status answers every request with CODE (an erroring collector) after
reading it, writing nothing. --tls serves HTTPS with that PEM certificate
and key (an https:// collector).
--keep-alive answers in HTTP/1.1 and keeps each connection for the
client's next request, as OpenTelemetry's Collector does (Go's net/http);
without it every answer closes its connection (HTTP/1.0), so a test's
SIGTERM never waits on an idle client. The bench's collector keeps them:
a new TCP connection for every batch cost the relay 1 to 1.7 us of CPU a
send (a batch of 512 spans is about 170 sends), which no production
collector charges.

SIGTERM stops it cleanly: the listening socket closes (later exports are
refused), a request being handled is finished (its spans written AND
answered) first. With --keep-alive, a connection kept open is still served
until its client closes it, and the receiver ends only then: the bench
stops the relay first. A span is therefore either written and acknowledged, or
never written: the relay's drop counter can be held to the exact count.
"""
import gzip
import json
import os
import signal
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    if kind == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, kind) if kind else None


def attributes(key_values):
    return {kv.key: value(kv.value) for kv in key_values}


def main():
    output = sys.argv[1]
    status = 200
    if "--status" in sys.argv:
        status = int(sys.argv[sys.argv.index("--status") + 1])
    discard = output == os.devnull
    lock = threading.Lock()
    sink = open(output, "a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, nothing lingers at shutdown;
        # --keep-alive: the connection stays for the next request.
        protocol_version = "HTTP/1.1" if "--keep-alive" in sys.argv else "HTTP/1.0"

        def log_message(self, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            if self.headers.get("content-encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            if status != 200:
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            lines = []
            for resource_spans in ([] if discard else request.resource_spans):
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        lines.append(json.dumps({
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "status": span.status.code,
                            "start_ns": span.start_time_unix_nano,
                            "end_ns": span.end_time_unix_nano,
                            "attributes": attributes(span.attributes),
                            "attribute_keys": [kv.key for kv in span.attributes],
                            "resource": resource,
                            "scope": scope_spans.scope.name,
                        }, sort_keys=True))
            with lock:
                for line in lines:
                    sink.write(line + "\n")
                sink.flush()
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    if "--tls" in sys.argv:
        index = sys.argv.index("--tls")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[index + 1], sys.argv[index + 2])
        context.set_alpn_protocols(["http/1.1"])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = False
    server.block_on_close = True  # server_close() waits for requests being handled

    def stop(*_):
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    print(f"otlp-receiver on {server.server_address[1]}", flush=True)
    server.serve_forever()
    server.server_close()
    sink.close()


if __name__ == "__main__":
    main()
