#!/usr/bin/env bash
# Creates .venv-composer, the environment of the Composer smoke test (tests/images/test_composer_resnet.py), from
# requirements-composer.txt: the Composer image's exact pins (composer 0.32.1, torch 2.7.0 from PyPI, the CUDA build,
# which runs on the CPU). Composer pins torch<2.7.1, so it cannot share .venv (torch 2.13.0).
#
# Idempotent: the environment records the SHA-256 of the requirement files it was built from and is left alone while
# they are unchanged; when they change it is rebuilt from scratch, so no package of an older pin set lingers.
# Measured on a 2-core machine: about 70 s and 2.7 GB of downloads, 5.4 GB on disk (pip's cache is not used, which
# would double the disk). This machine's pip cap (torch<=2.14.1 in /etc/xdg/pip) admits these pins unchanged.
#
# Usage: scripts/composer_env.sh   (PYTHON=python3.11 to choose the interpreter; the image runs Python 3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir=.venv-composer
python=${PYTHON:-python3}
stamp="$env_dir/.requirements.sha256"
wanted=$(cat requirements-composer.txt images/composer-resnet/requirements.txt | sha256sum | cut -d' ' -f1)

if [ -x "$env_dir/bin/composer" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
    echo "$env_dir is up to date"
    exit 0
fi
rm -rf "$env_dir"
"$python" -m venv "$env_dir"
"$env_dir/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check -r requirements-composer.txt
"$env_dir/bin/python" -m pip check
"$env_dir/bin/python" -c 'import composer, composer.algorithms, torch, torchvision; print("composer", composer.__version__, "torch", torch.__version__, "torchvision", torchvision.__version__)'
echo "$wanted" > "$stamp"
