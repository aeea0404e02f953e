"""verl's NeoProto ``DataProto`` view, built as verl's ``neo`` line builds it, for the seam tests.

verl PR 7557 makes ``from verl import DataProto`` return the NeoProto-backed view of verl@neo
(``verl/experimental/neoproto/views/data_proto.py`` over ``neo.py``, read at b0d344b0); the old class stays
``verl.protocol.DataProto``. Kept as verl builds it, because otel_verl's seams meet it there:

- ``@dataclass class DataProto(NeoProto, verl.protocol.DataProto)`` with its own ``__init__``: ``NeoProto.__init__``,
  then ``self.__post_init__()``, then batch, non-tensor batch and meta info through their setters; its
  ``__post_init__`` reaches ``NeoProto.__post_init__`` only, never the old class's;
- ``meta_info`` is a property giving ``LocalProxy``: a live ``MutableMapping`` over the ref table's batch-level
  ("full") entries, not a ``dict``; its setter adds keys;
- ``chunk`` gives views sharing one ref table; ``concat`` is a staticmethod over ``NeoProto.concat`` (a new view of
  ``type(head)`` with the head's batch-level entries) that merges the items' ``metrics``, and never calls the old
  ``DataProto.concat``;
- pickling (a Ray call) ships ``(schema, ref_table, dim0_index)``; ``__setstate__`` calls ``__post_init__``.

Stood in for: the storage engine (a column's payload sits in the ref table, no Ray object store) and the lazy
materialisation (``batch`` is a TensorDict made from the columns at the view's index when read).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict
from verl.protocol import DataProto as RLDataProto
from verl.protocol import DataProtoItem, list_of_dict_to_dict_of_list

FULL = "full"
"""verl's ``FULL_GRANULARITY``: a batch-level entry (the old ``meta_info``)."""


class RefTable(dict):
    def __init__(self, entries: dict[str, Any] | None = None, batch_size: int = 0) -> None:
        super().__init__(entries or {})
        self.batch_size = batch_size


@dataclass
class FieldSpec:
    granularity: str
    tensor: bool = False


@dataclass
class NeoProto:
    """Ref/index container: a schema, a ref table and the view's sample index."""

    schema: dict[str, FieldSpec] = field(default_factory=dict)
    ref_table: RefTable = field(default_factory=RefTable)
    dim0_index: Any = None

    def __init__(self, schema: dict[str, FieldSpec], ref_table: RefTable, dim0_index: Any = None) -> None:
        self.schema = schema
        self.ref_table = ref_table
        self.dim0_index = dim0_index
        self.dirty_cache: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.dim0_index)

    def __post_init__(self) -> None:
        self.dirty_cache = {}
        if self.dim0_index is None:
            self.dim0_index = np.arange(self.ref_table.batch_size)

    def __getstate__(self) -> tuple:
        return self.schema, self.ref_table, self.dim0_index

    def __setstate__(self, data: tuple) -> None:
        self.schema, self.ref_table, self.dim0_index = data
        self.__post_init__()

    def column(self, key: str) -> Any:
        return self.ref_table[key][self.dim0_index]

    def sample_keys(self, tensor: bool) -> list[str]:
        return [k for k, s in self.schema.items() if s.granularity != FULL and s.tensor == tensor]

    def chunk(self, chunks: int) -> list[NeoProto]:
        step = len(self) // chunks
        index = self.dim0_index
        return [
            type(self)(schema=dict(self.schema), ref_table=self.ref_table, dim0_index=index[i * step : (i + 1) * step])
            for i in range(chunks)
        ]

    @staticmethod
    def concat(items: list[NeoProto], new_index: bool = False) -> NeoProto:
        head = items[0]
        table = RefTable(batch_size=sum(len(item) for item in items))
        for key, spec in head.schema.items():
            if spec.granularity == FULL:
                table[key] = head.ref_table[key]
            elif all(key in item.schema for item in items):
                columns = [item.column(key) for item in items]
                table[key] = torch.cat(columns) if spec.tensor else np.concatenate(columns)
        return type(head)(schema=dict(head.schema), ref_table=table, dim0_index=None)


