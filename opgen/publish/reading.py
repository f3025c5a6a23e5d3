"""Reading a published dataset: a folder here or a Hub id downloaded, its rows read with `datasets` as a consumer
reads them, quietly (no loader progress bars)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from opgen.errors import UsageError
from opgen.publish.upload import REPO_ID

TASK_FIELDS = ("id", "code", "flops", "bytes_moved")


def require_dataset(dataset: str) -> None:
    """UsageError (one line, before any work) unless DATASET is a dataset folder, or names none here and reads as a
    Hub id ORG/NAME: a missing folder is named as missing."""
    path = Path(dataset).expanduser()
    if path.is_dir():
        if not (path / "README.md").is_file():
            raise UsageError(f"{path} is not a dataset folder (no README.md card)")
    elif path.exists() or not REPO_ID.match(dataset):
        raise UsageError(f"dataset folder {dataset} does not exist (nor is it a Hub id ORG/NAME)")


def resolve_dataset(dataset: str, out: str | None) -> tuple[Path, str | None]:
    """A local dataset folder as it is, or a Hub dataset id downloaded (snapshot) into `out`; returns the
    folder and the Hub id (None for a local folder)."""
    require_dataset(dataset)
    path = Path(dataset).expanduser()
    if path.is_dir():
        return path, None
    from huggingface_hub import snapshot_download

    target = Path(out or Path("data") / "retime" / dataset.replace("/", "__"))
    try:
        snapshot_download(repo_id=dataset, repo_type="dataset", local_dir=str(target))
    except Exception as error:  # network, auth, missing repo: huggingface_hub raises many types
        first = (str(error).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"no dataset folder {dataset} here, and it cannot be downloaded as a Hub id "
                         f"({type(error).__name__}: {first})") from None
    return target, dataset


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """`datasets` without its progress bars ("Generating train split", ...) inside, as they were after."""
    import datasets

    shown = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if shown:
            datasets.enable_progress_bars()


def load_rows(folder: Path, config: str = "default", fresh: bool = False) -> list[dict]:
    """Every row of the dataset folder's `config` (train split), read with `datasets`, quietly; `fresh` reads the
    files again instead of datasets' cache of them (which a rebuilt folder of the same name and sizes would hit).
    Raises what `datasets` raises."""
    import datasets

    with quiet_loading():
        return datasets.load_dataset(str(folder), config, split="train",
                                     download_mode="force_redownload" if fresh else None).to_list()


def load_tasks(folder: Path, fields: tuple[str, ...] = TASK_FIELDS, fresh: bool = False,
               config: str = "default") -> list[dict]:
    """The dataset's tasks (`config`, train split), read with `datasets` as a consumer would: `fields` of each row
    (absent columns read as None); `fresh` reads the files again instead of a cache of them."""
    try:
        rows = load_rows(folder, config, fresh)
    except Exception as error:  # noqa: BLE001 - datasets' many errors: a folder that is no dataset, a config it lacks
        raise UsageError(f"cannot load {folder} with datasets ({type(error).__name__}: {error})") from None
    return [{field: row.get(field) for field in fields} for row in rows]
