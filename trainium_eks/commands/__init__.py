"""The user's commands (``python -m trainium_eks <command>``): each module calls AWS only when it runs."""
