"""The preflight checks (``lambda/preflight/preflight_checks/``), one test module per module, against moto where moto
implements the call (AZs, instance types and offerings by AZ ID, subnets, CloudWatch metrics, FSx and EFS file systems)
and botocore's Stubber where it does not (Service Quotas' EC2 quotas, capacity reservations, EKS cluster versions);
Stubber checks every stubbed request and response against the botocore service model."""
