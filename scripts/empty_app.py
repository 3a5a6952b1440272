"""The floor of `make bench`: a CDK app with one empty stack, on the same Python, jsii and aws-cdk-lib.

The stack holds one resource that does nothing (a wait-condition handle): CloudFormation refuses a template without
resources. Like app.py, it leaves template validation to the tests.
"""

import aws_cdk as cdk

app = cdk.App(builtin_cloud_formation_validation=False)
cdk.CfnWaitConditionHandle(cdk.Stack(app, "Empty"), "Nothing")
app.synth()
