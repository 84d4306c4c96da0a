#!/usr/bin/env python3
"""Where a contended handoff's time goes, seen on the wire: any client, no code of its own changed.

Runs COMMAND (a contended workload against the server in ZK_CONNECT, on loopback) while it
captures that server's traffic on `lo` (a raw packet socket: root), then splits each handoff's
critical path in two:

  server: the holder's delete request -> the NodeDeleted event for that node to the next holder
          (the client of the next delete request)
  client: that event -> the next holder's own delete request, i.e. whatever it sends before it
          holds (its requests' round trips, listed) and the client's own work around them

Handoffs where the next holder got no event for that node (it held on a listing) are counted
apart. (A zklock waiter behind another client's waiter also hears of the node before its
predecessor, and looks again then: those events are not on the handoff's path.)

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
    (time, client port, kind, what, xid, path): a request's type, an answer's error code, an
    event's type; the path of a delete request and of an event (else None)."""
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
                path = jute_string(frame, 8) if op == 2 else None
                out.append((at, client, "request", OPS.get(op, f"op{op}"), xid, path))
            elif direction == "answer" and len(frame) >= 16:
                xid, _zxid, err = struct.unpack("!iqi", frame[:16])
                if xid == -1 and len(frame) >= 28:
                    kind = EVENTS.get(struct.unpack("!i", frame[16:20])[0], "?")
                    out.append((at, client, "event", kind, xid, jute_string(frame, 24)))
                else:
                    out.append((at, client, "answer", err, xid, None))
        streams[key] = stream
    return sorted(out)


def jute_string(frame, at):
    """The length-prefixed string at `at` in `frame`, or None."""
    if len(frame) < at + 4:
        return None
    length = struct.unpack("!i", frame[at:at + 4])[0]
    return frame[at + 4:at + 4 + length].decode("utf-8", "replace") if length >= 0 else None


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
    deletes = [m for m in found if m[2] == "request" and m[3] == "delete"]
    server, client, between, on_listing = [], [], collections.Counter(), 0
    for held, released in zip(deletes, deletes[1:]):
        # The next holder: the client of the next delete. Its event for the released node, if
        # it heard of it before it held.
        flow = by_client[released[1]]
        start = bisect.bisect_left(flow, (held[0],))
        end = bisect.bisect_left(flow, (released[0],))
        event = next((m for m in flow[start:end] if m[2] == "event" and m[3] == "NodeDeleted" and m[5] == held[5]), None)
        if event is None or released[1] == held[1]:
            on_listing += 1
            continue
        server.append(event[0] - held[0])
        client.append(released[0] - event[0])
        steps = [m[3] for m in flow[bisect.bisect_right(flow, (event[0], event[1], event[2], event[3], event[4], event[5])):end]
                 if m[2] == "request"]
        between[" ".join(steps) or "(none)"] += 1
    latency = collections.defaultdict(list)
    for flow in by_client.values():
        sent = {}
        for at, _, kind, what, xid, _ in flow:
            if kind == "request":
                sent[xid] = (at, what)
            elif kind == "answer" and xid in sent:
                began, op = sent.pop(xid)
                latency[op].append(at - began)
    span = found[-1][0] - found[0][0] if found else 0
    print(f"captured {len(packets)} packets, {len(found)} messages over {span:.1f} s; "
          f"{len(deletes)} deletes ({len(deletes) / span if span else 0:.0f}/s under the capture)")
    print(f"server: delete request -> NodeDeleted event for it to the next holder: {summary(server)}")
    print(f"client: that event -> the next holder's delete request: {summary(client)}")
    for steps, count in between.most_common(3):
        print(f"  requests in between: {steps} ({count})")
    print(f"handoffs where the next holder held on a listing, without that event: {on_listing}")
    for op, values in sorted(latency.items(), key=lambda item: -len(item[1])):
        if len(values) >= 10:
            print(f"server latency, {op}: {summary(values)}")
    sys.exit(status)


if __name__ == "__main__":
    main()
