"""Facts with their sources: instance types (``catalog``), prices (``pricing``), upstream versions (``versions``),
regions and their AZ IDs (``regions``)."""
