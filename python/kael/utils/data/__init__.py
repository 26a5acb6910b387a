"""kael.utils.data: torch.utils.data's Dataset, TensorDataset, samplers and DataLoader.

A DataLoader draws indices from a sampler (SequentialSampler, or RandomSampler with
shuffle=True, from the generator kael.manual_seed seeds), groups them into batches
(BatchSampler: batch_size, drop_last), fetches each item from the dataset and joins the items
with collate_fn (default_collate: tensors stacked, numbers made tensors, tuples, lists and dicts
collated element by element). With num_workers > 0 the batches are fetched by worker processes
(multiprocessing, the platform's default start method, or multiprocessing_context), each batch's
indices sent to a worker and the batches yielded in order; worker_init_fn(worker_id) runs in
each worker first. Tensors cross between processes as numpy arrays."""
from __future__ import annotations

import collections.abc
import multiprocessing
import numbers
from typing import Any, Callable, Generic, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from ... import _kael
from ..._kael import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "random_split", "Sampler", "SequentialSampler",
           "RandomSampler", "SubsetRandomSampler", "BatchSampler", "DataLoader", "default_collate",
           "get_worker_info"]

T = TypeVar("T")


def _check_no_generator(generator: Any, who: str) -> None:
    """kael draws from the one generator kael.manual_seed seeds: a generator object is refused, not ignored."""
    if generator is not None:
        raise _kael.ValueError(f"{who}: generator objects are not supported (use kael.manual_seed)")


class Dataset(Generic[T]):
    """Items by index: subclasses define __getitem__ (and __len__ for the samplers that need it)."""

    def __getitem__(self, index: int) -> T:
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")


class IterableDataset(Generic[T]):
    """Items as a stream: subclasses define __iter__."""

    def __iter__(self) -> Iterator[T]:
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")


class TensorDataset(Dataset[tuple]):
    """Item i is (t[i] for each tensor), the tensors sharing their first dim."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors or any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise _kael.ValueError("TensorDataset: the tensors must share their first dim (size mismatch)")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T]):
    def __init__(self, dataset: Dataset[T], indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index: int) -> T:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset[T], lengths: Sequence[int | float], generator: Any = None) -> list[Subset[T]]:
    """Disjoint random subsets of the given lengths (or fractions summing to 1)."""
    _check_no_generator(generator, "random_split")
    n = len(dataset)  # type: ignore[arg-type]
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        sizes = [int(n * f) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
    else:
        sizes = [int(x) for x in lengths]
    if sum(sizes) != n:
        raise _kael.ValueError("random_split: the lengths do not add up to the dataset's length")
    order = _kael.randperm(n).tolist()
    out, start = [], 0
    for size in sizes:
        out.append(Subset(dataset, order[start:start + size]))
        start += size
    return out


class Sampler(Generic[T]):
    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator[T]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A permutation of the indices each epoch, or num_samples indices drawn with replacement."""

    def __init__(self, data_source: Any, replacement: bool = False, num_samples: int | None = None,
                 generator: Any = None) -> None:
        self.data_source, self.replacement, self._num_samples = data_source, replacement, num_samples
        _check_no_generator(generator, "RandomSampler")
        if not replacement and num_samples is not None and num_samples > len(data_source):
            raise _kael.ValueError("RandomSampler: num_samples exceeds the dataset without replacement")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if self.replacement:
            remaining = self.num_samples
            while remaining > 0:  # in blocks, so that a huge num_samples costs no memory up front
                block = min(remaining, 32)
                yield from _kael.randint(0, n, (block,)).tolist()
                remaining -= block
            return
        full, rest = divmod(self.num_samples, n) if n else (0, 0)
        for _ in range(full):
            yield from _kael.randperm(n).tolist()
        if rest:
            yield from _kael.randperm(n).tolist()[:rest]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        _check_no_generator(generator, "SubsetRandomSampler")
        self.indices = list(indices)

    def __iter__(self) -> Iterator[int]:
        for i in _kael.randperm(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler[list]):
    """Lists of batch_size indices from a sampler; the last shorter one dropped when drop_last."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise _kael.ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size


def default_collate(batch: Sequence[Any]) -> Any:
    """torch's default_collate: tensors stacked, numbers and numpy arrays made tensors, strings
    kept in a list, tuples, lists and dicts collated element by element."""
    first = batch[0]
    if isinstance(first, Tensor):
        return _kael.stack(list(batch), 0)
    if isinstance(first, np.ndarray):
        return _kael.stack([_kael.as_tensor(np.ascontiguousarray(b)) for b in batch], 0)
    if isinstance(first, bool):
        return _kael.tensor(list(batch), dtype=_kael.bool)
    if isinstance(first, numbers.Integral):
        return _kael.tensor(list(batch), dtype=_kael.int64)
    if isinstance(first, numbers.Real):
        return _kael.tensor(list(batch), dtype=_kael.float64)
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, collections.abc.Mapping):
        return {key: default_collate([item[key] for item in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(default_collate(list(items)) for items in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        if any(len(item) != len(first) for item in batch):
            raise _kael.ValueError("default_collate: each element in the batch should be of equal size")
        collated = [default_collate(list(items)) for items in zip(*batch)]
        return tuple(collated) if isinstance(first, tuple) else collated
    raise _kael.TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                          f"found {type(first).__name__}")


# --- workers: tensors travel as numpy arrays, so that no tensor is pickled ---

class _Packed:
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def _pack(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        t = obj.detach().contiguous()
        if t.dtype == _kael.bfloat16:
            t = t.float()
        return _Packed(np.array(t.numpy(), copy=True))
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_pack(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _unpack(obj: Any) -> Any:
    if isinstance(obj, _Packed):
        return _kael.from_numpy(obj.array)
    if isinstance(obj, dict):
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_unpack(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(v) for v in obj)
    return obj


class WorkerInfo:
    def __init__(self, id: int, num_workers: int, seed: int, dataset: Any) -> None:
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process, its id, the worker count, its seed and the dataset; else None."""
    return _worker_info


