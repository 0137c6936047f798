"""rsk mcp: the MCP server on stdio, for agents that call tools instead of a shell."""

from typing import Annotated

import typer

from rsk.cli.common import ProjectOpt, TargetOpt, resolve_target
from rsk.commands import help_for


def register(app: typer.Typer) -> None:
    app.command(
        "mcp",
        help=help_for(
            "mcp",
            "Speaks MCP on stdin and stdout; register it with your agent (install.sh --mcp does): an MCP host's "
            'entry is {"mcpServers": {"rsk": {"command": "/path/to/rsk", "args": ["mcp"]}}} (`command -v rsk` '
            "gives the path). Every tool works on the project and target fixed here (flags, then $RSK_PROJECT / "
            "$RSK_TARGET, then the project file found from the working directory the host starts it in; pin them "
            'with "args": ["mcp", "--project", "P", "--target", "T"]). No tool approves, grants or denies. '
            "Each tool's schema says its "
            "arguments and each answers what the command's --json prints; errors are the CLI's JSON error, flagged "
            'is_error. The rsk skill, section "Tools instead of a shell", lists the tools.',
        ),
    )(mcp)


def mcp(
    target: TargetOpt = None,
    project: ProjectOpt = None,
    max_wait: Annotated[
        float,
        typer.Option(
            min=1, max=3600,
            help="Longest a wait or events call blocks, in seconds; keep it below your client's tool timeout.",
        ),
    ] = 50,
) -> None:  # fmt: skip
    from rsk.cluster.targets import find_target
    from rsk.errors import ConfigError
    from rsk.local.project import resolve_project

    try:
        from rsk.mcp.server import Pin, serve
    except ImportError as exc:
        raise ConfigError(
            f"rsk mcp needs the MCP SDK ({exc.name} is missing)",
            "reinstall rsk (pip install -e . or ./install.sh): the mcp package is one of its dependencies",
        ) from exc
    from rsk.local import caller
    from rsk.local.project import NO_PROJECT, env_or_file

    chosen = bool(project or env_or_file("RSK_PROJECT", "project"))
    pin = Pin(project=resolve_project(project), target=find_target(resolve_target(target)).name, max_wait=max_wait,
              chosen=chosen)  # fmt: skip
    if not chosen:  # stderr: stdout is the protocol's; the tools that plan or launch say it again, and refuse
        caller.stderr().write(f"rsk mcp: warning: {NO_PROJECT.replace('; nothing was done', '')}: plan and launch "
                              "tools refuse until one is\n")  # fmt: skip
    c = caller.current()
    serve(pin, c.stdio if c is not None else None)  # in the broker: the client's stdin and stdout
