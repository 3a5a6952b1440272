#!/usr/bin/env node
/*
 * The peer's floor for `make bench` (scripts/bench_synth.py): one empty stack on the peer's own aws-cdk-lib, in the
 * peer's folder, so that the bench can tell what the peer's app adds to what Node.js, the CLI and aws-cdk-lib cost
 * anyway (as scripts/empty_app.py is the floor of the Python app). The stack holds one resource that does nothing (a
 * wait-condition handle): CloudFormation refuses a template without resources.
 */

const cdk = require("aws-cdk-lib");

const app = new cdk.App();
new cdk.CfnWaitConditionHandle(new cdk.Stack(app, "Empty"), "Nothing");
app.synth();
