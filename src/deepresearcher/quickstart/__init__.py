"""The quickstart's own recipe: its steps, the tiny model, the machine's calibration and the report."""
