#!/usr/bin/env bash
# Kafka's kafka-acls.sh over LiteMQ's CLI (see ../kafka_tools.py).
exec python "$(dirname "$0")/../kafka_tools.py" acls "$@"
