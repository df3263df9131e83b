"""``pypto.runtime.distributed_runner`` on pld: what PyPTO's programs and
tests take from it. A SubWorker override receives the SubWorker's
arguments as a list; on pld those are the host tensors themselves, so
``_tensor_from_continuous`` gives a torch view of one (the same memory:
writes reach the caller, as PyPTO's zero-copy conversion does)."""

import sys

from pld_pypto.kernel import as_numpy


def _tensor_from_continuous(arg):
    """A torch tensor on ``arg``'s memory (a torch tensor as is)."""
    if type(arg).__module__.startswith("torch"):
        return arg
    torch = sys.modules.get("torch")
    if torch is None:
        raise TypeError("_tensor_from_continuous converts to torch: import torch first")
    a = as_numpy(arg)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view("int16")).view(torch.bfloat16)
    return torch.from_numpy(a)
