"""The log pipeline commands: ``litemq ingest``, ``litemq pipeline run|report``, ``litemq demo``."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import click
from rich.console import Console

from litemq.cli.client_commands import _admin
from litemq.cli.common import CliError, bootstrap_server_option

console = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True)


def _progress_ui(enabled: bool):
    """A rich progress display (lines, lines/s, bytes) when stderr is a terminal, else None."""
    if not enabled:
        return None, None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                    TextColumn("{task.fields[lines]:>10,} lines"), TextColumn("{task.fields[rate]:>9,.0f} lines/s"),
                    TextColumn("{task.fields[mb]:>8.1f} MB"), TimeElapsedColumn(), console=err, transient=False)
    tasks: dict[str, tuple[int, list]] = {}

    def on_progress(src, n, nbytes):
        if src.name not in tasks:
            try:
                total = src.path.stat().st_size
            except OSError:
                total = None
            tasks[src.name] = (prog.add_task(src.name, total=total, lines=0, rate=0.0, mb=0.0), [0, 0, time.monotonic()])
        tid, acc = tasks[src.name]
        acc[0] += n
        acc[1] += nbytes + n
        el = max(time.monotonic() - acc[2], 1e-6)
        prog.update(tid, completed=acc[1], lines=acc[0], rate=acc[0] / el, mb=acc[1] / 1e6)

    return prog, on_progress


def _install_stop(stop: threading.Event):
    def handler(_sig, _frm):
        stop.set()

    for s in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(s, handler)
        except ValueError:  # not the main thread
            pass


def do_ingest(sources, bootstrap, topic_prefix, single_topic, follow, rate, speed, from_end=False,
              idle_timeout=None, quiet=False, compression="none", years=None):
    from litemq.pipeline.ingest import ingest

    stop = threading.Event()
    if follow:
        _install_stop(stop)
    prog, on_progress = _progress_ui(sys.stderr.isatty() and not quiet)
    kw = {}
    if follow:
        kw = {"from_end": from_end, "idle_timeout_s": idle_timeout}
    try:
        if prog is not None:
            prog.start()
        stats = ingest(list(sources), bootstrap, topic_prefix=topic_prefix, single_topic=single_topic, follow=follow,
                       rate=rate, speed=speed, stop=stop, on_progress=on_progress,
                       producer_config={"compression.type": compression}, years=years, **kw)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        raise CliError("interrupted") from None
    except Exception as exc:
        raise CliError(f"ingest failed: {exc}") from None
    finally:
        if prog is not None:
            prog.stop()
    return stats


@click.command()
@click.argument("sources", nargs=-1, required=True)
@bootstrap_server_option
@click.option("--topic-prefix", default="logs.", show_default=True, help="Topic of a source = prefix + source name.")
@click.option("--single-topic", default=None, metavar="TOPIC",
              help="Send every source to TOPIC (sources told apart by the 'source' header).")
@click.option("--follow", "-F", is_flag=True, help="Keep following the files like tail -F (survives rotation).")
@click.option("--from-end", is_flag=True, help="With --follow: skip the lines already in the files.")
@click.option("--idle-timeout", type=float, default=None, help="With --follow: stop after this many idle seconds.")
@click.option("--rate", type=float, default=None, help="Replay at most N lines/s (over all sources).")
@click.option("--speed", type=float, default=None,
              help="Replay at X times the logs' own pace (from their timestamps; sources merged by time).")
@click.option("-z", "--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]), default="none",
              show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def ingest_cmd(sources, bootstrap, topic_prefix, single_topic, follow, from_end, idle_timeout, rate, speed,
               compression, quiet):
    """Send log files, directories or globs as records: one record per line, one topic per source.

    Key = the line's host/component when parseable, value = the raw line, timestamp = the line's own
    timestamp when parseable; headers 'source' and 'format'. Idempotent producer.
    """
    if rate is not None and speed is not None:
        raise click.UsageError("--rate and --speed are exclusive")
    if follow and (rate or speed):
        raise click.UsageError("--rate/--speed are for replay, not --follow")
    _admin(bootstrap)  # one line within seconds when no broker answers (README), not a client error later
    stats = do_ingest(sources, bootstrap, topic_prefix, single_topic, follow, rate, speed, from_end, idle_timeout,
                      quiet, compression)
    el = max(stats.elapsed_s, 1e-9)
    err.print(f"ingested {stats.lines:,} lines ({stats.bytes / 1e6:.1f} MB) from {len(stats.per_source)} source(s) "
              f"in {el:.1f} s ({stats.lines / el:,.0f} lines/s)")


@click.group()
def pipeline():
    """The log analytics job (PySpark Structured Streaming over format('litemq'))."""


def _spark_conf(pairs) -> dict[str, str]:
    """``--conf KEY=VALUE`` options (as spark-submit's) -> dict; a pair without ``=`` is a usage error."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--conf")
        conf[key.strip()] = value
    return conf


def _run_job(bootstrap, patterns, output, once, engine, max_offsets, interval, master=None, spark_conf=None):
    from litemq.pipeline.job import get_spark, run_pipeline

    stop = threading.Event()
    try:  # SIGTERM/Ctrl-C stop between micro-batches (the Spark engine installs its own handlers)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda _s, _f: stop.set())
    except ValueError:
        pass

    def on_batch(batch_id, counts):
        if counts:
            err.print(f"[dim]batch {batch_id}: {counts.get('windows', 0)} window rows, "
                      f"{counts.get('templates', 0)} template rows, {counts.get('alerts', 0)} alerts[/]")

    try:
        spark = None
        if engine == "spark" and (master or spark_conf):
            spark = get_spark(master=master, conf=spark_conf)
        res = run_pipeline(bootstrap, list(patterns), output, once=once, engine=engine, stop=stop, spark=spark,
                           max_offsets_per_trigger=max_offsets, trigger_interval_s=interval, on_batch=on_batch)
    except KeyboardInterrupt:
        raise CliError("interrupted; rerun the same command to resume from the checkpoint") from None
    except RuntimeError as exc:
        raise CliError(str(exc)) from None
    return res


def _report(output):
    from litemq.pipeline.report import build_report, summary_table

    md = build_report(output)
    console.print(summary_table(output))
    return md


@pipeline.command("run")
@click.argument("patterns", nargs=-1, required=True, metavar="TOPIC_PATTERN...")
@bootstrap_server_option
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output directory: parquet aggregates, alerts, checkpoint, report.")
@click.option("--once", is_flag=True, help="Stop when caught up (Trigger.AvailableNow).")
@click.option("--engine", type=click.Choice(["spark", "local"]), default="spark", show_default=True,
              help="spark = PySpark Structured Streaming; local = same analysis without Spark (reference).")
@click.option("--max-offsets-per-trigger", type=int, default=None, help="Records per micro-batch at most.")
@click.option("--trigger-interval", type=float, default=5.0, show_default=True, help="Seconds between micro-batches.")
@click.option("--no-report", is_flag=True, help="Do not write the report at the end.")
@click.option("--master", default=None, envvar="LITEMQ_SPARK_MASTER", metavar="URL",
              help="Spark master URL, as spark-submit's: local[2] (default), spark://HOST:7077 (standalone).")
@click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting, as spark-submit's --conf (repeatable), e.g. spark.executor.memory=1g.")
def pipeline_run(patterns, bootstrap, output, once, engine, max_offsets_per_trigger, trigger_interval, no_report,
                 master, spark_conf):
    """Run the job on topics matching TOPIC_PATTERN (Java regexes, like subscribePattern), e.g. 'logs\\..*'.

    Continuous until Ctrl-C (a rerun resumes from the checkpoint in OUTPUT), or --once. With
    --master spark://HOST:PORT the job runs on a Spark standalone cluster; give -b every broker
    (HOST:PORT,HOST:PORT,...) and an --output path every Spark worker sees.
    """
    _admin(bootstrap)  # one line within seconds when no broker answers, before Spark starts
    res = _run_job(bootstrap, patterns, output, once, engine, max_offsets_per_trigger, trigger_interval, master,
                   _spark_conf(spark_conf))
    err.print(f"{res.batches} micro-batches in {res.elapsed_s:.1f} s"
              + (" (stopped; rerun to resume)" if res.stopped_by_user else ""))
    if not no_report:
        md = _report(output)
        console.print(f"report: {md}")


@pipeline.command("report")
@click.argument("output", type=click.Path(exists=True, file_okay=False, path_type=Path))
def pipeline_report(output):
    """(Re)build the Markdown/PNG report of an output directory and print the summary."""
    md = _report(output)
    console.print(f"report: {md}")


@click.command()
@click.argument("paths", nargs=-1)
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory [default: ./litemq-demo-output].")
@click.option("--engine", type=click.Choice(["spark", "local"]), default="spark", show_default=True)
@click.option("--keep-broker", is_flag=True, help="Keep the broker running at the end until Ctrl-C.")
@click.option("--machine-logs/--no-machine-logs", default=True, show_default=True,
              help="Also ingest this machine's own logs (dpkg, apt, alternatives, syslog or the journal, "
                   "/var/log/*.log) that exist, are readable and in a known format.")
@click.option("--loghub/--no-loghub", default=True, show_default=True,
              help="Also ingest the loghub 2k samples in $LITEMQ_LOGHUB_DIR/loghub (default ../shared/data) "
                   "when present.")
def demo(paths, output, engine, keep_broker, machine_logs, loghub):
    """The main job on one machine: embedded broker, ingest the bundled Apache access log, this machine's
    own logs (each its own source), the loghub samples when present and PATHS, run the Spark job until
    caught up, write the report comparing the sources."""
    from litemq.embedded import Broker
    from litemq.pipeline.demo_data import access_log_path
    from litemq.pipeline.job import connector_available
    from litemq.pipeline.local_sources import loghub_dir, loghub_sets, loghub_years, machine_log_sources

    out = Path(output) if output else Path.cwd() / "litemq-demo-output"
    if (out / "_checkpoint").exists() or (out / "_local_state").exists() or (out / "aggregates").exists():
        import shutil

        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("# litemq demo output\n*\n")   # never committed by accident
    if engine == "spark" and not connector_available():
        err.print("[yellow]the PySpark connector format('litemq') is not installed yet; running the same analysis "
                  "with --engine local[/]")
        engine = "local"
    t0 = time.monotonic()
    data_dir = tempfile.mkdtemp(prefix="litemq-demo-")
    sources = [str(access_log_path())]
    years: dict[str, int] = {}  # year of the year-less lines of the loghub samples, by path
    if machine_logs:
        links = Path(data_dir) / "machine-logs"
        links.mkdir()
        found = machine_log_sources(links, log=lambda line: err.print(f"[dim]{line}[/]", highlight=False))
        for m in found:
            err.print(f"machine log {m.name}: {m.origin} ({m.fmt})", highlight=False)
        sources += [str(m.path) for m in found]
    if loghub:
        sets = loghub_sets()
        err.print(f"loghub: {len(sets)} sets in {loghub_dir() / 'loghub'}" if sets else
                  f"loghub: none in {loghub_dir() / 'loghub'} (set LITEMQ_LOGHUB_DIR to the folder holding loghub/)",
                  highlight=False)
        sources += [str(p) for p in sets]
        years = loghub_years(sets)
    sources += list(paths)
    with Broker(data_dir=str(Path(data_dir) / "broker"), num_partitions=1) as b:
        err.print(f"embedded broker at {b.bootstrap_servers} (data in {data_dir})")
        stats = do_ingest(sources, b.bootstrap_servers, "logs.", None, False, None, None, years=years)
        err.print(f"ingested {stats.lines:,} lines from {len(stats.per_source)} source(s) in {stats.elapsed_s:.1f} s")
        err.print(f"running the pipeline ({engine}) until caught up ...")
        res = _run_job(b.bootstrap_servers, [r"logs\..*"], out, True, engine, None, 5.0)
        err.print(f"{res.batches} micro-batches in {res.elapsed_s:.1f} s")
        md = _report(out)
        console.print(f"\n[bold]outputs[/] (total {time.monotonic() - t0:.0f} s):")
        console.print(f"  report       {md}")
        console.print(f"  charts       {md.parent}/*.png")
        console.print(f"  aggregates   {out / 'aggregates'}  (parquet, partitioned by source and date)")
        console.print(f"  alerts       {out / 'alerts'}  (also topic 'alerts'; metrics on topic 'log-metrics')")
        console.print(f"  checkpoint   {out / ('_checkpoint' if engine == 'spark' else '_local_state')}")
        if keep_broker:
            console.print(f"broker still running at {b.bootstrap_servers}; Ctrl-C to stop")
            try:
                while True:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
    import shutil

    shutil.rmtree(data_dir, ignore_errors=True)


def register(main: click.Group) -> None:
    main.add_command(ingest_cmd, "ingest")
    main.add_command(pipeline, "pipeline")
    main.add_command(demo, "demo")
