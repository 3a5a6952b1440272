"""What every construct and chart uses: checking props (``validation``), shared names (``conventions``), cost lines
(``cost``), cdk-nag acknowledgements (``nag``), CloudFormation's template limits (``template_limits``)."""
