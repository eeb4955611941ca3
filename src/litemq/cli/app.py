"""Entry point of the ``litemq`` console script: the click group with every command registered."""

from litemq.cli import client_commands
from litemq.cli import pipeline_commands
from litemq.cli.main import main

client_commands.register(main)
pipeline_commands.register(main)
from litemq.cli import group_commands; group_commands.register(main)  # noqa: E702

__all__ = ["main"]
