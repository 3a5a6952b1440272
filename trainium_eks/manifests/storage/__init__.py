"""Charts of the shared volumes: FSx for Lustre and EFS volumes and claims."""
