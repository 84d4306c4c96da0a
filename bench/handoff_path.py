#!/usr/bin/env python3
"""Where a contended handoff's time goes, seen on the wire: any client, no code of its own changed.

Runs COMMAND (a contended workload against the server in ZK_CONNECT, on loopback) while it
captures that server's traffic on `lo` (a raw packet socket: root), then splits each handoff's
critical path in two:

  server: the holder's delete request -> the NodeDeleted event to the next waiter
  client: that event -> the waiter's own delete request, i.e. whatever the waiter sends before
          it holds (its requests' round trips, listed) and the client's own work around them

and prints the server's latency per request type. Both clients of the contended workload send
the same requests, so what differs between them is the client part (and how much CPU it leaves
the server on a small machine).

    scripts/zk run -- python3 bench/handoff_path.py -- env BENCH_WORKLOADS=contended \
        BENCH_SECONDS=4 target/release/zklock-bench

The capture costs CPU, so throughput under it is lower than in `scripts/bench`; the split, not
the rate, is the figure.
"""
import bisect
import collections
import os
import socket
import struct
import subprocess
import sys
import threading
import time

ETH_P_ALL, PACKET_OUTGOING = 3, 4
OPS = {1: "create", 2: "delete", 3: "exists", 4: "getData", 8: "getChildren", 11: "ping",
       12: "getChildren2", 14: "multi", 15: "create2", 19: "createContainer"}
EVENTS = {1: "NodeCreated", 2: "NodeDeleted", 3: "NodeDataChanged", 4: "NodeChildrenChanged"}


def capture(port, stop, packets):
    """(time, direction, client port, TCP payload) of each packet to or from `port` on lo."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            data, address = sock.recvfrom(65535)
        except socket.timeout:
            continue
        # Loopback shows each packet twice, going out and coming in: keep one.
        if address[2] != PACKET_OUTGOING:
            continue
        ip = data[14:]
        if ip[9] != socket.IPPROTO_TCP:
            continue
        tcp = ip[(ip[0] & 15) * 4:]
        source, dest = struct.unpack("!HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload and port in (source, dest):
            packets.append((time.monotonic(), "request" if dest == port else "answer",
                            source if dest == port else dest, payload))


def messages(packets):
    """Each connection's byte stream cut into ZooKeeper's length-prefixed frames, decoded as
    (time, client port, kind, what, xid): a request's type, an answer's error code, an event's
    type."""
    streams, out = collections.defaultdict(bytes), []
    for at, direction, client, payload in packets:
        key = (direction, client)
        stream = streams[key] + payload
        while len(stream) >= 4:
            length = struct.unpack("!i", stream[:4])[0]
            if length < 0 or len(stream) < 4 + length:
                break
            frame, stream = stream[4:4 + length], stream[4 + length:]
            if direction == "request" and len(frame) >= 8:
                xid, op = struct.unpack("!ii", frame[:8])
                out.append((at, client, "request", OPS.get(op, f"op{op}"), xid))
            elif direction == "answer" and len(frame) >= 16:
                xid, _zxid, err = struct.unpack("!iqi", frame[:16])
                if xid == -1 and len(frame) >= 24:
                    out.append((at, client, "event", EVENTS.get(struct.unpack("!i", frame[16:20])[0], "?"), xid))
                else:
                    out.append((at, client, "answer", err, xid))
        streams[key] = stream
    return sorted(out)


def summary(values):
    values = sorted(values)
    if not values:
        return "none"
    n = len(values)
    return (f"n={n} p50 {values[n // 2] * 1e6:.0f} us, p90 {values[int(n * 0.9)] * 1e6:.0f} us, "
            f"mean {sum(values) / n * 1e6:.0f} us")


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    command = sys.argv[sys.argv.index("--") + 1:]
    port = int(os.environ["ZK_CONNECT"].rsplit(":", 1)[1])
    stop, packets = threading.Event(), []
    sniffer = threading.Thread(target=capture, args=(port, stop, packets))
    sniffer.start()
    try:
        status = subprocess.call(command)
    finally:
        stop.set()
        sniffer.join()
    found = messages(packets)
    by_client = collections.defaultdict(list)
    for message in found:
        by_client[message[1]].append(message)
    deletes = [m[0] for m in found if m[2] == "request" and m[3] == "delete"]
    server, client, between = [], [], collections.Counter()
    for flow in by_client.values():
        for i, (at, _, kind, what, _) in enumerate(flow):
            if kind != "event" or what != "NodeDeleted":
                continue
            steps = []
            for later in flow[i + 1:]:
                if later[2] == "request":
                    steps.append(later[3])
                    if later[3] == "delete":
                        client.append(later[0] - at)
                        break
            between[" ".join(steps)] += 1
            previous = bisect.bisect_left(deletes, at) - 1
            if previous >= 0:
                server.append(at - deletes[previous])
    latency = collections.defaultdict(list)
    for flow in by_client.values():
        sent = {}
        for at, _, kind, what, xid in flow:
            if kind == "request":
                sent[xid] = (at, what)
            elif kind == "answer" and xid in sent:
                began, op = sent.pop(xid)
                latency[op].append(at - began)
    span = found[-1][0] - found[0][0] if found else 0
    print(f"captured {len(packets)} packets, {len(found)} messages over {span:.1f} s; "
          f"{len(deletes)} deletes ({len(deletes) / span if span else 0:.0f}/s under the capture)")
    print(f"server: delete request -> NodeDeleted event to the next waiter: {summary(server)}")
    print(f"client: NodeDeleted event -> that waiter's delete request: {summary(client)}")
    for steps, count in between.most_common(3):
        print(f"  requests in between: {steps} ({count})")
    for op, values in sorted(latency.items(), key=lambda item: -len(item[1])):
        if len(values) >= 10:
            print(f"server latency, {op}: {summary(values)}")
    sys.exit(status)


if __name__ == "__main__":
    main()
