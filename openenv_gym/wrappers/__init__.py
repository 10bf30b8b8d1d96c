"""Gymnasium wrappers of our own: episodes recorded to disk.

:class:`RecordEpisodes` (single env; given a vector env it gives a
:class:`RecordVectorEpisodes`) writes every finished episode — seed, every observation,
action, reward, termination, truncation and the chosen infos — in Minari's Arrow layout
where Minari can hold the spaces, else as Parquet shards; ``minari``, ``datasets`` and
pandas read them back (``docs/recording.md``). Needs the ``record`` extra:
``pip install 'openenv-gym[record]'``.
"""

from openenv_gym.wrappers.episodes import RecordEpisodes, RecordVectorEpisodes
from openenv_gym.wrappers.storage import FORMATS, SCHEMA_VERSION, Episode, EpisodeWriter

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "Episode",
    "EpisodeWriter",
    "RecordEpisodes",
    "RecordVectorEpisodes",
]
