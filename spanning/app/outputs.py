"""The output folder of ``spanning run``: windows/, rejected/, late/ and summary.json (both engines).

A run never writes into the folder the user named: it writes into a hidden sibling
(``.NAME.spanning-tmp-XXXX``) and moves it into place only once the run is complete, with a marker
file (``_SPANNING_OUTPUT``) that says spanning wrote it. ``--overwrite`` replaces only a folder that
carries the marker and holds nothing else than what that run wrote; the current folder, its parents,
a folder holding an input and a folder inside an input folder are refused before anything is touched.
A failed run removes its temporary folder and leaves the previous output as it was.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from spanning.app.jobspec import RunConfig, UsageError

MARKER = "_SPANNING_OUTPUT"  # Spark's and pandas' folder readers skip names starting with "_"
TEMP_TAG = ".spanning-tmp-"
OLD_TAG = ".spanning-old-"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def final_path(output: str) -> Path:
    """The output folder as an absolute path with symbolic links resolved: what summary.json names."""
    if _URI.match(output):
        raise UsageError(
            f"--output {output}: only local or mounted paths are supported for --output in this version"
            " (not hdfs://, s3a://, file:// URIs)"
        )
    try:
        return Path(output).expanduser().resolve()
    except (OSError, RuntimeError) as err:  # a symbolic link loop
        raise UsageError(f"--output {output}: {err}") from err


def read_marker(folder: Path) -> dict | None:
    """The marker of a folder written by spanning, or None when it has none (or an unreadable one)."""
    marker = folder / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        content = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return content if isinstance(content, dict) and content.get("tool") == "spanning" else None


def _refuse(output: str, why: str) -> UsageError:
    return UsageError(f"--output {output} {why}: refusing to replace it")


def _pattern(text: str) -> tuple[Path, list[str]]:
    """An input path or glob as (resolved folder before the first wildcard, remaining pattern parts)."""
    parts = Path(os.path.expanduser(text)).parts  # no abspath: ".." after a symbolic link is resolved, not cut
    first = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    return Path(*parts[:first]).resolve() if first else Path.cwd().resolve(), list(parts[first:])


def _input_conflict(output: str, final: Path, inputs: list[str]) -> UsageError | None:
    """Refuse an output folder that holds an input, is one, or lies inside an input folder (now or by its glob)."""
    for text in inputs:
        if text.startswith("file://"):
            text = text[len("file://") :]
        elif _URI.match(text):
            continue  # hdfs://, s3a://: cannot be inside a local folder
        base, rest = _pattern(text)
        matches = [Path(m).resolve() for m in glob.glob(os.path.join(base, *rest))] if rest else []
        if base.exists() and not rest:
            matches.append(base)
        for path in matches:
            if path == final or path.is_relative_to(final):
                return _refuse(output, f"holds the input {text}")
            if path.is_dir() and final.is_relative_to(path):
                return UsageError(
                    f"--output {output} is inside the input folder {text}: the next run would read it as input;"
                    " choose an output folder outside the inputs"
                )
        pattern = [*base.parts, *rest]  # a folder the glob would match later: the output must not lie in it
        if rest and len(final.parts) >= len(pattern):
            if all(fnmatch.fnmatchcase(part, want) for part, want in zip(final.parts, pattern, strict=False)):
                return UsageError(
                    f"--output {output} matches the input {text}: the next run would read it as input;"
                    " choose an output folder outside the inputs"
                )
    return None


def _check_existing(output: str, final: Path, overwrite: bool) -> None:
    """Refuse an existing path that spanning did not write, or any existing output without ``--overwrite``."""
    if not final.exists():
        return
    if not final.is_dir():
        raise _refuse(output, "is a file, not a folder")
    try:
        entries = sorted(p.name for p in final.iterdir())
    except OSError as err:
        raise UsageError(f"--output {output}: cannot list it ({err.strerror})") from err
    if not entries:
        if os.path.ismount(final):
            raise UsageError(f"--output {output} is a mount point: give a folder inside it")
        if not overwrite:  # nothing to lose, but the user may have meant another folder
            raise UsageError(f"output folder {output} exists: give --overwrite to replace it")
        return  # an empty folder may be used
    marker = read_marker(final)
    if marker is None:
        raise _refuse(output, f"is not empty and is not a spanning output folder (it has no {MARKER} file)")
    foreign = [e for e in entries if e != MARKER and e not in marker.get("entries", [])]
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise _refuse(output, f"holds files that spanning did not write ({shown})")
    if not overwrite:
        raise UsageError(f"output folder {output} exists: give --overwrite to replace it")


def check_output(cfg: RunConfig) -> Path:
    """The final output folder of ``cfg``, or a UsageError if writing it could harm anything that exists."""
    output = str(cfg.output.folder)
    final = final_path(output)
    cwd = Path.cwd().resolve()
    if final == cwd:
        raise _refuse(output, "is the current folder")
    if cwd.is_relative_to(final):
        raise _refuse(output, "contains the current folder")
    conflict = _input_conflict(output, final, list(cfg.inputs.paths))
    if conflict is not None:
        raise conflict
    _check_existing(output, final, cfg.output.overwrite)
    return final


def _make_folders(folder: Path, created: list[Path]) -> None:
    """Create ``folder`` and its missing parents, adding each one created to the front of ``created``."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
        created.insert(0, path)


