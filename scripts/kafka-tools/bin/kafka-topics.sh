#!/usr/bin/env bash
# Kafka's kafka-topics.sh over LiteMQ's CLI (see ../kafka_tools.py).
exec python "$(dirname "$0")/../kafka_tools.py" topics "$@"