def _worker_loop(dataset: Any, collate_fn: Callable[[list], Any], tasks: Any, results: Any, worker_id: int,
                 num_workers: int, seed: int, init_fn: Callable[[int], None] | None) -> None:
    global _worker_info
    _kael.manual_seed(seed)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    try:
        if init_fn is not None:
            init_fn(worker_id)
    except Exception as error:  # reported with the first batch this worker is asked for
        failure: BaseException | None = error
    else:
        failure = None
    while True:
        task = tasks.get()
        if task is None:
            return
        number, indices = task
        try:
            if failure is not None:
                raise failure
            results.put((number, _pack(collate_fn([dataset[i] for i in indices])), None))
        except Exception as error:  # noqa: BLE001  (sent to the main process, raised there)
            results.put((number, None, f"{type(error).__name__}: {error}"))


class _WorkerIterator:
    """Batches fetched by worker processes, yielded in the order of the batch sampler."""

    def __init__(self, loader: DataLoader, base_seed: int) -> None:
        context = loader.multiprocessing_context
        if isinstance(context, str) or context is None:
            context = multiprocessing.get_context(context)
        self._tasks = [context.Queue() for _ in range(loader.num_workers)]
        self._results = context.Queue()
        self._workers = []
        for worker_id in range(loader.num_workers):
            process = context.Process(
                target=_worker_loop,
                args=(loader.dataset, loader.collate_fn, self._tasks[worker_id], self._results, worker_id,
                      loader.num_workers, base_seed + worker_id, loader.worker_init_fn),
                daemon=True)
            process.start()
            self._workers.append(process)
        self._batches = iter(loader.batch_sampler)
        self._sent = self._next_yield = 0
        self._ready: dict[int, Any] = {}
        self._timeout = loader.timeout if loader.timeout > 0 else None
        for _ in range(loader.prefetch_factor * loader.num_workers):
            if not self._send():
                break

    def _send(self) -> bool:
        indices = next(self._batches, None)
        if indices is None:
            return False
        self._tasks[self._sent % len(self._tasks)].put((self._sent, list(indices)))
        self._sent += 1
        return True

    def __iter__(self) -> _WorkerIterator:
        return self

    def __next__(self) -> Any:
        if self._next_yield >= self._sent:
            self.close()
            raise StopIteration
        while self._next_yield not in self._ready:
            try:
                number, batch, error = self._results.get(timeout=self._timeout)
            except Exception:
                self.close()
                raise _kael.Error("DataLoader: a worker did not answer within the timeout") from None
            if error is not None:
                self.close()
                raise _kael.Error(f"DataLoader worker failed on batch {number}: {error}")
            self._ready[number] = batch
        batch = self._ready.pop(self._next_yield)
        self._next_yield += 1
        self._send()
        return _unpack(batch)

    def close(self) -> None:
        for queue in self._tasks:
            queue.put(None)
        for process in self._workers:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
        self._workers = []

    def __del__(self) -> None:
        if self._workers:
            self.close()


class DataLoader(Generic[T]):
    """Batches of a dataset, as torch.utils.data.DataLoader (see the module's doc)."""

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Iterable[int] | None = None, batch_sampler: Iterable[list[int]] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "") -> None:
        if num_workers < 0:
            raise _kael.ValueError("num_workers option should be non-negative")
        if sampler is not None and shuffle:
            raise _kael.ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise _kael.ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                   "and drop_last")
        _check_no_generator(generator, "DataLoader")
        self.dataset, self.num_workers, self.pin_memory = dataset, num_workers, pin_memory
        self.timeout, self.worker_init_fn, self.multiprocessing_context = timeout, worker_init_fn, multiprocessing_context
        self.prefetch_factor = 2 if prefetch_factor is None else prefetch_factor
        self.batch_size, self.drop_last = batch_size, drop_last
        if sampler is None:
            sampler = RandomSampler(dataset) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else (lambda items: items[0])
        self.collate_fn = collate_fn

    def __iter__(self) -> Iterator[Any]:
        batches: Iterable[list[int]] = (self.batch_sampler if self.batch_sampler is not None
                                        else ([i] for i in self.sampler))
        # One draw for the workers' seeds on every iteration, with workers or without, as torch:
        # the sampler's draws then come out the same whatever num_workers is.
        base_seed = int(_kael.randint(0, 2 ** 62, (1,)).item())
        if self.num_workers > 0:
            if self.batch_sampler is None:
                raise _kael.ValueError("DataLoader: num_workers > 0 needs batches (give batch_size)")
            return _WorkerIterator(self, base_seed)
        return (self.collate_fn([self.dataset[i] for i in indices]) for indices in batches)

    def __len__(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)  # type: ignore[arg-type]
        return len(self.sampler)  # type: ignore[arg-type]