def _remove_created(created: list[Path]) -> None:
    """Remove the folders created for a run that failed (deepest first), as long as they are empty."""
    for folder in created:
        try:
            folder.rmdir()
        except OSError:
            return


def _temp_folder(final: Path) -> Path:
    for _ in range(100):
        temp = final.with_name(f".{final.name[:100]}{TEMP_TAG}{secrets.token_hex(4)}")
        try:
            temp.mkdir()  # not mkdtemp: the output gets the user's usual permissions
            return temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary folder name beside {final}")


def _marker(cfg: RunConfig, final: Path, entries: list[str]) -> dict:
    from spanning import __version__

    return {
        "tool": "spanning",
        "version": __version__,
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "engine": cfg.engine,
        "output": str(final),
        "entries": entries,
    }


def _move_into_place(cfg: RunConfig, temp: Path, final: Path) -> None:
    """Mark the complete output, then swap it with the previous one (renamed aside, removed last)."""
    if not (temp / "summary.json").is_file():
        raise RuntimeError("the run ended without writing summary.json: the output was not replaced")
    entries = sorted([p.name for p in temp.iterdir()] + [MARKER])
    (temp / MARKER).write_text(json.dumps(_marker(cfg, final, entries), indent=2) + "\n")
    _check_existing(str(cfg.output.folder), final, cfg.output.overwrite)  # again: it may have changed meanwhile
    old = None
    if final.exists() and any(final.iterdir()):
        old = final.with_name(f".{final.name[:100]}{OLD_TAG}{secrets.token_hex(4)}")
        os.rename(final, old)
    try:
        os.rename(temp, final)  # replaces an empty folder; fails on anything else
    except BaseException:
        if old is not None:  # put the previous output back
            os.rename(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def output_folder(cfg: RunConfig) -> Iterator[Path]:
    """A fresh temporary folder for the run's outputs, moved to ``cfg.output.folder`` once the run completes.

    Everything that could harm existing files is refused (UsageError) before anything is touched. If the
    run fails, the temporary folder (and any parent folder created for it) is removed and the previous
    output is left as it was.
    """
    final = check_output(cfg)
    created: list[Path] = []
    try:
        _make_folders(final.parent, created)
        temp = _temp_folder(final)
    except OSError as err:
        _remove_created(created)
        raise UsageError(f"cannot create the output folder {cfg.output.folder}: {err.strerror or err}") from err
    try:
        yield temp
        _move_into_place(cfg, temp, final)
    except BaseException as err:
        shutil.rmtree(temp, ignore_errors=True)
        _remove_created(created)
        if isinstance(err, OSError):  # name the folder the user knows, not the temporary one (now gone)
            for attr in ("filename", "filename2"):
                if isinstance(getattr(err, attr), str):
                    setattr(err, attr, getattr(err, attr).replace(str(temp), str(final)))
        raise


def finish_output(
    cfg: RunConfig, output: Path, *, rows_read: int, rejected: int, late: int, windows: int, seconds: float, **extra
) -> dict:
    """Write summary.json into ``output`` and return it. Every row read is accepted or rejected.

    Its ``output`` names the folder the user asked for (where the run is moved once complete).
    """
    summary = {
        "rows_read": int(rows_read),
        "accepted": int(rows_read - rejected),
        "rejected": int(rejected),
        "late": int(late),
        "windows_written": int(windows),
        "output": str(final_path(str(cfg.output.folder))),
        "wall_time_s": round(seconds, 3),
        "parameters": cfg.parameters(),
        **extra,
    }
    (output / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def human_summary(summary: dict) -> str:
    lines = [
        f"read {summary['rows_read']:,} rows: {summary['accepted']:,} accepted, {summary['rejected']:,} rejected,"
        f" {summary['late']:,} late; wrote {summary['windows_written']:,} windows in {summary['wall_time_s']:.1f} s",
        f"results: {summary['output']}/windows  (rejected/, late/, summary.json beside it)",
    ]
    if summary["late"] and summary.get("parameters", {}).get("ttp") == 0:
        lines.append("late: with --ttp 0 a window is released when the first event ending after it arrives (events"
                     " arrive at their end), so a call still going at a window's end misses that window; a --ttp as"
                     " long as the longest call counts them")  # fmt: skip
    return "\n".join(lines)
