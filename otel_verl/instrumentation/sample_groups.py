"""The ids of a V1 sample group's span, from the prompt's ``uid``: known to the worker that generates the group
and to the trainer that consumes it, in other processes, with nothing passed between them.

verl keys a group in TransferQueue by its ``uid`` (a uuid4 the trainer draws when it fetches the prompt) and
its samples by ``<uid>_<session>_<index>``. The span id is 64 bits of a hash of the uid; the trace id (an
async group's own trace) is the uid's 128 bits when it is a UUID, else 128 bits of the hash. A resumed run
that re-dispatches a checkpointed prompt reuses its uid, and so the ids: the re-dispatch's span carries the
same ids as the lost one (which the crash kept from being exported whole).
"""

from __future__ import annotations

import hashlib
import uuid


def _digest(uid: str) -> bytes:
    return hashlib.blake2b(uid.encode(), digest_size=24).digest()


def group_span_id(uid: str) -> int:
    """The group span's id (never 0)."""
    return int.from_bytes(_digest(uid)[:8], "big") or 1


def group_trace_id(uid: str) -> int:
    """The trace id of an async group's own trace (never 0)."""
    try:
        return uuid.UUID(uid).int or 1
    except ValueError:
        return int.from_bytes(_digest(uid)[8:], "big") or 1


def uid_of_key(key: str) -> str:
    """The group's uid from a sample's TransferQueue key ``<uid>_<session>_<index>`` (verl's own split)."""
    return key.split("_")[0]
