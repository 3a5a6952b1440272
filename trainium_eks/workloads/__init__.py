"""The seed systems' runs: their jobs, arguments and data sets (BERT phase 1, CIFAR-10 DDP, Composer ResNet and its
recipes)."""
