#!/usr/bin/env python3
"""The abandoned-batch campaign against `apns-relay serve`, measured from outside.

A mock APNs answers every request after --delay-ms; --clients clients each post a
batch of --sends sends and hang up --leave-after seconds later. Meanwhile the relay's
RSS is read from /proc/<pid>/status and a fresh single send is timed every second.
Prints the peak RSS, the RSS when the load is over, the fresh-send latencies, and
how many requests reached APNs.

    scripts/lib/overload_bench.py --binary .build/debug/apns-relay
"""
import argparse, http.client, json, os, re, socket, statistics, subprocess, tempfile, threading, time

from bench_relay import write_relay_config
import launcher


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/debug/apns-relay")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--sends", type=int, default=10000)
    parser.add_argument("--delay-ms", type=int, default=2000)
    parser.add_argument("--leave-after", type=float, default=1.0)
    parser.add_argument("--watch", type=float, default=40.0, help="seconds to watch after the clients left")
    parser.add_argument("--extra-yaml", default="", help="lines added under ingress:")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="apns-relay-overload-")
    key = os.path.join(work, "AuthKey_BENCHKEY01.p8")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key], check=True, capture_output=True)
    mock_child = launcher.start_mock(args.binary, ["--key", f"BENCHKEY01:BENCHTEAM1:{key}", "--delay-ms", args.delay_ms,
                                                   "--certificate-directory", work])
    mock, mock_port, cert = mock_child.process, mock_child.port, mock_child.certificate

    api_key = "bench-key-0123456789"
    config = os.path.join(work, "relay.yaml")
    write_relay_config(config, instance="overload-bench", mock_port=mock_port, ca_file=cert, key_path=key, api_key=api_key,
                       spool_directory=f"{work}/spool", ingress_lines=args.extra_yaml)
    relay_child = launcher.start_serve(args.binary, config)
    relay, port = relay_child.process, relay_child.port

    def rss_kib():
        with open(f"/proc/{relay.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    tokens = ",".join('"%064x"' % (i + 1) for i in range(args.sends))
    body = ('{"items":[{"app":"app-a","environment":"development","operation":"background","priority":5,"tokens":[%s]}]}' % tokens).encode()
    request = (f"POST /v1/send/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {api_key}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    answers = {}
    def client(index):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(request)
        s.settimeout(args.leave_after)
        try:
            head = s.recv(64)
            answers[index] = head.split(b"\r\n")[0].decode(errors="replace")
        except socket.timeout:
            answers[index] = "left"
        s.close()

    fresh = []
    stop = threading.Event()
    def fresh_sends():
        n = 0
        while not stop.is_set():
            n += 1
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            payload = json.dumps({"app": "app-a", "environment": "development", "operation": "background", "priority": 5,
                                  "token": "f%063x" % n})
            started = time.monotonic()
            c.request("POST", "/v1/send", payload, {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})
            r = c.getresponse(); r.read()
            fresh.append((time.monotonic() - started, r.status))
            c.close()
            stop.wait(1.0)

    baseline = rss_kib()
    samples = []
    sampler_stop = threading.Event()
    def sampler():
        while not sampler_stop.is_set():
            try: samples.append(rss_kib())
            except Exception: return
            sampler_stop.wait(0.25)
    threading.Thread(target=sampler, daemon=True).start()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads: t.start()
    for t in threads: t.join()
    fresh_thread = threading.Thread(target=fresh_sends); fresh_thread.start()
    time.sleep(args.watch)
    stop.set(); fresh_thread.join()
    end_rss = rss_kib()
    sampler_stop.set()

    with open(f"/proc/{relay.pid}/status") as f:
        hwm = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
    relay_child.stop(timeout=60)
    mock_child.stop(timeout=30)
    statuses = {}
    for a in answers.values(): statuses[a] = statuses.get(a, 0) + 1
    latencies = [l for l, s in fresh if s == 200]
    print(f"clients {args.clients} x {args.sends} sends, APNs delay {args.delay_ms} ms, clients leave after {args.leave_after} s; watched {args.watch} s")
    print(f"client answers before leaving: {statuses}")
    print(f"relay RSS: baseline {baseline/1024:.0f} MiB, peak sampled {max(samples)/1024:.0f} MiB, VmHWM {hwm/1024:.0f} MiB, at end {end_rss/1024:.0f} MiB")
    if latencies:
        print(f"fresh sends: {len(latencies)} ok of {len(fresh)}, latency median {statistics.median(latencies)*1000:.0f} ms, max {max(latencies)*1000:.0f} ms")
    else:
        print(f"fresh sends: none ok ({fresh})")
    print("mock: " + out.strip().splitlines()[-1] if out.strip() else "mock: no summary")

if __name__ == "__main__":
    main()
