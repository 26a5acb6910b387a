"""kael.utils: kael.utils.data, torch.utils.data's datasets, samplers and DataLoader."""
from . import data  # noqa: F401
