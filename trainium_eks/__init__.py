"""trainium-eks: AWS CDK constructs for distributed deep-learning training on Amazon EKS, Trainium first."""
