"""Multi-process runs: strategies by name, and a failing rank ending the whole job."""
