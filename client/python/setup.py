"""Builds pld-client, generating the gRPC stubs from pld's .proto files.

The stubs are written into the build tree (never into the sources) under
``pld_client/_proto``; their imports are rewritten to live inside the
package, so installing pld-client adds no top-level ``pld`` module.
The .proto files are read from ``../../proto`` (this repository's), or from
``$PLD_PROTO_DIR``.
"""

import os
import re
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def proto_root() -> Path:
    root = Path(os.environ.get("PLD_PROTO_DIR", HERE.parent.parent / "proto"))
    if not (root / "pld" / "v1").is_dir():
        raise SystemExit(f"pld-client: no pld/v1/*.proto under {root}; set PLD_PROTO_DIR")
    return root


def generate(out: Path) -> None:
    import grpc_tools
    from grpc_tools import protoc

    root = proto_root()
    protos = sorted(str(p.relative_to(root)) for p in (root / "pld" / "v1").glob("*.proto"))
    target = out / "pld_client" / "_proto"
    target.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{well_known}",
        f"--python_out={target}",
        f"--grpc_python_out={target}",
        f"--pyi_out={target}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("pld-client: grpc_tools.protoc failed")
    for d in [target, target / "pld", target / "pld" / "v1"]:
        (d / "__init__.py").touch()
    # `from pld.v1 import x_pb2` -> `from pld_client._proto.pld.v1 import x_pb2`
    for f in (target / "pld" / "v1").glob("*.py*"):
        text = f.read_text()
        text = re.sub(r"^from pld\.v1 import", "from pld_client._proto.pld.v1 import", text, flags=re.M)
        text = re.sub(r"^import pld\.v1\.", "import pld_client._proto.pld.v1.", text, flags=re.M)
        f.write_text(text)


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        generate(Path(self.build_lib))


setup(cmdclass={"build_py": BuildWithStubs})
