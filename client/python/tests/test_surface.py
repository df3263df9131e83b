"""The Python client covers the service: every rpc of ``pld.v1.Pld`` is
called by ``Client`` (a new rpc fails here until the client reaches it),
and every kind of ``BatchOp`` has its ``Batch`` method. Read off the
generated descriptors, so the service's own list is the one list."""

import inspect
import re

from pld_client import batch, client
from pld_client._proto.pld.v1 import pld_pb2 as pb
from pld_client.batch import Batch


def rpcs():
    return {m.name for m in pb.DESCRIPTOR.services_by_name["Pld"].methods}


def test_every_rpc_of_the_service_is_called_by_the_client():
    source = inspect.getsource(client) + inspect.getsource(batch)
    called = set(re.findall(r"\b(?:self|c)\._stub\.([A-Za-z]+)\b", source))
    assert len(rpcs()) >= 22, rpcs()
    assert rpcs() - called == set(), "rpcs the Python client never calls"
    assert called - rpcs() == set(), "stub calls the service does not have"


def test_every_batch_op_has_its_batch_method():
    kinds = {f.name for f in pb.BatchOp.DESCRIPTOR.oneofs_by_name["op"].fields}
    assert kinds, "BatchOp has no ops"
    missing = {k for k in kinds if not callable(getattr(Batch, k, None))}
    assert missing == set(), "BatchOp kinds with no Batch method"
