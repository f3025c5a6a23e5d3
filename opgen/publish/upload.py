"""Sending a dataset folder where it goes: a Hub dataset repository (HfApi) or a local folder."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from opgen.errors import UsageError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def is_local_target(repo_id: str) -> bool:
    """A --repo-id that names a folder (./x, /x, ../x, ~/x or an existing path) is published by copying."""
    return repo_id.startswith(("./", "/", "../", "~")) or Path(repo_id).exists()


def copy_to_folder(folder: Path, target: str) -> Path:
    """Publish offline: copy the dataset folder into `target`, replacing its old data shards."""
    destination = Path(target).expanduser()
    if destination.resolve() == folder.resolve():
        return destination
    for stale in (destination / "data").glob("train-*.parquet"):
        stale.unlink()
    shutil.copytree(folder, destination, dirs_exist_ok=True)
    return destination


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def upload_folder(folder: Path, repo_id: str, token: str, private: bool) -> str:
    """Create the dataset repo (if needed) and upload the folder with huggingface_hub.HfApi; returns its URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True, token=token)
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="dataset", token=token,
                          commit_message="Upload opgen dataset")
    except Exception as error:  # network, auth, quota: huggingface_hub raises many types
        first = (str(error).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"upload to {repo_id} failed ({type(error).__name__}: {_scrub(first, token)}); "
                         f"the dataset folder is intact at {folder}") from None
    return f"https://huggingface.co/datasets/{repo_id}"
