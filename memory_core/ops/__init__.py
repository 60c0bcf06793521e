"""What an operator asks of an installation and its workspace: the versions
(`versions.py`, for `chatmem --version`) and the checks of `chatmem doctor`
(`checks.py`, `report.py`). Read-only: nothing here changes a workspace."""
