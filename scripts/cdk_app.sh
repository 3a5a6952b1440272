#!/bin/sh
# cdk.json's app, run by cdk from the project's folder: app.py on the project's .venv when there is one (make install
# creates it, and then nothing needs activating), else on the active environment's python3 (CDK Pipelines' synth step,
# a conda or poetry environment, a copy of the project without its .venv). -O: jsii's argument type checks off.
if [ -x .venv/bin/python ]; then
  exec .venv/bin/python -O app.py "$@"
fi
exec python3 -O app.py "$@"
