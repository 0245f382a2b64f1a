"""Reports: the profiler's text table, its HTML timeline and Chrome trace export."""
