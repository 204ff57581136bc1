"""A coalition game's episode records, kept in an anonymous temporary file as coalitions finish.

A record holds every turn of an episode; a debate over a 64-member coalition quotes up to 63 peers a
turn, so one record is about 15 KB of JSON and 27 KB as Python objects. ``cgym eval`` of 64 members at
its defaults runs 345,800 episodes: held in memory they alone took about 9 GB and, beside the
generation cache, ran a 24 GiB machine out of memory. Here memory holds only where each coalition's
records lie in the file and the failure counts; a coalition's records are read back when asked for.
The file is unlinked at creation (nothing is left behind, even by a killed run).
"""

from __future__ import annotations

import json
import tempfile
from typing import IO, Iterator, MutableMapping

from ..failures import FailureSummary


class EpisodeRecords(MutableMapping[frozenset, list[dict]]):
    """Coalition -> its episode records (one dict per item), stored once per coalition."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._where: dict[frozenset, tuple[int, int]] = {}  # coalition -> (offset, length) in the file
        self._end = 0
        self.failures = FailureSummary()  # kept as records arrive, so counting them reads nothing back

    def __setitem__(self, coalition: frozenset, rows: list[dict]) -> None:
        if coalition in self._where:  # a game values a coalition once; a second write would count twice
            raise ValueError(f"records of coalition {sorted(coalition)} are already stored")
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="cgym-records-")
        self._file.seek(self._end)
        self._file.write(data)
        self._where[coalition] = (self._end, len(data))
        self._end += len(data)
        self.failures.add_records(rows)

    def __getitem__(self, coalition: frozenset) -> list[dict]:
        offset, length = self._where[coalition]
        if not length:
            return []
        assert self._file is not None
        self._file.seek(offset)
        return [json.loads(line) for line in self._file.read(length).splitlines()]

    def __delitem__(self, coalition: frozenset) -> None:
        raise TypeError("episode records are kept for the whole game")

    def __iter__(self) -> Iterator[frozenset]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, coalition: object) -> bool:
        return coalition in self._where

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __del__(self) -> None:
        self.close()
