"""pld-client: Python access to pld daemons over gRPC.

>>> from pld_client import Client
>>> c = Client("127.0.0.1:50051")            # doctest: +SKIP
>>> c.put_array(1, 0, np.ones(4, np.float32))  # doctest: +SKIP
"""

from pld_client.batch import Batch, PldBatchError
from pld_client.client import Client
from pld_client.wire import DTYPES, PldError

__all__ = ["Client", "PldError", "PldBatchError", "Batch", "DTYPES"]
__version__ = "0.1.0"
