"""A confluent-kafka ShareConsumer in its own process (KIP-932 tests): polls in explicit
acknowledgement mode and prints one JSON line per record it gets (``{"p", "o", "d"}``:
partition, offset, delivery count), flushed at once. With ``--hold`` it never acknowledges
(its records stay locked until it dies or their lock expires; with ``--close-on-stdin`` it
closes the consumer cleanly, records still unacknowledged, when a line arrives on stdin);
otherwise it ACCEPTs each poll.

usage: share_worker.py BOOTSTRAP GROUP TOPIC [--hold [--close-on-stdin]]
"""

import json
import sys

from confluent_kafka import ShareConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    hold = "--hold" in sys.argv[4:]
    close_on_stdin = "--close-on-stdin" in sys.argv[4:]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "log_level": 3})
    c.subscribe([topic])
    while True:
        msgs = c.poll(0.5)
        for m in msgs:
            if m.error():
                continue
            print(json.dumps({"p": m.partition(), "o": m.offset(), "d": m.delivery_count()}), flush=True)
            if not hold:
                c.acknowledge(m)
        if msgs and not hold:
            c.commit_sync()
        if hold and msgs:
            # keep the session alive without polling again (explicit mode would need acks first)
            if close_on_stdin:
                sys.stdin.readline()
                c.close()
                print(json.dumps({"closed": True}), flush=True)
                return
            import time
            while True:
                time.sleep(1)


if __name__ == "__main__":
    main()
