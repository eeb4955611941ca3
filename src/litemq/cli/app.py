"""Entry point of the ``litemq`` console script: the click group with every command registered."""

from litemq.cli import (client_commands, client_metrics_commands, cluster_commands, config_commands, group_commands,
                        partition_commands, pipeline_commands, quota_commands, rebalance_commands, schema_commands,
                        security_commands, share_group_commands)
from litemq.cli.main import main

client_commands.register(main)
group_commands.register(main)
share_group_commands.register(main)
pipeline_commands.register(main)
cluster_commands.register(main)
security_commands.register(main)
config_commands.register(main)
quota_commands.register(main)
client_metrics_commands.register(main)
schema_commands.register(main)
partition_commands.register(main)
rebalance_commands.register(main)

__all__ = ["main"]
