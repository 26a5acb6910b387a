"""kael.utils.data.dataloader: where torch keeps DataLoader (``from torch.utils.data.dataloader
import DataLoader``); the classes live in kael.utils.data."""
from . import DataLoader, default_collate, get_worker_info  # noqa: F401
