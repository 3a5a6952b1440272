"""The stacks of the default app: what they share (``system_stack``), one per seed system, and the app's context
(``app_context``)."""