class LocalProxy(MutableMapping):
    """Live, dict-like view over a proto's batch-level ("full") ref entries (verl's ``LocalProxy``)."""

    def __init__(self, owner: NeoProto) -> None:
        self._owner = owner

    def _full(self, key: object) -> bool:
        spec = self._owner.schema.get(key) if isinstance(key, str) else None
        return spec is not None and spec.granularity == FULL

    def __getitem__(self, key: str) -> Any:
        if not self._full(key):
            raise KeyError(key)
        return self._owner.ref_table[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._owner.schema[key] = FieldSpec(FULL)
        self._owner.ref_table[key] = value

    def __delitem__(self, key: str) -> None:
        if not self._full(key):
            raise KeyError(key)
        self._owner.schema.pop(key, None)
        self._owner.ref_table.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k in self._owner.ref_table if self._full(k)])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Columns(MutableMapping):
    """The non-tensor batch: a live view of the sample columns at the proto's index (verl's ``_BatchProxy``)."""

    def __init__(self, owner: DataProto) -> None:
        self._owner = owner

    def __getitem__(self, key: str) -> Any:
        if key not in self._owner.sample_keys(tensor=False):
            raise KeyError(key)
        return self._owner.column(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._owner.rebind_to_identity()
        self._owner.schema[key] = FieldSpec("sample")
        self._owner.ref_table[key] = np.asarray(value)

    def __delitem__(self, key: str) -> None:
        self._owner.rebind_to_identity()
        self._owner.schema.pop(key)
        self._owner.ref_table.pop(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner.sample_keys(tensor=False))

    def __len__(self) -> int:
        return len(self._owner.sample_keys(tensor=False))


@dataclass
class DataProto(NeoProto, RLDataProto):
    """verl-compatible view over :class:`NeoProto` (verl@neo ``views/data_proto.py``)."""

    def __init__(
        self,
        batch: Any = None,
        non_tensor_batch: dict[str, Any] | None = None,
        meta_info: dict[str, Any] | None = None,
        *,
        schema: dict[str, FieldSpec] | None = None,
        ref_table: RefTable | None = None,
        dim0_index: Any = None,
    ) -> None:
        NeoProto.__init__(self, schema={} if schema is None else schema,
                          ref_table=RefTable() if ref_table is None else ref_table, dim0_index=dim0_index)  # fmt: skip
        self.__post_init__()
        if batch is not None:
            self.batch = batch
        if non_tensor_batch:
            self.non_tensor_batch = non_tensor_batch
        if meta_info:
            self.meta_info = meta_info

    def __post_init__(self) -> None:
        super().__post_init__()

    @property
    def meta_info(self) -> LocalProxy:  # type: ignore[override]
        return LocalProxy(self)

    @meta_info.setter
    def meta_info(self, value: dict[str, Any] | None) -> None:
        for key, item in (value or {}).items():
            self.schema[key] = FieldSpec(FULL)
            self.ref_table[key] = item

    @property
    def batch(self) -> TensorDict | None:  # type: ignore[override]
        keys = self.sample_keys(tensor=True)
        return TensorDict({k: self.column(k) for k in keys}, batch_size=[len(self)]) if keys else None

    @batch.setter
    def batch(self, value: TensorDict) -> None:
        self._columns(len(value), {key: value[key] for key in value.keys()}, tensor=True)  # noqa: SIM118

    @property
    def non_tensor_batch(self) -> _Columns:  # type: ignore[override]
        return _Columns(self)

    @non_tensor_batch.setter
    def non_tensor_batch(self, value: dict[str, Any]) -> None:
        first = next(iter(value.values()))
        self._columns(len(first), {key: np.asarray(v) for key, v in value.items()}, tensor=False)

    def _columns(self, size: int, columns: dict[str, Any], tensor: bool) -> None:
        if not self.sample_keys(True) and not self.sample_keys(False):
            self.ref_table.batch_size, self.dim0_index = size, np.arange(size)
        self.rebind_to_identity()
        for key, column in columns.items():
            self.schema[key] = FieldSpec("sample", tensor=tensor)
            self.ref_table[key] = column

    def rebind_to_identity(self) -> None:
        """A private table at an identity index before a write (verl's ``_rebind_to_logical_identity``)."""
        if len(self) == self.ref_table.batch_size and np.array_equal(self.dim0_index, np.arange(len(self))):
            return
        table = RefTable(batch_size=len(self))
        for key, spec in self.schema.items():
            table[key] = self.ref_table[key] if spec.granularity == FULL else self.column(key)
        self.ref_table, self.dim0_index = table, np.arange(len(self))

    def __getitem__(self, item: Any) -> Any:  # type: ignore[override]
        if isinstance(item, slice):
            return type(self)(schema=dict(self.schema), ref_table=self.ref_table, dim0_index=self.dim0_index[item])
        batch = self.batch
        return DataProtoItem(
            batch=batch[item] if batch is not None else None,
            non_tensor_batch={key: self.column(key)[item] for key in self.sample_keys(tensor=False)},
            meta_info=dict(self.meta_info),
        )

    @staticmethod
    def concat(items: list[NeoProto], new_index: bool = False) -> DataProto:  # type: ignore[override]
        output = NeoProto.concat(items, new_index=new_index)
        metrics: list[Any] = []
        for item in items:
            found = (getattr(item, "meta_info", None) or {}).get("metrics")
            if found is not None:
                metrics.extend(found if isinstance(found, list) else [found])
        if metrics:
            output.meta_info["metrics"] = list_of_dict_to_dict_of_list(metrics)
        return output

    @classmethod
    def from_verl(cls, data: RLDataProto) -> DataProto:
        return cls(batch=data.batch, non_tensor_batch=dict(data.non_tensor_batch), meta_info=dict(data.meta_info))
