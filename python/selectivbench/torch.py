"""PyTorch helpers: a dataset over a task's split and the task's loss and element accuracy,
defined as the C trainer defines them (docs/training.md, "Loss" and "Accuracy"). Needs torch;
`import selectivbench` alone does not.

    from selectivbench.torch import TaskDataset, loss, element_accuracy
    data = torch.utils.data.DataLoader(TaskDataset(task, "train", batch_size=32),
                                       batch_size=None)
    for b in data:
        logits = model(b["inputs"])            # [B, T, classes]
        l = loss(logits, b)
"""

import torch

from ._lib import key_default
from .task import split_id


def _tensors(batch):
    return {
        "inputs": torch.from_numpy(batch.inputs.copy()),
        "targets": torch.from_numpy(batch.targets),
        "valid": torch.from_numpy(batch.valid),
        "window_start": torch.from_numpy(batch.window_start),
        "window_len": torch.from_numpy(batch.window_len),
        "lengths": torch.from_numpy(batch.lengths),
        "element_targets": torch.from_numpy(batch.element_targets),
    }


class TaskDataset(torch.utils.data.IterableDataset):
    """The batches of a split of a selectivbench.Task as dicts of tensors (inputs, targets,
    valid, window_start, window_len, lengths, element_targets); use it with
    DataLoader(dataset, batch_size=None). In index order (what the C trainer reads) unless
    shuffle; with several DataLoader workers, each worker takes every n-th batch."""

    def __init__(self, task, split="train", batch_size=None, shuffle=False, seed=0,
                 drop_last=False, threads=1):
        super().__init__()
        if batch_size is None:  # train's --batch_size default
            batch_size = int(key_default("batch_size"))
        self.task, self.split = task, split_id(split)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.drop_last, self.threads = drop_last, threads

    def __len__(self):
        n = self.task.size(self.split)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for k, batch in enumerate(self.task.batches(self.split, self.batch_size, self.shuffle,
                                                    self.seed, self.drop_last, self.threads)):
            if k % workers == worker:
                yield _tensors(batch)


def loss(logits, batch):
    """The mean cross entropy over every real frame of the batch (symbol and gap frames,
    padding excluded): logits [B, T, classes], batch a dict from TaskDataset."""
    valid = batch["valid"]
    return torch.nn.functional.cross_entropy(logits[valid], batch["targets"][valid])


def element_scores(logits, batch):
    """Per element: 1 when the argmax of the softmax probabilities summed over its window
    (its symbol frame and its gap frames) is its state, else 0; [B, E] with padding
    elements 0, and the mask of real elements."""
    probs = torch.softmax(logits.detach().float(), dim=-1)  # [B, T, C]
    B, T, C = probs.shape
    # prefix sums over frames give each window's sum in two lookups
    csum = torch.cat([torch.zeros(B, 1, C, dtype=probs.dtype), probs.cumsum(dim=1)], dim=1)
    start, length = batch["window_start"], batch["window_len"]
    end = (start + length).clamp(max=T)
    gather = lambda idx: csum.gather(1, idx.unsqueeze(-1).expand(-1, -1, C))
    window = gather(end) - gather(start)  # [B, E, C]
    real = length > 0
    right = (window.argmax(dim=-1) == batch["element_targets"]) & real
    return right, real


def element_accuracy(logits, batch):
    """The fraction of the batch's elements that are right (element_scores): the accuracy
    `selectivbench train` reports, over a whole test split when summed over its batches
    (use element_scores and add the counts for that)."""
    right, real = element_scores(logits, batch)
    return right.sum().item() / max(real.sum().item(), 1)
