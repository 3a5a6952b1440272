"""What the tests share: apps and templates, manifests, launches, clusters, validators. No test module imports
another test module; they import from here."""
